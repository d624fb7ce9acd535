"""Drifted model calls of a session: which call's request differs from the recorded one
(`Drift`, with the changes `drift.request_diff` found), and where in the session it was sent
(`DriftAt`: the call, its agent and step).

`models.ReplayModel` records the drifts as it serves a cassette; `diff`, the replayer and the
harness locate them in the run's events and report them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from agentbench.replay.drift import Change


@dataclass
class Drift:
    """The request of model call `index` (0-based) differs from the recorded one."""

    index: int
    changes: list[Change]


@dataclass
class DriftAt:
    """Request drift located in the session: which model call, which agent, which step."""

    call: int  # 1-based model call of the session
    agent: str | None
    step: int | None
    drift: Drift

    def describe(self, width: int = 72) -> str:
        head = f"model call #{self.call} (step {self.step}, {self.agent})"
        return head + "".join(f"\n    {c.describe(width)}" for c in self.drift.changes[:6])

    def as_dict(self) -> dict[str, Any]:
        return {
            "call": self.call,
            "agent": self.agent,
            "step": self.step,
            "changes": [c.as_dict() for c in self.drift.changes],
        }


def locate_drifts(drifts: list[Drift], events: Iterable[Any]) -> list[DriftAt]:
    """Attach each drift to the model call it happened in: the n-th request of the session."""
    requests = [e for e in events if e.kind == "model_request"]
    located = []
    for drift in drifts:
        event = requests[drift.index] if drift.index < len(requests) else None
        located.append(
            DriftAt(
                call=drift.index + 1,
                agent=event.agent if event else None,
                step=event.step if event else None,
                drift=drift,
            )
        )
    return located
