"""A corpus of broken stores and journals, each run through the CLI boundary.

Every entry asserts the exit code, that the message names the file (and the line, for a
journal line), and that nothing else was lost: runs other processes left in the spool are
stored, or — when the store itself is damaged — stay in their journals, untouched with the
damaged file, and are stored once the file is moved aside as the message says.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest

from agentbench.cli import main
from agentbench.trace.journal.quarantine import quarantined
from agentbench.trace.journal.spool import spool_dir
from agentbench.trace.storage.migrations import LATEST
from tests.spool_plant import POISONS, Poison, good_line, plant_dead_journal


def stored_ids(db: Path) -> set[str]:
    conn = duckdb.connect(str(db), read_only=True)
    try:
        return {row[0] for row in conn.execute("SELECT run_id FROM runs").fetchall()}
    finally:
        conn.close()


def filled_store(db: Path, runs: int = 400) -> None:
    """A real store spanning several DuckDB blocks (so cutting it short cuts data)."""
    plant_dead_journal(db, "old", runs=runs)
    assert main(["traces", "list", "--db", str(db)]) == 0
    assert len(stored_ids(db)) == runs


def sql(db: Path, statement: str) -> None:
    conn = duckdb.connect(str(db))
    try:
        conn.execute(statement)
    finally:
        conn.close()


def truncate(db: Path, size: int | None = None) -> None:
    filled_store(db)
    with db.open("r+b") as handle:
        handle.truncate(size if size is not None else db.stat().st_size // 2)


def scribble(db: Path) -> None:
    """Overwrite bytes inside a block of the events table: the file keeps its size and
    opens, but a checksum breaks."""
    filled_store(db)
    conn = duckdb.connect(str(db), read_only=True)
    try:
        (block,) = conn.execute(
            "SELECT max(block_id) FROM pragma_storage_info('events') WHERE block_id >= 0"
        ).fetchone()
    finally:
        conn.close()
    with db.open("r+b") as handle:
        handle.seek(12288 + block * 262144 + 64)
        handle.write(b"\xff" * 4000)


@dataclass(frozen=True)
class StoreCase:
    name: str
    make: Callable[[Path], None]
    command: str  # list, sql, show or doctor
    exit_code: int
    says: tuple[str, ...]  # in the message, besides the file's name
    refused: bool  # the file is refused: it must be left exactly as it was


STORES: tuple[StoreCase, ...] = (
    StoreCase(
        "empty-file", lambda db: db.write_bytes(b""), "list", 0, ("was an empty file",), False
    ),
    StoreCase(
        "duckdb-without-tables", lambda db: duckdb.connect(str(db)).close(), "list", 0, (), False
    ),
    StoreCase(
        "killed-during-first-migration",
        lambda db: sql(
            db,
            "CREATE TABLE schema_migrations (id INTEGER PRIMARY KEY, name VARCHAR NOT NULL, "
            "applied_at TIMESTAMPTZ NOT NULL, agentbench VARCHAR NOT NULL)",
        ),
        "list",
        0,
        (),
        False,
    ),
    StoreCase("cut-in-half", truncate, "list", 3, ("is damaged", "cut short", "mv "), True),
    StoreCase(
        "header-cut-short",
        lambda db: truncate(db, 8192),
        "sql",
        3,
        ("is damaged", "DuckDB cannot open it"),
        True,
    ),
    StoreCase(
        "table-dropped",
        lambda db: (filled_store(db), sql(db, "DROP TABLE tool_calls")),
        "list",
        3,
        ("is damaged", "tool_calls are missing"),
        True,
    ),
    StoreCase(
        "migrations-table-dropped",
        lambda db: (filled_store(db), sql(db, "DROP TABLE schema_migrations")),
        "sql",
        3,
        ("is damaged", "schema_migrations table is missing"),
        True,
    ),
    StoreCase(
        "foreign-duckdb",
        lambda db: sql(db, "CREATE TABLE customers (id INTEGER)"),
        "list",
        3,
        ("not an agentbench trace store", "customers"),
        True,
    ),
    StoreCase(
        "newer-schema",
        lambda db: (
            filled_store(db),
            sql(db, "INSERT INTO schema_migrations VALUES (99, 'future', now(), '99.0')"),
        ),
        "list",
        3,
        ("newer agentbench", "schema 99"),
        True,
    ),
    StoreCase(
        "not-duckdb-at-all",
        lambda db: db.write_text("name,agent\nada,weather\n"),
        "list",
        3,
        ("not a readable DuckDB database",),
        True,
    ),
    StoreCase(
        "damaged-block", scribble, "doctor", 1, ("cannot be read through", "is damaged"), True
    ),
    # The file opens (the damage is in one table's block), so the others' runs are stored
    # into it, and reading the damaged table is refused.
    StoreCase("damaged-block-shown", scribble, "show", 3, ("is damaged", "checksum"), False),
)


def run_cli(db: Path, command: str) -> int:
    args = {
        "list": ["list"],
        "sql": ["sql", "SELECT count(*) FROM runs"],
        "doctor": ["doctor"],
        "show": ["show", "run_old_0"],
    }
    return main(["traces", *args[command], "--db", str(db), "--wait", "5"])


@pytest.mark.parametrize("case", STORES, ids=[c.name for c in STORES])
def test_a_broken_store(
    case: StoreCase,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    db = tmp_path / "traces.duckdb"
    case.make(db)
    capsys.readouterr()
    others = plant_dead_journal(db, "others", runs=3, open_runs=1)
    before = db.read_bytes()

    with caplog.at_level(logging.WARNING, logger="agentbench.trace"):
        code = run_cli(db, case.command)
    out, err = capsys.readouterr()
    said = out + err + caplog.text

    assert code == case.exit_code, said
    if case.says:  # a store made whole silently says nothing
        assert str(db) in said
    for words in case.says:
        assert words in said, said
    assert "Traceback" not in said and "unexpected" not in said
    if not case.refused:
        assert stored_ids(db) >= set(others)
        return
    # Nothing else was lost: the file is as it was, the other runs wait in their journal...
    assert db.read_bytes() == before
    assert len(list(spool_dir(db).glob("*.journal"))) == 1
    # ...and doing what the message says stores them.
    shutil.move(db, tmp_path / "traces.duckdb.damaged")
    assert not (tmp_path / "traces.duckdb.wal").exists()
    assert main(["traces", "list", "--db", str(db)]) == 0
    assert stored_ids(db) == set(others)


def test_a_store_path_that_is_a_folder_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "traces.duckdb"
    db.mkdir()
    assert main(["traces", "list", "--db", str(db)]) == 2
    assert str(db) in capsys.readouterr().err


def test_a_spool_that_is_a_file_does_not_stop_reading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "traces.duckdb"
    filled_store(db, runs=3)
    shutil.rmtree(spool_dir(db))
    spool_dir(db).write_text("not a folder")
    capsys.readouterr()
    assert main(["traces", "sql", "SELECT count(*) AS n FROM runs", "--db", str(db)]) == 0
    assert "3" in capsys.readouterr().out


# -- journals --------------------------------------------------------------------------------


@pytest.mark.parametrize("poison", POISONS, ids=[p.name for p in POISONS])
def test_a_poisoned_journal(
    poison: Poison,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    db = tmp_path / "traces.duckdb"
    others = plant_dead_journal(db, "others", runs=4, open_runs=1)
    poison.make(spool_dir(db))

    with caplog.at_level(logging.WARNING, logger="agentbench.trace"):
        code = main(["traces", "list", "--db", str(db)])
    said = capsys.readouterr().err + caplog.text

    assert code == 0, said
    journal = f"{poison.name}.journal"
    assert journal in said and "quarantine" in said
    (entry,) = quarantined(spool_dir(db))
    assert entry.path.name == journal
    if poison.line is not None:
        assert f"line {poison.line}:" in entry.why
    assert stored_ids(db) == {*others, *poison.stored}  # nothing else was lost
    assert not list(spool_dir(db).glob("*.journal"))

    # doctor lists it, with its reason, and exits 1
    capsys.readouterr()
    assert main(["traces", "doctor", "--db", str(db)]) == 1
    out = capsys.readouterr().out
    assert journal in out and entry.why.splitlines()[0][:60] in out


def test_an_empty_journal_and_a_torn_last_line_are_not_problems(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "traces.duckdb"
    others = plant_dead_journal(db, "others", runs=2)
    spool = spool_dir(db)
    (spool / "empty.journal").write_bytes(b"")
    (spool / "torn.journal").write_bytes(good_line("run_before_the_kill") + b'{"run": {"ru')
    assert main(["traces", "list", "--db", str(db)]) == 0
    assert stored_ids(db) == {*others, "run_before_the_kill"}
    assert not quarantined(spool) and not list(spool.glob("*.journal"))
    capsys.readouterr()
    assert main(["traces", "doctor", "--db", str(db)]) == 0
    assert "healthy" in capsys.readouterr().out


def test_doctor_says_what_dead_journals_will_rebuild(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "traces.duckdb"
    filled_store(db, runs=3)
    plant_dead_journal(db, "waiting", runs=2, open_runs=1)
    (spool_dir(db) / "folder.journal").mkdir()
    capsys.readouterr()
    assert main(["traces", "doctor", "--db", str(db)]) == 1
    out = capsys.readouterr().out
    assert f"schema {LATEST}; 3 run(s)" in out
    assert "holds 3 run(s), 3 of them not in the store; stored the next time" in out
    assert "folder.journal" in out and "not a regular file (a folder)" in out
    assert "1 problem(s) found" in out
    # doctor changed nothing
    assert len(list(spool_dir(db).glob("*.journal"))) == 2 and len(stored_ids(db)) == 3


def test_doctor_on_a_healthy_store_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "traces.duckdb"
    filled_store(db, runs=2)
    capsys.readouterr()
    assert main(["traces", "doctor", "--db", str(db), "--json"]) == 0
    assert '"problem":false' in capsys.readouterr().out


def test_a_fifo_under_a_journal_name_does_not_hang_a_reader(tmp_path: Path) -> None:
    """Opening a fifo for reading blocks until a writer comes: journals are opened
    non-blocking, so this returns (the test would hang otherwise)."""
    db = tmp_path / "traces.duckdb"
    others = plant_dead_journal(db, "others", runs=1)
    os.mkfifo(spool_dir(db) / "a.journal")
    os.mkfifo(spool_dir(db) / ".tmp-b")
    assert main(["traces", "list", "--db", str(db)]) == 0
    assert stored_ids(db) == set(others)


@pytest.mark.parametrize(
    "make",
    [lambda db: db.write_bytes(b""), lambda db: duckdb.connect(str(db)).close()],
    ids=["empty-file", "duckdb-without-tables"],
)
def test_doctor_finds_a_half_created_store_and_opening_makes_it_whole(
    make: Callable[[Path], None], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "traces.duckdb"
    make(db)
    assert main(["traces", "doctor", "--db", str(db)]) == 1
    out = capsys.readouterr().out
    assert str(db) in out and "creation was cut short" in out
    assert main(["traces", "list", "--db", str(db)]) == 0
    assert main(["traces", "doctor", "--db", str(db)]) == 0
