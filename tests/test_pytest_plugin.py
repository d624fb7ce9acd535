"""The pytest plugin: fixtures for users' own tests, and golden cases as pytest items."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

ROOT = Path(__file__).resolve().parent.parent
INI = "[pytest]\nasyncio_default_fixture_loop_scope = function\n"

USER_TEST = """
from agentbench import Agent, Runner, ToolCall, tool

@tool(effect="read_only")
def add(a: int, b: int) -> int:
    return a + b

agent = Agent(name="adder", tools=[add])

def test_scripted(scripted_model):
    model = scripted_model([ToolCall("add", {"a": 2, "b": 3}), "5"])
    assert Runner.run_sync(agent, "2+3?", model=model).output == "5"

def test_script_left_over_fails_at_teardown(scripted_model):
    scripted_model(["one", "two"])

def test_cassette_records_then_replays(cassette, scripted_model):
    import os
    first = os.environ.get("FIRST")
    live = scripted_model([ToolCall("add", {"a": 1, "b": 1}), "2"]) if first else None
    model = cassette(live)
    assert Runner.run_sync(agent, "1+1?", model=model).output == "2"

def test_trace_store(trace_store):
    model = __import__("agentbench").ScriptedModel(["hello"])
    result = Runner.run_sync(agent, "hi", model=model, store=trace_store)
    trace_store.flush()
    assert trace_store.run(result.run_id).run.output == '"hello"'
"""


def test_fixtures_for_users_tests(pytester: pytest.Pytester, monkeypatch) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_user=USER_TEST)
    monkeypatch.setenv("FIRST", "1")
    first = pytester.runpytest("-p", "no:cacheprovider")
    first.assert_outcomes(passed=4, errors=1)
    assert "never requested" in first.stdout.str()
    cassette = pytester.path / "cassettes" / "test_user" / "test_cassette_records_then_replays.yaml"
    assert cassette.is_file()
    monkeypatch.delenv("FIRST")
    again = pytester.runpytest("-p", "no:cacheprovider", "-k", "cassette")
    again.assert_outcomes(passed=1)  # replayed: no live model was given this time


def test_golden_cases_are_pytest_items_with_reasons(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    suite = pytester.path / "golden" / "mini"
    (suite / "cases").mkdir(parents=True)
    (suite / "agent.py").write_text(
        "from agentbench import Agent\nagent = Agent(name='echo', instructions='Echo.')\n"
    )
    (suite / "suite.yaml").write_text(
        "name: mini\nagent: agent.py:agent\ncassettes: cassettes\nstrict_xfail: true\n"
    )
    (suite / "cases" / "c.yaml").write_text(
        "- id: hello\n  input: hi\n  expect:\n    - output_contains: hello\n"
        "- id: wrong\n  input: hi\n  expect:\n    - output_contains: goodbye\n"
        "- id: lucky\n  input: hi\n  xfail: not yet\n  expect:\n    - output_contains: hello\n"
    )
    from agentbench.replay.cassette import Cassette, Interaction
    from agentbench.runtime.models import ChatResponse

    for case in ("hello", "wrong", "lucky"):
        request = {
            "model": "m",
            "messages": [{"role": "system", "content": "Echo."}, {"role": "user", "content": "hi"}],
        }
        cassette = Cassette([Interaction.of(request, ChatResponse(text="hello there"))])
        cassette.update_info(input="hi", trajectory=[], tool_results=[])
        cassette.save(suite / "cassettes" / f"{case}.yaml")
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "--agentbench-golden", str(pytester.path / "golden")
    )
    result.assert_outcomes(passed=1, failed=2)  # an XPASS of a strict suite fails, as the gate
    output = result.stdout.str()
    assert "[XPASS(strict)] not yet" in output
    assert "mini/wrong" in output and "c.yaml:5" in output
    assert "output_contains" in output and "goodbye" in output


def test_shipped_golden_suites_as_pytest_items(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    result = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "--agentbench-golden",
        str(ROOT / "golden"),
        "--rootdir",
        str(ROOT),
    )
    # The framework suites' cases are boundary targets, run through the same items; the
    # TypeScript suite's 6, a command, need node and its `npm ci`, else they are skipped.
    node = shutil.which("node") is not None
    typescript = 6 if node and (ROOT / "golden/typescript_agent/node_modules/tsx").is_dir() else 0
    result.assert_outcomes(passed=105 + typescript, xfailed=25, skipped=6 - typescript)


def test_a_suite_whose_framework_is_missing_is_skipped_as_items(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    suite = pytester.path / "golden" / "needs"
    (suite / "cases").mkdir(parents=True)
    (suite / "agent.py").write_text("import not_installed_framework\n")
    (suite / "suite.yaml").write_text(
        "name: needs\nagent: agent.py:agent\nrequires: [not_installed_framework]\n"
    )
    (suite / "cases" / "c.yaml").write_text("- id: one\n  input: hi\n")
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "-rs", "--agentbench-golden", str(pytester.path / "golden")
    )
    result.assert_outcomes(skipped=1)
    assert "needs not_installed_framework, not installed here" in result.stdout.str()
