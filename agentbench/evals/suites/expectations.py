"""Expectations: `{scorer_name: params}` as written in a suite, parsed into `ScorerSpec`s.

A spec keeps the scorer's name, its parameters exactly as written (so they can be stored and
shown), and where they were written; its parameters are validated by the scorer registry's
params models when the suite loads, and `spec.build()` makes the scorer when the harness runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import BeforeValidator, WithJsonSchema

from agentbench.evals.errors import ExpectationError, Problem, ScorerConfigError
from agentbench.evals.scorers import Scorer, build_scorer, scorer_type
from agentbench.evals.scorers.schema import EXPECTATION_DEF
from agentbench.evals.suites.validation import show


@dataclass
class ScorerSpec:
    """One expectation as written: `{scorer_name: params}`, and where it was written."""

    name: str
    params: Any = None
    file: Path | None = None
    line: int | None = None
    column: int | None = None
    field: str = ""  # e.g. "cases[3].expect[1]"

    @property
    def where(self) -> str:
        if self.file is None:
            return self.field or self.name
        return f"{self.file}:{self.line}" if self.line is not None else str(self.file)

    def build(self, base_dir: Path | None = None) -> Scorer:
        """The scorer; `base_dir` is where custom scorers are imported from (`suite.root`).

        An expectation read from a file that cannot be built (a custom scorer's function that
        does not import) raises ExpectationError naming the file, line and field.
        """
        try:
            return build_scorer(self.name, self.params, base_dir=base_dir)
        except ScorerConfigError as exc:
            if self.file is None:
                raise
            loc = [part for part in (self.field, self.name, exc.field) if part]
            field = ".".join(loc).replace(".[", "[")
            problem = Problem(self.file, exc.message, self.line, self.column, field)
            raise ExpectationError(exc, problem) from None


def split_expectation(raw: Any) -> tuple[str, Any]:
    """`{name: params}` or a bare `name` → (name, params); ScorerConfigError otherwise."""
    if isinstance(raw, ScorerSpec):
        return raw.name, raw.params
    if isinstance(raw, str):
        return raw, None
    if isinstance(raw, dict) and len(raw) == 1:
        name, params = next(iter(raw.items()))
        if isinstance(name, str):
            return name, params
    if isinstance(raw, dict) and len(raw) > 1:
        keys = ", ".join(str(k) for k in raw)
        raise ScorerConfigError(
            f"an expectation has one scorer name as its only key; got {keys} "
            "(indent the parameters under the scorer name)"
        )
    raise ScorerConfigError(
        "expected a scorer as {name: params} (e.g. {output_contains: Paris}) or a scorer name; "
        f"got {show(raw)}"
    )


def parse_expectation(raw: Any, **where: Any) -> ScorerSpec:
    """A validated ScorerSpec from what a suite file says; `where`: file, line, column, field."""
    if isinstance(raw, ScorerSpec):
        return raw
    name, params = split_expectation(raw)
    scorer_type(name).validate(params)
    return ScorerSpec(name, params, **where)


def _expectation(raw: Any) -> ScorerSpec:
    try:
        return parse_expectation(raw)
    except ScorerConfigError as exc:
        raise ValueError(str(exc)) from None


# Pydantic cannot emit a $ref to a definition it does not own, so the schema carries a marker
# that suite_schema replaces with a reference to the scorers' `Expectation` definition.
EXPECTATION_MARKER = {"$comment": f"agentbench:{EXPECTATION_DEF}"}
Expectations = Annotated[
    list[Annotated[ScorerSpec, BeforeValidator(_expectation)]],
    WithJsonSchema({"type": "array", "items": EXPECTATION_MARKER}),
]
