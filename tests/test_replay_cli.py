"""`agentbench replay` and `agentbench diff` over a real trace store and real cassettes."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from agentbench import Runner, ScriptedModel, ToolCall
from agentbench.cli import main
from agentbench.replay.convert import cassette_from_store, store_cassette, stored_trajectory
from agentbench.replay.trajectory import trajectory
from agentbench.trace.store import TraceStore

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

FIXTURE = Path(__file__).parent / "fixtures" / "replay_agents.py"
SCRIPT = [
    ToolCall("get_weather", {"city": "Paris"}),
    ToolCall("get_weather", {"city": "Oslo"}),
    "21 and 4.",
]


def ref(name: str) -> str:
    return f"{FIXTURE}:{name}"


@pytest.fixture
def store_and_run(tmp_path: Path):
    from agentbench.loading import load_object

    agent = load_object(ref("weather"))
    db = tmp_path / "traces.duckdb"
    store = TraceStore(db)
    result = Runner.run_sync(
        agent, "Weather in Paris and Oslo?", model=ScriptedModel(SCRIPT), store=store
    )
    store.flush()
    return store, result, db


def test_stored_run_converts_to_a_cassette_with_the_same_trajectory(store_and_run) -> None:
    store, result, _ = store_and_run
    cassette = cassette_from_store(store, result.run_id)
    assert len(cassette.interactions) == 3
    assert cassette.info["input"] == "Weather in Paris and Oslo?"
    live = [s.as_dict() for s in trajectory(result.all_events)]
    assert cassette.info["trajectory"] == live
    assert [s.as_dict() for s in stored_trajectory(store, result.run_id)] == live


def test_replay_of_a_stored_run_unchanged_exits_0_and_is_stored_with_replay_of(
    store_and_run, capsys
) -> None:
    store, result, db = store_and_run
    code = main(["replay", result.run_id, "--agent", ref("weather"), "--db", str(db)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "behaviour unchanged" in out
    rows = store.sql(f"SELECT run_id FROM runs WHERE replay_of = '{result.run_id}'").rows
    assert len(rows) == 1


def test_replay_with_a_changed_tool_exits_1_naming_the_step(store_and_run, capsys) -> None:
    _store, result, db = store_and_run
    code = main(
        ["replay", result.run_id, "--agent", ref("weather_new_tool"), "--db", str(db), "--json"]
    )
    report = orjson.loads(capsys.readouterr().out)
    assert code == 1
    assert report["first"]["class"] == "tool_result_changed"
    assert report["first"]["step"] == 1


def test_replay_strict_with_a_changed_prompt_is_request_drift(store_and_run, capsys) -> None:
    _store, result, db = store_and_run
    code = main(
        ["replay", result.run_id, "--agent", ref("weather_new_prompt"), "--db", str(db), "--strict"]
    )
    out = capsys.readouterr().out
    assert code == 1
    assert "request_drift" in out and "messages[0].content" in out


def test_replay_of_a_cassette_file_with_recorded_tools(
    store_and_run, tmp_path: Path, capsys
) -> None:
    store, result, db = store_and_run
    path = cassette_from_store(store, result.run_id).save(tmp_path / "session.yaml")
    code = main(
        [
            "replay",
            str(path),
            "--agent",
            ref("weather_new_tool"),
            "--db",
            str(db),
            "--tools",
            "recorded",
        ]
    )
    assert code == 0, capsys.readouterr().out  # the changed tool never ran


def test_changed_memory_limits_show_dropped_messages(store_and_run, capsys) -> None:
    _store, result, db = store_and_run
    code = main(["replay", result.run_id, "--agent", ref("weather_small_memory"), "--db", str(db)])
    out = capsys.readouterr().out
    assert code == 1
    assert "memory" in out and "removed" in out


def test_diff_two_stored_runs(store_and_run, capsys) -> None:
    store, result, db = store_and_run
    from agentbench.loading import load_object

    changed = Runner.run_sync(
        load_object(ref("weather_new_tool")),
        "Weather in Paris and Oslo?",
        model=ScriptedModel(SCRIPT),
        store=store,
    )
    store.flush()
    assert main(["diff", result.run_id, result.run_id, "--db", str(db)]) == 0
    capsys.readouterr()
    assert main(["diff", result.run_id, changed.run_id, "--db", str(db)]) == 1
    out = capsys.readouterr().out
    assert "tool_result_changed" in out


def test_diff_two_stored_runs_names_a_changed_prompt_as_request_drift(
    store_and_run, capsys
) -> None:
    store, result, db = store_and_run
    from agentbench.loading import load_object

    reworded = Runner.run_sync(
        load_object(ref("weather_new_prompt")),
        "Weather in Paris and Oslo?",
        model=ScriptedModel(SCRIPT),
        store=store,
    )
    store.flush()
    assert main(["diff", result.run_id, reworded.run_id, "--db", str(db)]) == 1
    out = capsys.readouterr().out
    assert "first difference — step 1 (weather) request_drift: model call #1" in out
    assert "messages[0].content: 'Answer briefly.' → 'Answer in one line.'" in out

    assert main(["diff", result.run_id, reworded.run_id, "--db", str(db), "--json"]) == 1
    differences = orjson.loads(capsys.readouterr().out)["differences"]
    # The same steps, so every difference is the request each model call sent.
    assert [(d["class"], d["step"]) for d in differences] == [
        ("request_drift", 1),
        ("request_drift", 2),
        ("request_drift", 3),
    ]
    assert all(d["changes"][0]["path"] == "messages[0].content" for d in differences)


def test_a_run_id_without_an_agent_is_a_usage_error(store_and_run, capsys) -> None:
    _, result, db = store_and_run
    assert main(["replay", result.run_id, "--db", str(db)]) == 2
    assert "--agent module:attribute" in capsys.readouterr().err


def test_cassette_converts_back_to_a_stored_run(store_and_run, tmp_path: Path) -> None:
    store, result, _ = store_and_run
    cassette = cassette_from_store(store, result.run_id)
    other = TraceStore(tmp_path / "other.duckdb")
    run_id = store_cassette(cassette, other)
    trace = other.run(run_id)
    assert len(trace.llm_calls) == 3
    assert [t.tool for t in trace.tool_calls] == ["get_weather", "get_weather"]
    assert trace.run.stop_reason == "completed"
    again = cassette_from_store(other, run_id)
    assert [i.request for i in again.interactions] == [i.request for i in cassette.interactions]


def test_promote_turns_a_stored_run_into_a_passing_golden_case(
    store_and_run, tmp_path: Path, capsys
) -> None:
    _store, result, db = store_and_run
    suite = tmp_path / "suites" / "weather"
    suite.mkdir(parents=True)
    (suite / "suite.yaml").write_text("agent: agent.py:weather\ncassettes: cassettes\n")
    (suite / "agent.py").write_text(FIXTURE.read_text())
    assert (
        main(
            ["promote", result.run_id, "--suite", str(suite), "--id", "from-prod", "--db", str(db)]
        )
        == 0
    )
    cases = (suite / "cases" / "promoted.yaml").read_text()
    assert "id: from-prod" in cases and "get_weather" in cases and "output_equals" in cases
    assert (suite / "cassettes" / "from-prod.yaml").is_file()
    capsys.readouterr()
    assert main(["run", str(suite), "--no-report", "--db", str(tmp_path / "run.duckdb")]) == 0, (
        capsys.readouterr()
    )
    assert (
        main(
            ["promote", result.run_id, "--suite", str(suite), "--id", "from-prod", "--db", str(db)]
        )
        == 2
    )
