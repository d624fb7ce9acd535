"""The registry of named scorer types, and building a scorer from a name and parameters.

Each scorer type has a pydantic `params` model (extra fields forbidden, every field
described), so parameters written in a suite file are validated when the suite loads and a
JSON Schema for editors comes from the same models. A type may declare a *shorthand* field:
`output_contains: Paris` means `output_contains: {value: Paris}`.
"""

from __future__ import annotations

import difflib
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from agentbench.evals.errors import ScorerConfigError, UnknownScorerError
from agentbench.evals.scorers.base import Scorer
from agentbench.evals.suites.validation import FieldProblem, closest_first, explain, field_path


class ScorerParams(BaseModel):
    """Base of every scorer's parameters model."""

    model_config = ConfigDict(extra="forbid")

    # The field a bare value (not a mapping) stands for; None: the type takes no shorthand.
    shorthand: ClassVar[str | None] = None

    @model_validator(mode="before")
    @classmethod
    def _expand_shorthand(cls, data: Any) -> Any:
        if data is None:
            return {}
        if cls.shorthand is not None and not isinstance(data, dict):
            return {cls.shorthand: data}
        return data


# (validated params, folder that relative references are resolved from) → a scorer
Builder = Callable[[Any, Path | None], Scorer]


@dataclass(frozen=True)
class ScorerType:
    """A named kind of scorer: what parameters it takes and how to build one."""

    name: str
    params: type[ScorerParams]
    build: Builder
    description: str
    source: str = "builtin"  # or the `module:function` a custom scorer was defined in

    def validate(self, params: Any) -> ScorerParams:
        """The parameters as the params model, or ScorerConfigError naming every mistake."""
        if isinstance(params, self.params):
            return params
        try:
            return self.params.model_validate(params)
        except ValidationError as exc:
            problems = self._with_hint(explain(exc, self.params))
            first = problems[0]
            raise ScorerConfigError(
                first.message,
                field=field_path(first.loc),
                scorer=self.name,
                loc=first.loc,
                problems=problems,
            ) from None

    def _with_hint(self, problems: list[FieldProblem]) -> list[FieldProblem]:
        """Point out the shorthand's catch: a mapping is read as the parameters."""
        field = self.params.shorthand
        if field is None or not _accepts_mapping(self.params.model_fields[field].annotation):
            return problems
        hint = f" (to give a mapping as the {field}, write {field}: {{...}})"
        return [
            FieldProblem(p.loc, p.message + hint) if p.message.startswith("unknown field") else p
            for p in problems
        ]


def _accepts_mapping(annotation: Any) -> bool:
    if annotation is Any:
        return True
    return any(
        typing.get_origin(member) is dict or member is dict or member is Any
        for member in (typing.get_args(annotation) or (annotation,))
    )


SCORERS: dict[str, ScorerType] = {}

C = TypeVar("C")


def register_type(scorer_type: ScorerType) -> ScorerType:
    """Add (or replace) a scorer type under its name."""
    SCORERS[scorer_type.name] = scorer_type
    return scorer_type


def builtin(cls: type[C]) -> type[C]:
    """Register a built-in scorer class: it has `name`, `Params` and `__init__(params)`."""
    name: str = cls.name  # type: ignore[attr-defined]
    params: type[ScorerParams] = cls.Params  # type: ignore[attr-defined]
    doc = (cls.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
    register_type(ScorerType(name, params, lambda p, _base: cls(p), doc))  # type: ignore[call-arg]
    return cls


def scorer_type(name: str) -> ScorerType:
    """The registered type called `name`; an unknown name lists the known ones, closest first.

    A name close to a known one is taken for a typo; any other is more likely a `@scorer`
    function whose module was never imported, so the error says how to import it.
    """
    found = SCORERS.get(name)
    if found is None:
        known = closest_first(name, sorted(SCORERS))
        typo = difflib.get_close_matches(name, known, n=1, cutoff=0.8)
        raise UnknownScorerError(name, known, "" if typo else PLUGIN_HINT)
    return found


PLUGIN_HINT = (
    "; a @scorer function is known by its name once its module is imported: list the module "
    "under plugins: in suite.yaml (e.g. plugins: [checks.scorers])"
)


def build_scorer(name: str, params: Any = None, *, base_dir: Path | None = None) -> Scorer:
    """A scorer of type `name` with `params` (a mapping, a shorthand value, or the params model).

    `base_dir` is where a `custom` scorer's `module:function` is imported from (the suite's
    repository root). Raises ScorerConfigError saying what was expected.
    """
    kind = scorer_type(name)
    return kind.build(kind.validate(params), base_dir)
