"""`agentbench traces …`: list, show, sql, export, import, and the errors they give."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

from agentbench import Agent, Runner, ScriptedModel, ToolCall, tool
from agentbench.cli import main
from agentbench.commands.traces import parse_since
from agentbench.errors import UsageError
from agentbench.trace import TraceStore


@tool(effect="read_only")
def weather(city: str) -> dict[str, Any]:
    """Current weather."""
    return {"city": city, "celsius": 21}


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "traces.duckdb"
    store = TraceStore(path)
    agent = Agent(name="weather", tools=[weather])
    script = [ToolCall("weather", {"city": "Paris"}), "21 °C in Paris."]
    Runner.run_sync(agent, "How warm is Paris?", model=ScriptedModel(script), store=store)
    Runner.run_sync(
        Agent(name="greeter", limits={"max_iterations": 1}, tools=[weather]),
        "hello",
        model=ScriptedModel([ToolCall("weather", {"city": "Oslo"})]),
        store=store,
    )
    store.close()
    return path


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["traces", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_list_with_filters(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "list", "--db", str(db))
    assert code == 0
    header, *rows = out.splitlines()[:3]
    assert header.split()[:5] == ["RUN_ID", "STARTED", "(UTC)", "AGENT", "STATUS"]
    assert {row.split()[3] for row in rows} == {"weather", "greeter"}

    code, out, _ = run_cli(capsys, "list", "--db", str(db), "--stop-reason", "max_iterations")
    assert code == 0 and "greeter" in out and "weather  " not in out
    code, out, _ = run_cli(capsys, "list", "--db", str(db), "--agent", "weather", "--json")
    [record] = [orjson.loads(line) for line in out.splitlines()]
    assert record["agent"] == "weather" and record["input"] == "How warm is Paris?"
    code, out, _ = run_cli(capsys, "list", "--db", str(db), "--status", "error")
    assert code == 0 and "no runs match" in out
    code, out, _ = run_cli(capsys, "list", "--db", str(db), "--since", "1h", "--limit", "1")
    assert code == 0 and len(out.strip().splitlines()) == 4  # header, one row, blank, footer


def test_show_renders_a_timeline_and_json(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    [run] = TraceStore(db).runs(agent="weather")
    code, out, _ = run_cli(capsys, "show", run.run_id[:14], "--db", str(db))
    assert code == 0
    assert f"run {run.run_id}  agent weather  completed (stop: completed)" in out
    assert "input    How warm is Paris?" in out
    llm_lines = [line for line in out.splitlines() if "  llm  " in line]
    assert len(llm_lines) == 2 and "→ weather" in llm_lines[0] and "tok" in llm_lines[0]
    assert 'tool  weather({"city":"Paris"}) → ok' in out
    assert "output   21 °C in Paris." in out
    assert "stop     completed · 2 llm calls · 1 tool call · tokens" in out

    code, out, _ = run_cli(capsys, "show", run.run_id, "--db", str(db), "--json")
    document = orjson.loads(out)
    assert document["run"]["run_id"] == run.run_id
    assert [item["table"] for item in document["timeline"]] == [
        "llm_calls",
        "tool_calls",
        "llm_calls",
    ]
    assert document["timeline"][1]["result"] == {"city": "Paris", "celsius": 21}

    [stopped] = TraceStore(db).runs(agent="greeter")
    code, out, _ = run_cli(capsys, "show", stopped.run_id, "--db", str(db))
    assert "guard  max_iterations stop" in out and "stopped (stop: max_iterations)" in out


def test_sql_in_three_formats(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    query = (
        "SELECT agent, CAST(started_at AS DATE) AS day, sum(input_tokens + output_tokens) "
        "AS tokens FROM runs GROUP BY ALL ORDER BY agent"
    )
    code, out, _ = run_cli(capsys, "sql", query, "--db", str(db))
    assert code == 0 and out.split()[:3] == ["agent", "day", "tokens"]
    assert out.splitlines()[-1] == "(2 rows)"
    code, out, _ = run_cli(capsys, "sql", query, "--db", str(db), "--format", "csv")
    rows = list(csv.reader(io.StringIO(out)))
    assert rows[0] == ["agent", "day", "tokens"] and [r[0] for r in rows[1:]] == [
        "greeter",
        "weather",
    ]
    code, out, _ = run_cli(capsys, "sql", query, "--db", str(db), "--format", "json")
    assert [r["agent"] for r in orjson.loads(out)] == ["greeter", "weather"]

    code, _, err = run_cli(capsys, "sql", "DROP TABLE runs", "--db", str(db))
    assert code == 2 and "read-only" in err


def test_export_then_import(db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lake = tmp_path / "lake"
    code, out, _ = run_cli(
        capsys,
        "export",
        str(lake),
        "--db",
        str(db),
        "--format",
        "parquet",
        "--partition-by",
        "date",
    )
    assert code == 0 and "runs 2" in out
    copy = tmp_path / "copy.duckdb"
    code, out, _ = run_cli(capsys, "import", str(lake), "--db", str(copy))
    assert code == 0 and "imported 2 run(s)" in out
    original = TraceStore(db).sql("SELECT * FROM llm_calls ORDER BY run_id, seq").rows
    assert TraceStore(copy).sql("SELECT * FROM llm_calls ORDER BY run_id, seq").rows == original


def test_errors_name_the_file_and_map_to_exit_codes(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_cli(capsys, "show", "run_nope", "--db", str(db))
    assert code == 2 and "no run 'run_nope'" in err and str(db) in err
    junk = tmp_path / "notes.duckdb"
    junk.write_text("shopping list\n" * 500)
    code, _, err = run_cli(capsys, "list", "--db", str(junk))
    assert code == 3 and f"{junk} is not a readable DuckDB database" in err
    assert "expected an agentbench trace store" in err
    code, _, err = run_cli(capsys, "list", "--db", str(tmp_path / "none.duckdb"))
    assert code == 2 and "no trace store at" in err
    code, _, err = run_cli(capsys, "import", str(tmp_path), "--db", str(db))
    assert code == 3 and "has no manifest.json" in err
    code, _, err = run_cli(capsys, "list", "--db", str(db), "--since", "yesterday")
    assert code == 2 and "--since 'yesterday'" in err
    code, _, err = run_cli(capsys, "list", "--db", str(db), "--status", "nope")
    assert code == 2


def test_a_store_not_recorded_yet_is_a_usage_error_for_every_reading_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "none.duckdb"
    expected = f"error: no trace store at {missing}; run `agentbench run` first (or pass --db)"
    commands = [
        ["traces", "list"],
        ["traces", "show", "run_x"],
        ["traces", "sql", "SELECT 1"],
        ["traces", "export", str(tmp_path / "lake")],
        ["diff", "eval_x", "eval_y"],
    ]
    for command in commands:
        code = main([*command, "--db", str(missing)])
        captured = capsys.readouterr()
        assert (code, captured.err.strip(), captured.out) == (2, expected, ""), command
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing created by reading
    code = main(["report", "latest", "--db", str(missing)])
    assert code == 2 and f"no trace store at {missing}" in capsys.readouterr().err


def test_diff_of_names_that_are_neither_evals_nor_runs(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["diff", "eval_x", "eval_y", "--db", str(db)])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"error: no eval or run 'eval_x' in {db} (2 runs stored)")
    code = main(["traces", "show", "eval_x", "--db", str(db)])
    assert code == 2 and f"no run 'eval_x' in {db}" in capsys.readouterr().err


def test_db_defaults_to_the_environment(
    db: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTBENCH_DB", str(db))
    code, out, _ = run_cli(capsys, "list")
    assert code == 0 and "weather" in out


def test_since_accepts_dates_times_and_ages() -> None:
    now = datetime(2025, 1, 31, 12, 0, tzinfo=UTC)
    assert parse_since("2h", now) == now - timedelta(hours=2)
    assert parse_since("7d", now) == now - timedelta(days=7)
    assert parse_since("2025-01-30") == datetime(2025, 1, 30, tzinfo=UTC)
    assert parse_since("2025-01-30T08:00+01:00") == datetime(2025, 1, 30, 7, tzinfo=UTC)
    with pytest.raises(UsageError):
        parse_since("soon")
