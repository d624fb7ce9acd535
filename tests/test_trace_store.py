"""The store file: migrations, schema, bad files, SQL, export/import round trips, dedupe."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from agentbench import Agent, Runner, ScriptedModel, ToolCall, tool
from agentbench.errors import UsageError
from agentbench.trace import (
    RunNotFoundError,
    StoreFormatError,
    StoreNotFoundError,
    TraceStore,
)
from agentbench.trace.journal.spool import Journal, spool_dir
from agentbench.trace.schema import ARROW_SCHEMAS, TABLES, RunRows
from agentbench.trace.storage.migrations import LATEST, MIGRATIONS
from agentbench.trace.storage.portable import EVAL_TABLES

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop


@tool(effect="read_only")
def price(item: str) -> float:
    """The price of an item."""
    return 2.5


async def record(store: TraceStore, agent: str, count: int) -> list[str]:
    ids = []
    for index in range(count):
        model = ScriptedModel([ToolCall("price", {"item": f"i{index}"}), f"costs 2.5 ({index})"])
        result = await Runner.run(
            Agent(name=agent, tools=[price]), "price?", model=model, store=store
        )
        ids.append(result.run_id)
    return ids


@pytest.fixture
def store(tmp_path: Path) -> Any:
    made = TraceStore(tmp_path / "traces.duckdb")
    yield made
    made.close()


def table_rows(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    conn = duckdb.connect(str(path), read_only=True)
    try:
        return {
            name: sorted(conn.execute(f"SELECT * FROM {name}").fetchall(), key=repr)
            for name in TABLES
        }
    finally:
        conn.close()


async def test_migrations_are_recorded_and_the_schema_matches_the_model(
    store: TraceStore,
) -> None:
    await record(store, "a", 1)
    store.flush()
    conn = duckdb.connect(str(store.path), read_only=True)
    try:
        applied = conn.execute("SELECT id, name FROM schema_migrations ORDER BY id").fetchall()
        assert applied == [(m.id, m.name) for m in MIGRATIONS]
        for name, schema in ARROW_SCHEMAS.items():
            described = conn.execute(f"DESCRIBE {name}").fetchall()
            columns = [(row[0], row[2] == "YES") for row in described]
            assert columns == [(f.name, f.nullable) for f in schema], name
            stored = conn.sql(f"SELECT * FROM {name} LIMIT 0").to_arrow_table().schema
            for ours, theirs in zip(schema, stored, strict=True):
                if pa.types.is_timestamp(ours.type):  # DuckDB names UTC "Etc/UTC"
                    assert (theirs.type.unit, theirs.type.tz) == ("us", "Etc/UTC"), ours.name
                else:
                    assert theirs.type == ours.type, ours.name
    finally:
        conn.close()
    assert not store.path.with_name(store.path.name + ".wal").exists()  # checkpointed


async def test_sql_answers_tokens_per_agent_per_day(store: TraceStore) -> None:
    await record(store, "pricing", 2)
    await record(store, "support", 1)
    result = store.sql(
        "SELECT agent, CAST(started_at AS DATE) AS day, "
        "sum(input_tokens + output_tokens) AS tokens, count(*) AS runs "
        "FROM runs GROUP BY ALL ORDER BY agent"
    )
    assert result.columns == ["agent", "day", "tokens", "runs"]
    today = datetime.now(UTC).date()
    assert [(r[0], r[1], r[3]) for r in result.rows] == [
        ("pricing", today, 2),
        ("support", today, 1),
    ]
    assert all(r[2] > 0 for r in result.rows)
    with pytest.raises(UsageError, match="read-only"):
        store.sql("DELETE FROM runs")
    with pytest.raises(UsageError, match="SQL error"):
        store.sql("SELECT nope FROM runs")


async def test_filters_prefixes_and_unknown_runs(store: TraceStore) -> None:
    first = await record(store, "a", 2)
    second = await record(store, "b", 1)
    assert {r.run_id for r in store.runs(agent="a")} == set(first)
    assert [r.run_id for r in store.runs(limit=1)] == second
    assert store.runs(status="error") == []
    assert len(store.runs(since=datetime.now(UTC) - timedelta(hours=1))) == 3
    assert store.run(second[0][:12]).run.run_id == second[0]
    with pytest.raises(RunNotFoundError, match=r"no run 'run_missing' in .*\(3 runs stored\)"):
        store.run("run_missing")
    with pytest.raises(RunNotFoundError, match="matches several runs"):
        store.run("run_")
    with pytest.raises(RunNotFoundError, match="has no llm call with seq 999"):
        store.request(first[0], 999)


def test_bad_files_are_named_and_explained(tmp_path: Path) -> None:
    with pytest.raises(StoreNotFoundError, match=r"no trace store at .*missing\.duckdb"):
        TraceStore(tmp_path / "missing.duckdb").runs()

    junk = tmp_path / "junk.duckdb"
    junk.write_text("this is not a database\n" * 100)
    with pytest.raises(StoreFormatError, match=r"junk.duckdb is not a readable DuckDB database"):
        TraceStore(junk).runs()

    foreign = tmp_path / "foreign.duckdb"
    conn = duckdb.connect(str(foreign))
    conn.execute("CREATE TABLE invoices (id INTEGER)")
    conn.close()
    with pytest.raises(StoreFormatError, match=r"not an agentbench trace store.*invoices"):
        TraceStore(foreign).runs()

    newer = tmp_path / "newer.duckdb"
    conn = duckdb.connect(str(newer))
    conn.execute(
        "CREATE TABLE schema_migrations (id INTEGER, name VARCHAR, applied_at TIMESTAMPTZ, "
        "agentbench VARCHAR)"
    )
    conn.execute("INSERT INTO schema_migrations VALUES (?, 'future', now(), '9.0')", [LATEST + 1])
    conn.close()
    with pytest.raises(StoreFormatError, match="written by a newer agentbench"):
        TraceStore(newer).runs()


@pytest.mark.parametrize("partition", [False, True])
async def test_export_and_import_round_trip_exactly(
    store: TraceStore, tmp_path: Path, partition: bool
) -> None:
    await record(store, "a", 3)
    await record(store, "b", 2)
    folder = tmp_path / "export"
    manifest = store.export_parquet(folder, partition_by_date=partition)
    assert manifest["tables"]["runs"]["rows"] == 5
    if partition:
        day = datetime.now(UTC).date().isoformat()
        assert list((folder / "runs").glob(f"date={day}/*.parquet"))
        lake = duckdb.connect()
        lake.execute("SET TimeZone = 'UTC'")
        counted = lake.execute(
            f"SELECT date, count(*) FROM read_parquet('{folder}/runs/**/*.parquet', "
            "hive_partitioning = true) GROUP BY date"
        ).fetchall()
        lake.close()
        assert [(str(d), n) for d, n in counted] == [(day, 5)]

    copy = TraceStore(tmp_path / "copy.duckdb")
    assert copy.import_parquet(folder)["runs"] == 5
    copy.flush()
    assert table_rows(copy.path) == table_rows(store.path)
    # Imported twice, stored once: runs, their rows, evals and results alike.
    assert copy.import_parquet(folder) == {
        name: 0 for name in (*TABLES[1:], *TABLES[:1], *EVAL_TABLES)
    }
    assert table_rows(copy.path) == table_rows(store.path)


def test_import_refuses_folders_that_are_not_exports(store: TraceStore, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(StoreFormatError, match=r"has no manifest\.json"):
        store.import_parquet(empty)
    (empty / "manifest.json").write_text('{"format": "something-else"}')
    with pytest.raises(StoreFormatError, match="not an agentbench export"):
        store.import_parquet(empty)


async def test_export_refuses_a_folder_with_files(store: TraceStore, tmp_path: Path) -> None:
    await record(store, "a", 1)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("mine")
    with pytest.raises(StoreFormatError, match="is not empty"):
        store.export_parquet(tmp_path / "out")


def test_a_dead_journal_is_ingested_once_with_incomplete_runs(tmp_path: Path) -> None:
    """What a crashed process leaves: one finished run, one started run, a torn last line."""
    path = tmp_path / "traces.duckdb"
    now = datetime.now(UTC)
    start = {name: None for name in ARROW_SCHEMAS["runs"].names}
    start.update(run_id="run_done", agent="a", status="incomplete", started_at=now)
    open_run = {**start, "run_id": "run_open"}
    done = {**start, "status": "completed", "stop_reason": "completed", "finished_at": now}
    journal = Journal(spool_dir(path))
    journal.append({"start": start})
    journal.append({"start": open_run})
    journal.append({"run": RunRows(runs=[done]).as_dict()})
    assert journal.path is not None
    with journal.path.open("ab") as handle:
        handle.write(b'{"run": {"runs": [{"run_id": "torn')
    journal.close(delete=False)  # the process "dies": its lock is released

    store = TraceStore(path)
    statuses = {r.run_id: r.status for r in store.runs()}
    assert statuses == {"run_done": "completed", "run_open": "incomplete"}
    assert not list(spool_dir(path).glob("*.journal"))
    assert {r.run_id: r.status for r in store.runs()} == statuses


async def test_recording_the_same_run_id_twice_keeps_the_first(store: TraceStore) -> None:
    agent = Agent(name="a")
    await Runner.run(agent, "x", model=ScriptedModel(["first"]), run_id="run_fixed", store=store)
    store.flush()
    await Runner.run(agent, "x", model=ScriptedModel(["second"]), run_id="run_fixed", store=store)
    await record(store, "b", 1)  # stored in the same batch as the duplicate
    trace = store.run("run_fixed")
    assert trace.run.output == '"first"'
    assert len(trace.llm_calls) == 1
    assert len(store.runs()) == 2
