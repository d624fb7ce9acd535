"""Scorers of the final output as text: equals, contains, does not contain, matches a regex.

Structured output (a pydantic model, a dict) is compared as JSON text, except by
`output_equals` with a non-text value, which compares the data itself (key order and JSON
formatting never count).
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from agentbench.evals.scorers.base import Score, ScoreContext
from agentbench.evals.scorers.registry import ScorerParams, builtin
from agentbench.evals.scorers.text import brief, clip, output_text, quoted
from agentbench.replay.trajectory import canonical


def no_output(ctx: ScoreContext, name: str) -> Score | None:
    """A failing score when the run produced no output at all, saying how it ended."""
    if ctx.output is not None:
        return None
    ending = f"stop reason {ctx.result.stop_reason.value}"
    if ctx.result.error is not None:
        ending += f": {ctx.result.error.type}: {clip(ctx.result.error.message, 160)}"
    return Score(name, 0.0, False, f"the run produced no output ({ending})")


def _values(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


@builtin
class OutputEquals:
    """The final output equals a value (text, or data compared as JSON)."""

    name = "output_equals"

    class Params(ScorerParams):
        shorthand: ClassVar[str | None] = "value"
        value: Any = Field(
            description="The expected output: text, or data (a mapping, a list, a number) "
            "compared with structured output as JSON."
        )
        ignore_case: bool = Field(False, description="Compare text without regard to case.")
        strip: bool = Field(True, description="Ignore leading and trailing whitespace of text.")

    def __init__(self, params: Params) -> None:
        self.params = params

    async def score(self, ctx: ScoreContext) -> Score:
        if (missing := no_output(ctx, self.name)) is not None:
            return missing
        expected = self.params.value
        if not isinstance(expected, str):
            equal = canonical(expected) == canonical(ctx.output)
            if equal:
                return Score(self.name, 1.0, True, f"output equals {brief(expected)}")
            return Score(
                self.name,
                0.0,
                False,
                f"expected output {brief(expected)}; got {brief(canonical(ctx.output))}",
            )
        actual = output_text(ctx.output)
        if self._normal(actual) == self._normal(expected):
            return Score(self.name, 1.0, True, f"output equals {quoted(expected)}")
        reason = f"expected output {quoted(expected)}; got {quoted(actual)}"
        if " ".join(actual.split()).lower() == " ".join(expected.split()).lower():
            reason += " (they differ only in case or whitespace; see ignore_case and strip)"
        return Score(self.name, 0.0, False, reason)

    def _normal(self, text: str) -> str:
        text = text.strip() if self.params.strip else text
        return text.lower() if self.params.ignore_case else text


@builtin
class OutputContains:
    """The final output contains a text, or all (or any) of several texts."""

    name = "output_contains"

    class Params(ScorerParams):
        shorthand: ClassVar[str | None] = "value"
        value: str | list[str] = Field(
            description="The text, or list of texts, the output must contain."
        )
        mode: Literal["all", "any"] = Field(
            "all", description="all: every text must occur; any: at least one."
        )
        ignore_case: bool = Field(False, description="Search without regard to case.")

    def __init__(self, params: Params) -> None:
        self.params = params

    async def score(self, ctx: ScoreContext) -> Score:
        if (missing := no_output(ctx, self.name)) is not None:
            return missing
        text = output_text(ctx.output)
        wanted = _values(self.params.value)
        haystack = text.lower() if self.params.ignore_case else text
        found = [w for w in wanted if (w.lower() if self.params.ignore_case else w) in haystack]
        absent = [w for w in wanted if w not in found]
        details = {"found": found, "missing": absent}
        listed = ", ".join(quoted(w, 60) for w in absent)
        if self.params.mode == "any":
            if found:
                return Score(
                    self.name, 1.0, True, f"output contains {quoted(found[0], 60)}", details
                )
            reason = f"output contains none of {listed}; output: {quoted(text)}"
            return Score(self.name, 0.0, False, reason, details)
        value = len(found) / len(wanted) if wanted else 1.0
        if not absent:
            shown = ", ".join(quoted(w, 60) for w in found)
            return Score(self.name, 1.0, True, f"output contains {shown}", details)
        head = (
            f"output contains {', '.join(quoted(w, 60) for w in found)} but not {listed}"
            if found
            else f"output does not contain {listed}"
        )
        return Score(self.name, value, False, f"{head}; output: {quoted(text)}", details)


@builtin
class OutputNotContains:
    """The final output contains none of the given texts."""

    name = "output_not_contains"

    class Params(ScorerParams):
        shorthand: ClassVar[str | None] = "value"
        value: str | list[str] = Field(
            description="The text, or list of texts, that must not occur in the output."
        )
        ignore_case: bool = Field(False, description="Search without regard to case.")

    def __init__(self, params: Params) -> None:
        self.params = params

    async def score(self, ctx: ScoreContext) -> Score:
        text = output_text(ctx.output)
        banned = _values(self.params.value)
        haystack = text.lower() if self.params.ignore_case else text
        hits = [
            (word, at)
            for word in banned
            if (at := haystack.find(word.lower() if self.params.ignore_case else word)) >= 0
        ]
        if not hits:
            shown = ", ".join(quoted(w, 60) for w in banned)
            return Score(self.name, 1.0, True, f"output contains none of {shown}")
        word, at = hits[0]
        around = text[max(0, at - 40) : at + len(word) + 40]
        listed = ", ".join(quoted(w, 60) for w, _ in hits)
        return Score(
            self.name,
            1.0 - len(hits) / len(banned),
            False,
            f"output contains {listed}: …{quoted(around, 140)}…",
            {"found": [w for w, _ in hits]},
        )


_FLAGS = {
    "i": re.IGNORECASE,
    "ignorecase": re.IGNORECASE,
    "m": re.MULTILINE,
    "multiline": re.MULTILINE,
    "s": re.DOTALL,
    "dotall": re.DOTALL,
    "x": re.VERBOSE,
    "verbose": re.VERBOSE,
}
Flag = Literal["i", "m", "s", "x", "ignorecase", "multiline", "dotall", "verbose"]


@builtin
class OutputRegex:
    """The final output matches a regular expression (Python `re.search`)."""

    name = "output_regex"

    class Params(ScorerParams):
        shorthand: ClassVar[str | None] = "pattern"
        pattern: str = Field(description="A Python regular expression searched in the output.")
        flags: list[Flag] = Field(
            default_factory=list,
            description="Regex flags: i (ignorecase), m (multiline), s (dotall), x (verbose).",
        )

        @field_validator("flags", mode="before")
        @classmethod
        def _letters(cls, value: Any) -> Any:
            # `flags: im` is how people write flags; a list works too.
            if isinstance(value, str):
                return [value.lower()] if value.lower() in _FLAGS else list(value.lower())
            return [v.lower() if isinstance(v, str) else v for v in value]

        @field_validator("pattern")
        @classmethod
        def _compiles(cls, value: str) -> str:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a valid regular expression: {exc}") from None
            return value

    def __init__(self, params: Params) -> None:
        self.params = params
        flags = 0
        for flag in params.flags:
            flags |= _FLAGS[flag]
        self.regex = re.compile(params.pattern, flags)

    async def score(self, ctx: ScoreContext) -> Score:
        if (missing := no_output(ctx, self.name)) is not None:
            return missing
        text = output_text(ctx.output)
        found = self.regex.search(text)
        shown = f"/{self.params.pattern}/{''.join(f[0] for f in self.params.flags)}"
        if found is None:
            return Score(
                self.name, 0.0, False, f"output does not match {shown}; output: {quoted(text)}"
            )
        return Score(
            self.name,
            1.0,
            True,
            f"output matches {shown} at {quoted(found.group(0), 80)}",
            {"match": found.group(0), "groups": list(found.groups())},
        )
