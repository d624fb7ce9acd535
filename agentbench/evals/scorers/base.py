"""What every scorer sees and returns: `ScoreContext` in, `Score` out, and the `Scorer` protocol.

A case is scored once all of its turns have run. The context carries the final run, every
turn, every event of every run in order, the trajectory built from them, the final output,
the total usage, the case's wall time and cost, and the model an LLM judge must call (the
harness hands in a recording or replaying model, so judged scores replay deterministically).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from agentbench.replay.trajectory import Step, trajectory
from agentbench.runtime.models import ChatModel, Usage
from agentbench.runtime.run_state import RunResult


@dataclass
class Score:
    """One scorer's verdict on one case.

    `value` is in [0, 1] (partial credit where it means something), `reason` a sentence a
    person reading a CI log understands, `details` structured data for reports. `error` is set
    when the scorer could not judge at all (no judge model, a custom scorer that raised): such a
    score has not passed, and it is not the agent's fault.
    """

    name: str
    value: float
    passed: bool
    reason: str
    details: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.value <= 1.0:
            raise ValueError(f"score {self.name!r}: value {self.value!r} is not between 0 and 1")

    @classmethod
    def failed_to_score(cls, name: str, reason: str, **details: Any) -> Score:
        """A score for a case the scorer could not judge; `reason` says why."""
        return cls(name, 0.0, False, reason, dict(details), error=reason)


@dataclass
class ScoreContext:
    """Everything a scorer may look at for one case (one trial)."""

    case_id: str
    input: Any
    result: RunResult  # the final run of the last turn
    turns: list[RunResult]  # one per user turn, each the last run of its turn
    events: list[Any]  # every event of every run of every turn, in order
    steps: list[Step]  # trajectory(events)
    output: Any
    usage: Usage  # total over every run of every turn
    duration_ms: float  # wall time of the whole case
    cost_usd: float | None = None  # None when the model's pricing is unknown
    judge: ChatModel | None = None
    # Every model call was answered from a recording: the case's time then measures this
    # machine (a replayed call takes microseconds), not the model.
    replayed: bool = False

    @classmethod
    def from_runs(
        cls,
        case_id: str,
        input: Any,
        turns: Sequence[RunResult],
        *,
        duration_ms: float | None = None,
        cost_usd: float | None = None,
        judge: ChatModel | None = None,
        steps: list[Step] | None = None,
        replayed: bool = False,
    ) -> ScoreContext:
        """Build the context from the `RunResult` of each turn (`Runner.run`'s return value).

        Without `duration_ms`, the case's wall time is the sum of its runs' durations.
        `steps` is the trajectory of those runs' events when the caller has it already.
        """
        if not turns:
            raise ValueError(f"case {case_id!r}: cannot score a case without any run")
        runs = [run for turn in turns for run in runs_of(turn)]
        events = [event for run in runs for event in run.events]
        usage = sum((run.usage for run in runs), Usage())
        final = turns[-1]
        return cls(
            case_id=case_id,
            input=input,
            result=final,
            turns=list(turns),
            events=events,
            steps=trajectory(events) if steps is None else steps,
            output=final.output,
            usage=usage,
            duration_ms=(
                duration_ms if duration_ms is not None else sum(r.duration_ms for r in runs)
            ),
            cost_usd=cost_usd,
            judge=judge,
            replayed=replayed,
        )

    @property
    def runs(self) -> list[RunResult]:
        """Every run of every turn (handoffs included), first to last."""
        return [run for turn in self.turns for run in runs_of(turn)]


def runs_of(turn: RunResult) -> list[RunResult]:
    """The runs of one turn: a handoff or a chain makes several, `RunResult.runs` lists them."""
    return list(turn.runs) if turn.runs else [turn]


@runtime_checkable
class Scorer(Protocol):
    """Anything with a name that turns a `ScoreContext` into a `Score`."""

    name: str

    async def score(self, ctx: ScoreContext) -> Score: ...


async def score_all(scorers: Sequence[Scorer], ctx: ScoreContext) -> list[Score]:
    """Score one case with every scorer, in order; a scorer that raises becomes an error score.

    Sequential on purpose: LLM judges share one recording or replaying model, which matches
    calls by their order, so concurrent judges would make re-scoring non-deterministic.
    """
    scores: list[Score] = []
    for scorer in scorers:
        try:
            scores.append(await scorer.score(ctx))
        except Exception as exc:
            scores.append(
                Score.failed_to_score(
                    scorer.name,
                    f"scorer {scorer.name} raised {type(exc).__name__}: {exc}",
                    exception=type(exc).__name__,
                )
            )
    return scores
