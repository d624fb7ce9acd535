"""Scorers of the final output as data: valid against a JSON Schema, or a number within tolerance.

Output may be a pydantic model, a dict or list, or text. Text is parsed as JSON; failing that,
the first JSON object (or fenced ```json block) inside it is used and the reason says so, since
models often wrap JSON in prose. `output_number` reads the first number in text the same way.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, ClassVar

import orjson
from jsonschema import exceptions as jsonschema_errors
from jsonschema import validators
from pydantic import BaseModel, Field, field_validator

from agentbench.evals.scorers.base import Score, ScoreContext
from agentbench.evals.scorers.output_text import no_output
from agentbench.evals.scorers.registry import ScorerParams, builtin
from agentbench.evals.scorers.text import clip, output_text, quoted

_FENCE = re.compile(r"```(?:json)?\s*\n(.*?)```", re.DOTALL)
_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|[-+]?\.\d+")


def parse_json_output(output: Any) -> tuple[Any, str | None]:
    """(data, how it was found) — `how` is None when the output was data or whole JSON text.

    Raises ValueError when text holds no JSON at all.
    """
    if isinstance(output, BaseModel):
        return output.model_dump(mode="json"), None
    if not isinstance(output, str):
        return output, None
    try:
        return orjson.loads(output), None
    except orjson.JSONDecodeError:
        pass
    for block in _FENCE.findall(output):
        try:
            return orjson.loads(block), "read from a ```json block in the output text"
        except orjson.JSONDecodeError:
            continue
    start = output.find("{")
    while start >= 0:
        try:
            found, _ = _DECODER.raw_decode(output[start:])
            return found, "read from the first JSON object inside the output text"
        except ValueError:
            start = output.find("{", start + 1)
    raise ValueError("the output is not JSON and contains no JSON object")


# orjson has no "decode a prefix" call; the stdlib decoder's raw_decode stops after one value.
_DECODER = json.JSONDecoder()


@builtin
class OutputJsonSchema:
    """The final output is valid against a JSON Schema."""

    name = "output_json_schema"

    class Params(ScorerParams):
        output_schema: dict[str, Any] = Field(
            alias="schema", description="A JSON Schema (draft 2020-12 unless $schema says)."
        )

        @field_validator("output_schema")
        @classmethod
        def _valid_schema(cls, value: dict[str, Any]) -> dict[str, Any]:
            try:
                validators.validator_for(value).check_schema(value)
            except jsonschema_errors.SchemaError as exc:
                where = "/".join(str(p) for p in exc.path) or "the top level"
                raise ValueError(f"not a valid JSON Schema at {where}: {exc.message}") from None
            return value

    def __init__(self, params: Params) -> None:
        self.params = params
        schema = params.output_schema
        self.validator = validators.validator_for(schema)(schema)

    async def score(self, ctx: ScoreContext) -> Score:
        if (missing := no_output(ctx, self.name)) is not None:
            return missing
        try:
            data, how = parse_json_output(ctx.output)
        except ValueError as exc:
            return Score(self.name, 0.0, False, f"{exc}: {quoted(output_text(ctx.output))}")
        errors = sorted(self.validator.iter_errors(data), key=lambda e: list(e.absolute_path))
        note = f" ({how})" if how else ""
        if not errors:
            return Score(self.name, 1.0, True, f"output is valid against the schema{note}")
        shown = "; ".join(
            f"at {_json_path(e.absolute_path)}: {clip(e.message, 120)}" for e in errors[:3]
        )
        more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
        return Score(
            self.name,
            0.0,
            False,
            f"output does not match the schema{note}: {shown}{more}",
            {"errors": [e.message for e in errors]},
        )


def _json_path(path: Any) -> str:
    text = "output"
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text


def first_number(text: str) -> float | None:
    """The first number written in `text` (`1,234.5`, `-3`, `2e6`), or None."""
    found = _NUMBER.search(text)
    return float(found.group(0).replace(",", "")) if found else None


@builtin
class OutputNumber:
    """The final output is a number within a tolerance of the expected value."""

    name = "output_number"

    class Params(ScorerParams):
        shorthand: ClassVar[str | None] = "value"
        value: float = Field(description="The expected number.")
        tolerance: float = Field(0.0, ge=0, description="Allowed absolute difference.")
        relative: float | None = Field(
            None, ge=0, description="Allowed difference relative to the value (0.01 = 1 %)."
        )

    def __init__(self, params: Params) -> None:
        self.params = params

    async def score(self, ctx: ScoreContext) -> Score:
        if (missing := no_output(ctx, self.name)) is not None:
            return missing
        actual, how = self._read(ctx.output)
        expected = self._expected()
        if actual is None:
            return Score(
                self.name,
                0.0,
                False,
                f"expected the number {expected}; the output has no number: "
                f"{quoted(output_text(ctx.output))}",
            )
        p = self.params
        allowed = max(p.tolerance, (p.relative or 0.0) * abs(p.value))
        passed = math.isclose(actual, p.value, rel_tol=0.0, abs_tol=allowed)
        note = f" ({how})" if how else ""
        details = {"actual": actual, "expected": p.value, "allowed": allowed}
        if passed:
            return Score(
                self.name, 1.0, True, f"output is {actual:g}{note}; expected {expected}", details
            )
        return Score(
            self.name,
            0.0,
            False,
            f"output is {actual:g}{note}; expected {expected} (off by {abs(actual - p.value):g})",
            details,
        )

    def _expected(self) -> str:
        p = self.params
        parts = [f"{p.value:g}"]
        if p.tolerance:
            parts.append(f"± {p.tolerance:g}")
        if p.relative:
            parts.append(f"± {p.relative:.0%}" if p.relative >= 0.01 else f"± {p.relative:g}×")
        return " ".join(parts)

    def _read(self, output: Any) -> tuple[float | None, str | None]:
        if isinstance(output, bool):
            return None, None
        if isinstance(output, int | float):
            return float(output), None
        text = output_text(output)
        try:
            return float(text.strip()), None
        except ValueError:
            pass
        number = first_number(text)
        if number is None:
            return None, None
        return number, f"the first number in the text {quoted(text, 80)}"
