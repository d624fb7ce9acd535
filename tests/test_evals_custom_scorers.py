"""Scorers written in Python: `@scorer`, the `custom` type, and failures turned into scores."""

from __future__ import annotations

import textwrap

import pytest

from agentbench import Runner, ScriptedModel, UsageError
from agentbench.evals.scorers import (
    SCORERS,
    Score,
    ScoreContext,
    ScorerConfigError,
    build_scorer,
    score_all,
    scorer,
)
from agentbench.runtime.agent import Agent


@pytest.fixture
async def ctx() -> ScoreContext:
    result = await Runner.run(Agent(name="a"), "hi", model=ScriptedModel(["Hello, Ada!"]))
    return ScoreContext.from_runs("greeting", "hi", [result])


@pytest.fixture
def registry():
    """Registered test scorers are removed afterwards, so tests do not leak into others."""
    before = dict(SCORERS)
    yield
    SCORERS.clear()
    SCORERS.update(before)


async def test_function_results_become_scores(ctx, registry) -> None:
    @scorer
    def greets(ctx: ScoreContext) -> bool:
        return "Hello" in ctx.output

    @scorer(name="politeness", pass_threshold=0.5)
    async def polite(ctx: ScoreContext) -> float:
        return 0.6

    @scorer
    def explained(ctx: ScoreContext) -> tuple[float, str]:
        return 0.25, "one of four checks passed"

    @scorer
    def full(ctx: ScoreContext) -> Score:
        return Score("full", 1.0, True, "custom reason", {"k": 1})

    assert (await greets.score(ctx)) == Score("greets", 1.0, True, "passed")
    assert (await polite.score(ctx)).passed and polite.name == "politeness"
    third = await explained.score(ctx)
    assert (third.value, third.passed, third.reason) == (0.25, False, "one of four checks passed")
    assert (await full.score(ctx)).details == {"k": 1}
    assert {"greets", "politeness", "explained", "full"} <= set(SCORERS)


async def test_registered_function_takes_validated_parameters(ctx, registry) -> None:
    @scorer
    def mentions(ctx: ScoreContext, word: str, min_count: int = 1) -> bool:
        """Whether the output mentions a word.

        Args:
            word: The word to look for.
            min_count: How often it must occur.
        """
        return ctx.output.count(word) >= min_count

    assert (await build_scorer("mentions", {"word": "Ada"}).score(ctx)).passed
    assert not (await build_scorer("mentions", {"word": "Ada", "min_count": 2}).score(ctx)).passed
    with pytest.raises(ScorerConfigError, match="missing required field 'word'"):
        build_scorer("mentions", {})
    with pytest.raises(ScorerConfigError, match=r"mentions\.min_count: expected a valid integer"):
        build_scorer("mentions", {"word": "x", "min_count": "many"})
    schema = SCORERS["mentions"].params.model_json_schema()
    assert schema["properties"]["word"]["description"] == "The word to look for."


def test_a_builtin_name_cannot_be_taken(registry) -> None:
    with pytest.raises(UsageError, match="'stop_reason' is a built-in scorer"):

        @scorer
        def stop_reason(ctx: ScoreContext) -> bool:
            return True


async def test_custom_type_imports_module_function(ctx, tmp_path) -> None:
    (tmp_path / "checks.py").write_text(
        textwrap.dedent(
            """
            def shouts(ctx, mark="!"):
                return ctx.output.endswith(mark), f"ends with {ctx.output[-1]!r}"

            def broken(ctx):
                raise KeyError("missing")

            def confused(ctx):
                return "yes"
            """
        )
    )
    ref = f"{tmp_path / 'checks.py'}:shouts"
    made = build_scorer("custom", {"function": ref, "params": {"mark": "!"}, "name": "shouting"})
    result = await made.score(ctx)
    assert (result.name, result.passed, result.reason) == ("shouting", True, "ends with '!'")

    with pytest.raises(ScorerConfigError, match=r"custom\.params\.loud: unknown field 'loud'"):
        build_scorer("custom", {"function": ref, "params": {"loud": True}})
    with pytest.raises(ScorerConfigError, match=r"custom\.function: .*has no attribute 'nope'"):
        build_scorer("custom", {"function": f"{tmp_path / 'checks.py'}:nope"})
    with pytest.raises(ScorerConfigError, match=r"expected 'module:attribute'"):
        build_scorer("custom", {"function": "checks.shouts"})

    scores = await score_all(
        [
            build_scorer("custom", {"function": f"{tmp_path / 'checks.py'}:broken"}),
            build_scorer("custom", {"function": f"{tmp_path / 'checks.py'}:confused"}),
            made,
        ],
        ctx,
    )
    assert [s.passed for s in scores] == [False, False, True]
    assert scores[0].reason == "scorer broken raised KeyError: 'missing'"
    assert scores[0].error is not None
    assert scores[1].reason.startswith("scorer confused returned yes; expected a Score, a bool")
