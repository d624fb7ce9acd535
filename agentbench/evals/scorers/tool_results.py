"""The `tool_result` scorer: what a tool call returned, as the model received it.

A replayed run keeps the recorded final answer even when a tool now returns something else, so
an expectation on the output alone misses the change; this one looks at the result itself. The
text searched is the observation the runtime hands the model for the result (a failure's
`[business_failure] …` line and data included, a long result already cut with its
`…[truncated …]` marker); `equals` compares the data of an `ok` result, or the error message
of a failure, as JSON (key order never counts).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from agentbench.evals.scorers.base import Score, ScoreContext
from agentbench.evals.scorers.picking import check_position, ordinal, pick
from agentbench.evals.scorers.registry import ScorerParams, builtin
from agentbench.evals.scorers.text import brief, quoted
from agentbench.replay.trajectory import canonical
from agentbench.runtime.tools import ResultKind


def _texts(value: str | list[str] | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


@builtin
class ToolResultIs:
    """A tool call's result contains (or does not contain, or equals) given values."""

    name = "tool_result"

    class Params(ScorerParams):
        name: str = Field(description="The tool's name.")
        call: int | None = Field(
            None,
            description="Which call of this tool: 1 the first, -1 the last. Default: any call "
            "(the expectation holds if one call's result satisfies all of it).",
        )
        contains: str | list[str] | None = Field(
            None, description="Text, or texts, the result as the model saw it must contain."
        )
        not_contains: str | list[str] | None = Field(
            None, description="Text, or texts, the result must not contain."
        )
        equals: Any = Field(
            None,
            description="The result's data (an ok result) or error message (a failure), "
            "compared as JSON.",
        )
        kind: ResultKind | None = Field(
            None, description="How the call ended: ok, business_failure or system_error."
        )
        agent: str | None = Field(None, description="Only calls made by this agent count.")

        @field_validator("call")
        @classmethod
        def _position(cls, value: int | None) -> int | None:
            return check_position(value)

        @model_validator(mode="after")
        def _something_to_check(self) -> ToolResultIs.Params:
            checks = (self.contains, self.not_contains, self.kind)
            if all(c is None for c in checks) and "equals" not in self.model_fields_set:
                raise ValueError("give at least one of contains, not_contains, equals or kind")
            return self

    def __init__(self, params: Params) -> None:
        self.params = params

    def _where(self) -> str:
        p = self.params
        which = "any call" if p.call is None else f"the {ordinal(p.call)} call"
        by = f" by agent {p.agent}" if p.agent else ""
        return f"{which} of {p.name}{by}"

    def _problems(self, event: Any) -> list[str]:
        """How one call's result misses the expectation; [] when it satisfies it."""
        p, result = self.params, event.result
        text = result.observation()
        problems: list[str] = []
        if p.kind is not None and result.kind != p.kind:
            problems.append(f"it ended {result.kind.value}, not {p.kind.value}")
        missing = [t for t in _texts(p.contains) if t not in text]
        if missing:
            problems.append(f"it does not contain {', '.join(quoted(t, 60) for t in missing)}")
        present = [t for t in _texts(p.not_contains) if t in text]
        if present:
            problems.append(f"it contains {', '.join(quoted(t, 60) for t in present)}")
        if "equals" in p.model_fields_set:
            actual = result.data if result.kind is ResultKind.OK else result.error
            if canonical(actual) != canonical(p.equals):
                problems.append(f"it is {brief(canonical(actual))}, not {brief(p.equals)}")
        return problems

    async def score(self, ctx: ScoreContext) -> Score:
        p = self.params
        finished = [
            e
            for e in ctx.events
            if getattr(e, "kind", None) == "tool_finished"
            and e.tool == p.name
            and p.agent in (None, e.agent)
        ]
        chosen = pick(finished, p.call)
        if not chosen:
            return Score(
                self.name,
                0.0,
                False,
                f"expected {self._where()}; {p.name} finished {len(finished)} time(s)",
                {"calls": len(finished)},
            )
        verdicts = [(e, self._problems(e)) for e in chosen]
        details: dict[str, Any] = {"calls": len(finished)}
        passing = [e for e, problems in verdicts if not problems]
        if passing:
            shown = quoted(passing[0].result.observation(), 100)
            return Score(self.name, 1.0, True, f"{self._where()} returned {shown}", details)
        event, problems = verdicts[-1]
        shown = quoted(event.result.observation(), 200)
        return Score(
            self.name,
            0.0,
            False,
            f"{self._where()}: {'; '.join(problems)} (result: {shown})",
            details,
        )
