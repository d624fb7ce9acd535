"""Scorers written in Python: `@scorer`, the `custom` type, and failures turned into scores."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import orjson
import pytest

from agentbench import Runner, ScriptedModel, UsageError
from agentbench.cli import main
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
from agentbench.testing import OpenAICompatibleServer
from tests.test_evals_dataset import isolated_plugins, write  # noqa: F401 - a fixture
from tests.weather_suite import AGENT, respond


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


def test_the_scorer_api_is_importable_from_the_packages(tmp_path: Path) -> None:
    from agentbench import TraceStore
    from agentbench.evals import Score as PublicScore
    from agentbench.evals import ScoreContext as PublicContext
    from agentbench.evals import scorer as public_scorer
    from agentbench.trace.store import TraceStore as StoreItself

    assert (PublicScore, PublicContext, public_scorer) == (Score, ScoreContext, scorer)
    assert TraceStore is StoreItself
    # TraceStore pulls DuckDB in, and OpenAIModel the openai SDK: neither may slow down
    # `import agentbench`, so both load when first used.
    code = "import sys, agentbench; print(sorted({'duckdb', 'openai'} & set(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert done.stdout.strip() == "[]"


async def test_a_scorer_function_is_usable_by_reference_and_takes_a_shorthand(
    ctx, registry, tmp_path
) -> None:
    (tmp_path / "decorated.py").write_text(
        "from agentbench.evals import scorer\n\n\n@scorer\n"
        "def says(ctx, word: str) -> bool:\n    return word in ctx.output\n"
    )
    # A @scorer-decorated function named by `custom:` works like a plain function.
    made = build_scorer(
        "custom", {"function": f"{tmp_path / 'decorated.py'}:says", "params": {"word": "Ada"}}
    )
    assert (await made.score(ctx)).passed
    # A function with one parameter takes it bare, as built-ins take their shorthand.
    assert (await build_scorer("says", "Hello").score(ctx)).passed
    assert not (await build_scorer("says", {"word": "Bye"}).score(ctx)).passed


PLUGIN_SCORERS = """\
from agentbench.evals import Score, ScoreContext, scorer


@scorer
def answers_with_degrees(ctx: ScoreContext) -> Score:
    \"\"\"The answer gives a temperature.\"\"\"
    ok = "degrees" in str(ctx.output)
    return Score("answers_with_degrees", float(ok), ok, f"output: {ctx.output}")


@scorer(pass_threshold=0.5)
async def called_weather(ctx: ScoreContext, tool: str = "get_weather") -> float:
    \"\"\"Share of the runs that called the tool.\"\"\"
    return sum(step.kind == "tool_call" and step.signature[2] == tool for step in ctx.steps)
"""


@pytest.mark.usefixtures("isolated_plugins")
def test_agentbench_run_scores_with_plugin_scorers(tmp_path: Path, monkeypatch, capsys) -> None:
    """The whole path: suite.yaml names plugin scorers; record live, then replay offline."""
    write(tmp_path / "plugcheck_run", {"__init__.py": "", "scorers.py": PLUGIN_SCORERS})
    folder = write(
        tmp_path / "suites" / "plugged",
        {
            "agent.py": AGENT,
            "suite.yaml": "agent: agent.py:agent\nmodel: {name: mini-model}\ncassettes: cassettes\n"
            "plugins: [plugcheck_run.scorers]\nscorers: [answers_with_degrees]\n",
            "cases/weather.yaml": "- id: paris\n  input: Weather in Paris?\n"
            "  expect: [{called_weather: get_weather}]\n",
        },
    )
    common = ["--no-report", "--json", "--db", str(tmp_path / "t.duckdb")]
    with OpenAICompatibleServer(responder=respond) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "unused")
        live = ["--live", "--record-mode", "all", "--base-url", server.base_url]
        assert main(["run", str(folder), *live, *common]) == 0
    capsys.readouterr()
    assert main(["run", str(folder), *common]) == 0
    [result] = orjson.loads(capsys.readouterr().out)["results"]
    assert [(s["name"], s["passed"], s["reason"]) for s in result["scores"]] == [
        ("answers_with_degrees", True, "output: Paris: 21 degrees."),
        ("called_weather", True, "scored 1.00 (passes at 0.5)"),
    ]
