"""Scorers written in Python: the `@scorer` decorator and the `custom` scorer type.

A scorer function takes the `ScoreContext` (and, optionally, keyword parameters) and returns
a `Score`, a bool, a float in [0, 1], or a `(value, reason)` tuple; it may be async. `@scorer`
turns it into a Scorer and registers it by name, with a params model built from its keyword
parameters (so a suite's parameters for it are validated like a built-in's). In a suite file,
`custom: {function: "module:function", params: {...}}` imports one without registering it.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, overload

from pydantic import Field, create_model, field_validator

from agentbench.errors import UsageError
from agentbench.evals.errors import ScorerConfigError
from agentbench.evals.scorers.base import Score, ScoreContext, Scorer
from agentbench.evals.scorers.registry import SCORERS, ScorerParams, ScorerType, register_type
from agentbench.evals.scorers.text import brief, clip
from agentbench.evals.suites.validation import (
    REFERENCE_PATTERN,
    FieldProblem,
    check_reference,
    field_path,
)
from agentbench.loading import load_object
from agentbench.runtime.docstrings import parse_docstring

ScorerFunction = Callable[..., Any]


class FunctionScorer:
    """A Scorer made from a function; `configure(**params)` binds its keyword parameters."""

    def __init__(
        self,
        function: ScorerFunction,
        *,
        name: str | None = None,
        pass_threshold: float = 1.0,
        bound: dict[str, Any] | None = None,
    ) -> None:
        self.function = function
        self.name = name or function.__name__
        self.pass_threshold = pass_threshold
        self.Params = params_model(function, self.name)
        self.bound = bound or {}

    def configure(self, **params: Any) -> FunctionScorer:
        """A copy with `params` validated by the function's signature and bound."""
        kind = ScorerType(self.name, self.Params, lambda p, _b: self, "", source="function")
        validated = kind.validate(params)
        return self._bind(validated)

    def _bind(self, validated: ScorerParams) -> FunctionScorer:
        return FunctionScorer(
            self.function,
            name=self.name,
            pass_threshold=self.pass_threshold,
            bound=validated.model_dump(),
        )

    async def score(self, ctx: ScoreContext) -> Score:
        outcome = self.function(ctx, **self.bound)
        if inspect.isawaitable(outcome):
            outcome = await outcome
        return to_score(self.name, outcome, self.pass_threshold)

    def __repr__(self) -> str:
        where = f"{self.function.__module__}.{self.function.__qualname__}"
        return f"FunctionScorer({self.name!r}, {where})"


def to_score(name: str, outcome: Any, pass_threshold: float = 1.0) -> Score:
    """A scorer function's return value as a Score."""
    if isinstance(outcome, Score):
        return outcome
    reason = ""
    if isinstance(outcome, tuple) and len(outcome) == 2 and isinstance(outcome[1], str):
        outcome, reason = outcome
    if isinstance(outcome, bool):
        return Score(name, float(outcome), outcome, reason or ("passed" if outcome else "failed"))
    if isinstance(outcome, int | float) and 0.0 <= outcome <= 1.0:
        passed = outcome >= pass_threshold
        shown = reason or f"scored {outcome:.2f} (passes at {pass_threshold:g})"
        return Score(name, float(outcome), passed, shown)
    return Score.failed_to_score(
        name,
        f"scorer {name} returned {clip(brief(outcome), 80)}; expected a Score, a bool, a number "
        "from 0 to 1, or a (value, reason) tuple",
    )


def params_model(function: ScorerFunction, name: str) -> type[ScorerParams]:
    """A params model from the function's parameters after the first (the context).

    A function with one parameter takes it as its shorthand, like the built-ins do:
    `names_city: Paris` means `names_city: {city: Paris}`.
    """
    try:
        hints = typing.get_type_hints(function)
    except Exception:  # unresolvable annotations: validate nothing rather than fail
        hints = {}
    described = parse_docstring(function.__doc__).params
    fields: dict[str, Any] = {}
    for parameter in list(inspect.signature(function).parameters.values())[1:]:
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        annotation = hints.get(parameter.name, Any)
        default = ... if parameter.default is parameter.empty else parameter.default
        description = described.get(parameter.name)
        fields[parameter.name] = (annotation, Field(default, description=description))
    model = create_model(f"{name}_params", __base__=ScorerParams, **fields)
    if len(fields) == 1:
        model.shorthand = next(iter(fields))
    return model


@overload
def scorer(function: ScorerFunction, /) -> FunctionScorer: ...


@overload
def scorer(
    *, name: str | None = None, pass_threshold: float = 1.0
) -> Callable[[ScorerFunction], FunctionScorer]: ...


def scorer(
    function: ScorerFunction | None = None,
    /,
    *,
    name: str | None = None,
    pass_threshold: float = 1.0,
) -> FunctionScorer | Callable[[ScorerFunction], FunctionScorer]:
    """Make a function a registered Scorer: `@scorer` or `@scorer(name=..., pass_threshold=...)`.

    A float result passes at `pass_threshold`. The name must not be a built-in scorer's.
    """

    def wrap(fn: ScorerFunction) -> FunctionScorer:
        made = FunctionScorer(fn, name=name, pass_threshold=pass_threshold)
        existing = SCORERS.get(made.name)
        if existing is not None and existing.source == "builtin":
            raise UsageError(
                f"@scorer {fn.__module__}.{fn.__qualname__}: {made.name!r} is a built-in scorer; "
                "pass name= to register it under another name"
            )
        summary = parse_docstring(fn.__doc__).summary.split("\n\n")[0].replace("\n", " ")
        register_type(
            ScorerType(
                made.name,
                made.Params,
                lambda params, _base: made._bind(params),
                summary,
                source=f"{fn.__module__}:{fn.__qualname__}",
            )
        )
        return made

    return wrap(function) if function is not None else wrap


class CustomParams(ScorerParams):
    function: str = Field(
        json_schema_extra={"pattern": REFERENCE_PATTERN},
        description="The scorer function, `module:function` (importable from the repository "
        "root) or `path/to/file.py:function` (relative to the repository root).",
    )
    params: dict[str, Any] = Field(
        default_factory=dict, description="Keyword arguments passed to the function."
    )
    name: str | None = Field(
        None, description="The name shown in reports (default: the function's)."
    )
    pass_threshold: float = Field(
        1.0, ge=0, le=1, description="A number the function returns passes at this value."
    )

    @field_validator("function")
    @classmethod
    def _reference(cls, value: str) -> str:
        return check_reference(value, "checks.scorers:polite")


def build_custom(params: CustomParams, base_dir: Path | None) -> Scorer:
    """Import the scorer named by `params.function` and bind its parameters."""
    try:
        target = load_object(params.function, what="custom scorer", search_path=base_dir)
    except UsageError as exc:
        raise _error(str(exc), ("function",)) from None
    if isinstance(target, type):  # a Scorer class: the params are its constructor's
        try:
            return target(**params.params)
        except TypeError as exc:
            raise _error(f"{params.function}(**params) failed: {exc}", ("params",)) from None
    if not isinstance(target, FunctionScorer) and isinstance(target, Scorer):
        if params.params:
            raise _error(f"{params.function} is a Scorer object; it takes no params", ("params",))
        return target
    if not isinstance(target, FunctionScorer) and not callable(target):
        raise _error(
            f"{params.function} is a {type(target).__name__}; expected a function or a Scorer",
            ("function",),
        )
    base = target if isinstance(target, FunctionScorer) else FunctionScorer(target)
    threshold = (
        params.pass_threshold
        if "pass_threshold" in params.model_fields_set
        else base.pass_threshold
    )
    made = FunctionScorer(base.function, name=params.name or base.name, pass_threshold=threshold)
    try:
        return made.configure(**params.params)
    except ScorerConfigError as exc:
        problems = [FieldProblem(("params", *p.loc), p.message) for p in exc.problems]
        raise _error(exc.message, ("params", *exc.loc), problems) from None


def _error(
    message: str, loc: tuple[str | int, ...], problems: list[FieldProblem] | None = None
) -> ScorerConfigError:
    return ScorerConfigError(
        message, field=field_path(loc), scorer="custom", loc=loc, problems=problems
    )


register_type(
    ScorerType(
        "custom",
        CustomParams,
        build_custom,
        "A Python function `module:function` scores the case.",
    )
)
