"""The `trajectory` scorer: did the agent take the expected steps (tool calls and handoffs)?

Modes follow langchain agentevals' trajectory match: `strict` (the same steps in the same
order, nothing else), `unordered` (the same steps in any order), `subset` (every step taken is
among the expected ones) and `superset` (every expected step was taken; extra steps are fine).
Steps are matched as multisets: an expected step is used by at most one actual step.

Partial credit is the fraction of steps matched (for `strict`, the longest run of steps in the
expected order); a case passes at a full match, or at `threshold` when given. Attribution is
handoff-aware: an expected step with `agent` matches only a call that agent made, and handoffs
are steps of their own (`{handoff: refunds}`). The framework's routing tools
(`transfer_to_<agent>`, `dispatch_to_agent`) are represented by their handoff steps, unless an
expected step names one of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentbench.evals.scorers.arguments import ArgsMatch, argument_differences, is_routing_tool
from agentbench.evals.scorers.base import Score, ScoreContext
from agentbench.evals.scorers.registry import ScorerParams, builtin
from agentbench.evals.scorers.text import brief
from agentbench.replay.trajectory import Step


class ExpectedStep(BaseModel):
    """One expected step: `{tool: name, args?: {...}, agent?: name}` or `{handoff: agent}`."""

    model_config = ConfigDict(extra="forbid")

    tool: str | None = Field(None, description="A tool the agent calls.")
    args: dict[str, Any] | None = Field(None, description="Arguments of the tool call.")
    handoff: str | None = Field(None, description="The agent control is handed to.")
    agent: str | None = Field(
        None, description="The agent taking the step (for a handoff: the agent handing off)."
    )

    @model_validator(mode="after")
    def _one_kind(self) -> ExpectedStep:
        if (self.tool is None) == (self.handoff is None):
            raise ValueError("a step is either {tool: name, ...} or {handoff: agent}, not both")
        if self.handoff is not None and self.args is not None:
            raise ValueError("args belong to a tool step, not to a handoff")
        return self

    def label(self) -> str:
        by = f" (by {self.agent})" if self.agent else ""
        if self.handoff is not None:
            return f"handoff to {self.handoff}{by}"
        args = f" {brief(self.args, 60)}" if self.args is not None else ""
        return f"{self.tool}{args}{by}"


@dataclass(frozen=True)
class _Taken:
    """An actual step: a tool call or a handoff."""

    kind: str  # "tool" | "handoff"
    name: str  # the tool, or the target agent
    agent: str
    arguments: Any = None

    def label(self) -> str:
        if self.kind == "handoff":
            return f"handoff {self.agent}→{self.name}"
        return f"{self.name} {brief(self.arguments, 60)}"


def taken_steps(steps: list[Step], keep_routing: bool = False) -> list[_Taken]:
    """The tool calls and handoffs of a trajectory, in order."""
    taken: list[_Taken] = []
    for step in steps:
        if step.kind == "tool_call":
            tool = step.signature[2]
            if keep_routing or not is_routing_tool(tool):
                taken.append(_Taken("tool", tool, step.agent, step.detail["arguments"]))
        elif step.kind == "handoff":
            taken.append(_Taken("handoff", step.detail["to"], step.agent))
    return taken


@builtin
class TrajectoryMatch:
    """The agent's tool calls and handoffs match an expected trajectory."""

    name = "trajectory"

    class Params(ScorerParams):
        shorthand: ClassVar[str | None] = "expected"
        expected: list[ExpectedStep] = Field(
            description="The expected steps: {tool: name, args?, agent?} or {handoff: agent}."
        )
        mode: Literal["strict", "unordered", "subset", "superset"] = Field(
            "strict",
            description="strict: same steps, same order; unordered: same steps, any order; "
            "subset: no step beyond the expected ones; superset: every expected step taken.",
        )
        match: ArgsMatch = Field(
            "subset", description="How arguments are compared: subset or exact."
        )
        threshold: float | None = Field(
            None, ge=0, le=1, description="Pass at this fraction matched (default: full match)."
        )

    def __init__(self, params: Params) -> None:
        self.params = params
        self.keep_routing = any(
            s.tool is not None and is_routing_tool(s.tool) for s in params.expected
        )

    def matches(self, want: ExpectedStep, got: _Taken) -> bool:
        if want.agent is not None and want.agent != got.agent:
            return False
        if want.handoff is not None:
            return got.kind == "handoff" and got.name == want.handoff
        if got.kind != "tool" or got.name != want.tool:
            return False
        return want.args is None or not argument_differences(
            want.args, got.arguments, match=self.params.match
        )

    async def score(self, ctx: ScoreContext) -> Score:
        want = self.params.expected
        got = taken_steps(ctx.steps, self.keep_routing)
        mode = self.params.mode
        if mode == "strict":
            matched, verdict = _strict(want, got, self.matches)
            total = max(len(want), len(got))
        else:
            pairs = _pairs(want, got, self.matches)
            matched = len(pairs)
            total = {"unordered": max(len(want), len(got)), "subset": len(got)}.get(mode, len(want))
            verdict = _unmatched(want, got, pairs, mode)
        value = matched / total if total else 1.0
        threshold = self.params.threshold if self.params.threshold is not None else 1.0
        passed = value >= threshold
        actual = " → ".join(t.label() for t in got) or "no steps"
        details = {"matched": matched, "of": total, "actual": [t.label() for t in got]}
        if value == 1.0:
            return Score(self.name, 1.0, True, f"trajectory matches ({mode}): {actual}", details)
        head = f"trajectory {'meets the threshold' if passed else 'does not match'} ({mode}, "
        head += f"{matched} of {total} steps matched): {verdict}; actual: {actual}"
        return Score(self.name, value, passed, head, details)


Matcher = Callable[[ExpectedStep, _Taken], bool]


def _strict(want: list[ExpectedStep], got: list[_Taken], matches: Matcher) -> tuple[int, str]:
    """Longest common subsequence of matching steps, and where the two first diverge."""
    rows, cols = len(want), len(got)
    table = [[0] * (cols + 1) for _ in range(rows + 1)]
    for i in range(rows - 1, -1, -1):
        for j in range(cols - 1, -1, -1):
            table[i][j] = (
                table[i + 1][j + 1] + 1
                if matches(want[i], got[j])
                else max(table[i + 1][j], table[i][j + 1])
            )
    for index in range(max(rows, cols)):
        if index >= rows:
            return table[0][0], f"step {index + 1}: unexpected {got[index].label()}"
        if index >= cols:
            return table[0][0], f"step {index + 1}: expected {want[index].label()}, got nothing"
        if not matches(want[index], got[index]):
            return table[0][0], (
                f"step {index + 1}: expected {want[index].label()}, got {got[index].label()}"
            )
    return table[0][0], "identical"


def _pairs(want: list[ExpectedStep], got: list[_Taken], matches: Matcher) -> dict[int, int]:
    """A maximum matching of actual steps to expected ones: {actual index: expected index}."""
    owner: dict[int, int] = {}  # expected index -> actual index

    def assign(actual: int, seen: set[int]) -> bool:
        for expected in range(len(want)):
            if expected in seen or not matches(want[expected], got[actual]):
                continue
            seen.add(expected)
            if expected not in owner or assign(owner[expected], seen):
                owner[expected] = actual
                return True
        return False

    for actual in range(len(got)):
        assign(actual, set())
    return {actual: expected for expected, actual in owner.items()}


def _unmatched(
    want: list[ExpectedStep], got: list[_Taken], pairs: dict[int, int], mode: str
) -> str:
    used = set(pairs.values())
    missing = [w.label() for i, w in enumerate(want) if i not in used]
    extra = [g.label() for i, g in enumerate(got) if i not in pairs]
    parts = []
    if missing and mode in ("unordered", "superset"):
        parts.append("missing " + ", ".join(missing))
    if extra and mode in ("unordered", "subset"):
        parts.append("unexpected " + ", ".join(extra))
    return "; ".join(parts)
