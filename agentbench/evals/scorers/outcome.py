"""The `stop_reason` scorer: how the conversation ended.

It looks at the final run of the last turn: after a handoff that is the run of the agent that
took over, whose own stop reason says how the conversation ended (the agent handing off always
stops with `handoff`).
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from agentbench.evals.scorers.base import Score, ScoreContext
from agentbench.evals.scorers.registry import ScorerParams, builtin
from agentbench.evals.scorers.text import clip
from agentbench.runtime.events import StopReason


@builtin
class StopReasonIs:
    """The conversation ended with the expected stop reason (or one of several)."""

    name = "stop_reason"

    class Params(ScorerParams):
        shorthand: ClassVar[str | None] = "value"
        value: StopReason | list[StopReason] = Field(
            StopReason.COMPLETED,
            description="The expected stop reason, or a list of accepted ones.",
        )

    def __init__(self, params: Params) -> None:
        self.params = params
        value = params.value
        self.accepted = [value] if isinstance(value, StopReason) else list(value)

    async def score(self, ctx: ScoreContext) -> Score:
        actual = ctx.result.stop_reason
        details = {"stop_reason": actual.value, "agent": ctx.result.agent}
        if actual in self.accepted:
            return Score(self.name, 1.0, True, f"stop reason {actual.value}", details)
        wanted = " or ".join(reason.value for reason in self.accepted)
        reason = (
            f"expected stop reason {wanted}; agent {ctx.result.agent} stopped with {actual.value}"
        )
        if ctx.result.error is not None:
            reason += f" ({ctx.result.error.type}: {clip(ctx.result.error.message, 200)})"
        return Score(self.name, 0.0, False, reason, details)
