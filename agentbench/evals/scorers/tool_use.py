"""Scorers of which tools the agent called: `tool_called` and `tool_not_called`.

Only calls that ran count (a call the runtime rejected — unknown tool, bad arguments — is
mentioned in the reason but never satisfies an expectation). With `agent`, only calls made by
that agent count, which is how a case says *who* should have called a tool after a handoff.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, ClassVar

from pydantic import Field

from agentbench.evals.scorers.arguments import (
    ArgsMatch,
    ToolCallSeen,
    argument_differences,
    rejected_calls,
    tool_calls,
)
from agentbench.evals.scorers.base import Score, ScoreContext
from agentbench.evals.scorers.registry import ScorerParams, builtin
from agentbench.evals.scorers.text import brief


class _CallParams(ScorerParams):
    shorthand: ClassVar[str | None] = "name"
    name: str = Field(description="The tool's name.")
    args: dict[str, Any] | None = Field(
        None, description="Arguments the call must have been made with."
    )
    match: ArgsMatch = Field(
        "subset",
        description="subset: the named arguments must match, others may be present; "
        "exact: no other arguments either.",
    )
    ignore: list[str] = Field(
        default_factory=list,
        description="Argument keys left out of the comparison (dotted for nested keys).",
    )
    agent: str | None = Field(None, description="Only calls made by this agent count.")


def _describe(call_params: _CallParams) -> str:
    args = f" with {brief(call_params.args)}" if call_params.args is not None else ""
    by = f" by agent {call_params.agent}" if call_params.agent else ""
    return f"{call_params.name}{args}{by}"


def _times(count: int) -> str:
    return "once" if count == 1 else f"{count} times"


def _summary(calls: list[ToolCallSeen]) -> str:
    if not calls:
        return "no tools were called"
    counts = Counter(call.tool for call in calls)
    return "called: " + ", ".join(f"{t} ×{n}" if n > 1 else t for t, n in counts.items())


class _Calls:
    """The calls of one tool in a case, narrowed step by step to those that match."""

    def __init__(self, params: _CallParams, ctx: ScoreContext) -> None:
        self.params = params
        self.all = tool_calls(ctx.steps)
        self.named = [c for c in self.all if c.tool == params.name]
        self.by_agent = [c for c in self.named if params.agent in (None, c.agent)]
        self.matching = [c for c in self.by_agent if not self.differences(c)]
        self.rejected = rejected_calls(ctx.steps, params.name)

    def differences(self, call: ToolCallSeen) -> list[str]:
        if self.params.args is None:
            return []
        return argument_differences(
            self.params.args, call.arguments, match=self.params.match, ignore=self.params.ignore
        )

    def why_none_match(self) -> str:
        """Why no call satisfied the expectation, for a failing reason."""
        p = self.params
        if not self.named:
            note = f"{p.name} was never called ({_summary(self.all)})"
            if self.rejected:
                note += f"; {len(self.rejected)} call(s) were rejected: {', '.join(self.rejected)}"
            return note
        if not self.by_agent:
            agents = ", ".join(sorted({c.agent for c in self.named}))
            return f"{p.name} was called only by agent {agents}"
        shown = ", ".join(brief(c.arguments, 80) for c in self.by_agent[:3])
        more = f" and {len(self.by_agent) - 3} more" if len(self.by_agent) > 3 else ""
        closest = min(self.by_agent, key=lambda c: len(self.differences(c)))
        return f"called {p.name} with {shown}{more} ({'; '.join(self.differences(closest))})"


@builtin
class ToolCalled:
    """A tool was called (optionally with given arguments, by a given agent, a number of times)."""

    name = "tool_called"

    class Params(_CallParams):
        times: int | None = Field(
            None, ge=1, description="Exactly this many matching calls (default: at least one)."
        )

    def __init__(self, params: Params) -> None:
        self.params = params

    async def score(self, ctx: ScoreContext) -> Score:
        calls = _Calls(self.params, ctx)
        expected = _describe(self.params)
        count = len(calls.matching)
        details = {"matching_calls": count, "calls": len(calls.named)}
        times = self.params.times
        if count and (times is None or count == times):
            return Score(self.name, 1.0, True, f"called {expected} {_times(count)}", details)
        if count:
            return Score(
                self.name,
                0.0,
                False,
                f"expected {expected} {_times(times or 1)}; it was called {_times(count)}",
                details,
            )
        return Score(
            self.name, 0.0, False, f"expected tool {expected}; {calls.why_none_match()}", details
        )


@builtin
class ToolNotCalled:
    """A tool was never called (or never with given arguments, or never by a given agent)."""

    name = "tool_not_called"

    class Params(_CallParams):
        pass

    def __init__(self, params: Params) -> None:
        self.params = params

    async def score(self, ctx: ScoreContext) -> Score:
        calls = _Calls(self.params, ctx)
        expected = _describe(self.params)
        if not calls.matching:
            other = (
                f" (called with {', '.join(brief(c.arguments, 60) for c in calls.by_agent[:3])})"
                if calls.by_agent
                else ""
            )
            return Score(self.name, 1.0, True, f"{expected} was not called{other}")
        first = calls.matching[0]
        return Score(
            self.name,
            0.0,
            False,
            f"expected no call to {expected}; it was called {_times(len(calls.matching))}, "
            f"first by agent {first.agent} with {brief(first.arguments)}",
            {"matching_calls": len(calls.matching)},
        )
