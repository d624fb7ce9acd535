"""Align two trajectories step by step and name the first place where behaviour diverged.

Steps are aligned by signature (difflib over the two sequences), so an inserted tool call
shows as one `extra_step` instead of shifting every later step. Aligned steps whose details
differ are classified: `tool_args_changed`, `tool_result_changed`, `handoff_changed`,
`stop_reason_changed`, `output_changed`, `response_changed` (two live runs whose model answered
differently), `context_changed`, `memory_changed`; unaligned steps are `missing_step` (in the
original only) or `extra_step` (in the new run only). Request drift found during replay joins
as `request_drift` when replay is strict.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any

import orjson

from agentbench.replay.drift import Change, around_difference
from agentbench.replay.trajectory import Step

DIVERGENCE_CLASSES = (
    "request_drift",
    "tool_args_changed",
    "tool_result_changed",
    "extra_step",
    "missing_step",
    "handoff_changed",
    "stop_reason_changed",
    "output_changed",
    "response_changed",
    "context_changed",
    "memory_changed",
)


@dataclass
class Divergence:
    """One difference between the original and the new trajectory."""

    cls: str
    position: int  # index in the new trajectory (where it would be, for a missing step)
    agent: str
    step: int
    label: str
    old: Any = None
    new: Any = None
    changes: list[Change] = field(default_factory=list)

    def describe(self, width: int = 76) -> str:
        head = f"step {self.step} ({self.agent}) {self.cls}: {self.label}"
        if self.changes:
            lines = [c.describe(width) for c in self.changes[:6]]
            if len(self.changes) > 6:
                lines.append(f"… and {len(self.changes) - 6} more changes")
            return head + "\n" + "\n".join(f"    {line}" for line in lines)
        if self.cls in ("extra_step", "missing_step"):
            return head
        # Both sides cut around where they first differ, so the change itself shows.
        old, new = around_difference(_dump(self.old), _dump(self.new), width)
        return f"{head}\n    {old[1:-1]} → {new[1:-1]}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "class": self.cls,
            "position": self.position,
            "agent": self.agent,
            "step": self.step,
            "label": self.label,
            "old": self.old,
            "new": self.new,
            "changes": [c.as_dict() for c in self.changes],
        }


def _dump(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


def _classify(old: Step, new: Step, position: int) -> Divergence | None:
    if old.detail == new.detail:
        return None

    def made(cls: str, key: str | None = None) -> Divergence:
        before = old.detail.get(key) if key else old.detail
        after = new.detail.get(key) if key else new.detail
        return Divergence(cls, position, new.agent, new.step, new.label(), before, after)

    if new.kind == "tool_call":
        if old.detail["arguments"] != new.detail["arguments"]:
            return made("tool_args_changed", "arguments")
        return Divergence(
            "tool_result_changed",
            position,
            new.agent,
            new.step,
            new.label(),
            {k: old.detail[k] for k in ("result_kind", "result")},
            {k: new.detail[k] for k in ("result_kind", "result")},
        )
    if new.kind == "tool_rejected":
        return made("tool_args_changed")
    if new.kind == "handoff":
        return made("handoff_changed")
    if new.kind == "run_end":
        if old.detail["stop_reason"] != new.detail["stop_reason"]:
            return made("stop_reason_changed", "stop_reason")
        return made("output_changed", "output")
    if new.kind == "context":
        return made("context_changed", "new")
    if new.kind == "memory":
        return made("memory_changed")
    if new.kind == "model_call":
        return made("response_changed")
    return None


def align(original: list[Step], new: list[Step]) -> list[Divergence]:
    """Every difference between two trajectories, in the order of the new one."""
    matcher = difflib.SequenceMatcher(
        a=[s.signature for s in original], b=[s.signature for s in new], autojunk=False
    )
    found: list[Divergence] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            for offset in range(i2 - i1):
                divergence = _classify(original[i1 + offset], new[j1 + offset], j1 + offset)
                if divergence is not None:
                    found.append(divergence)
            continue
        paired = min(i2 - i1, j2 - j1) if tag == "replace" else 0
        for offset in range(paired):
            old, now = original[i1 + offset], new[j1 + offset]
            if old.kind == now.kind == "handoff" or old.kind == now.kind == "run_end":
                found.append(
                    Divergence(
                        "handoff_changed" if now.kind == "handoff" else "stop_reason_changed",
                        j1 + offset,
                        now.agent,
                        now.step,
                        now.label(),
                        {"agent": old.agent, **old.detail},
                        {"agent": now.agent, **now.detail},
                    )
                )
            else:
                found.append(_unmatched("missing_step", old, j1 + offset))
                found.append(_unmatched("extra_step", now, j1 + offset))
        for index in range(i1 + paired, i2):
            found.append(_unmatched("missing_step", original[index], j1 + paired))
        for index in range(j1 + paired, j2):
            found.append(_unmatched("extra_step", new[index], index))
    return found


def _unmatched(cls: str, step: Step, position: int) -> Divergence:
    value = {"signature": list(step.signature), **step.detail}
    return Divergence(
        cls,
        position,
        step.agent,
        step.step,
        step.label(),
        value if cls == "missing_step" else None,
        value if cls == "extra_step" else None,
    )
