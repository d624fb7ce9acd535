"""No run is lost to someone else's bad file; a journal goes only once its runs are committed;
waiting readers are let in. (Behaviour only: how long readers wait is benchmarks/reader_wait.py.)
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import pytest

from agentbench import Agent, Runner, ScriptedModel
from agentbench.trace import StoreBusyError, TraceStore
from agentbench.trace.journal import parsing as journal_reader
from agentbench.trace.journal.quarantine import quarantined
from agentbench.trace.journal.spool import Journal, spool_dir
from agentbench.trace.recording import local as recording
from agentbench.trace.storage import database, readers
from agentbench.trace.storage.database import opened
from tests.lock_holder import lock_held
from tests.spool_plant import POISONS, finished, plant_dead_journal

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

AGENT = Path(__file__).parent / "fixtures" / "trace_agent.py"
TIMEOUT_S = 60


def stored_ids(db: Path) -> set[str]:
    conn = duckdb.connect(str(db), read_only=True)
    try:
        return {row[0] for row in conn.execute("SELECT run_id FROM runs").fetchall()}
    finally:
        conn.close()


def journals(db: Path) -> list[Path]:
    return sorted(spool_dir(db).glob("*.journal"))


def test_every_good_journal_is_stored_and_every_poisoned_one_quarantined(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "traces.duckdb"
    planted: list[str] = []
    for index in range(6):
        planted += plant_dead_journal(db, f"good{index}", runs=5, open_runs=1)
    spool = spool_dir(db)
    for poison in POISONS:
        poison.make(spool)
        planted += poison.stored

    with caplog.at_level(logging.WARNING, logger="agentbench.trace"):
        runs = TraceStore(db).runs(limit=1000)

    assert {run.run_id for run in runs} == set(planted)  # 6 x 6 + the poisons' good lines
    assert len(runs) == len(planted) == 6 * 6 + 3
    assert journals(db) == []
    kept = {entry.path.name: entry.why for entry in quarantined(spool)}
    assert set(kept) == {f"{poison.name}.journal" for poison in POISONS}
    for poison in POISONS:
        why = kept[f"{poison.name}.journal"]
        if poison.line is not None:
            assert f"line {poison.line}:" in why, (poison.name, why)
        assert f"{poison.name}.journal" in caplog.text
    assert "not a regular file (a folder)" in kept["folder.journal"]
    assert "not a regular file (a fifo)" in kept["fifo.journal"]
    assert "symbolic link" in kept["link.journal"]
    assert "started_at is not a timestamp" in kept["bad-timestamp.journal"]
    assert "runs.agent is missing" in kept["required-column-missing.journal"]
    assert "runs.llm_calls is not int64" in kept["wrong-type.journal"]


def test_an_unreadable_journal_is_quarantined_and_the_others_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Another user's journal (mode 0600) whose process is gone: we cannot open it."""
    db = tmp_path / "traces.duckdb"
    planted = plant_dead_journal(db, "mine", runs=4)
    theirs = spool_dir(db) / "otherhost-4242-0badc0de.journal"
    theirs.write_bytes(b"")
    real_open = os.open

    def refusing(path: object, *args: object, **kwargs: object) -> int:
        if Path(str(path)).name == theirs.name:
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", refusing)
    with caplog.at_level(logging.WARNING, logger="agentbench.trace"):
        assert {run.run_id for run in TraceStore(db).runs()} == set(planted)
    (entry,) = quarantined(spool_dir(db))
    assert entry.path.name == theirs.name
    assert entry.why.startswith("cannot be read: Permission denied (owner uid")
    assert theirs.name in caplog.text


def test_an_unreadable_journal_of_a_live_process_is_left_to_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Named after a process on this host that is still running (another user's): its
    owner stores it; we neither move it nor stop on it."""
    db = tmp_path / "traces.duckdb"
    planted = plant_dead_journal(db, "mine", runs=2)
    import socket

    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        theirs = spool_dir(db) / f"{socket.gethostname()}-{sleeper.pid}-0badc0de.journal"
        theirs.write_bytes(b"")
        real_open = os.open

        def refusing(path: object, *args: object, **kwargs: object) -> int:
            if Path(str(path)).name == theirs.name:
                raise PermissionError(13, "Permission denied", str(path))
            return real_open(path, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(os, "open", refusing)
        assert {run.run_id for run in TraceStore(db).runs()} == set(planted)
        assert theirs.exists() and not quarantined(spool_dir(db))
    finally:
        sleeper.kill()
        sleeper.wait(timeout=TIMEOUT_S)


def test_a_journal_the_store_refuses_costs_only_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows that pass the line checks but that DuckDB refuses (here the checks are switched
    off): each journal is then stored on its own, and only the refused one is set aside."""
    db = tmp_path / "traces.duckdb"
    planted = plant_dead_journal(db, "a", runs=3) + plant_dead_journal(db, "b", runs=3)
    bad = Journal(spool_dir(db))
    rows = finished("run_refused")
    rows.runs[0]["agent"] = None  # NOT NULL in the store
    bad.append({"run": rows.as_dict()})
    bad.close(delete=False)
    monkeypatch.setattr(journal_reader, "_check_columns", lambda rows: None)

    assert {run.run_id for run in TraceStore(db).runs()} == set(planted)
    (entry,) = quarantined(spool_dir(db))
    assert bad.path is not None and entry.path.name == bad.path.name
    assert "the store refused its rows" in entry.why
    assert journals(db) == []


def test_a_recording_process_keeps_every_run_beside_a_poisoned_journal(
    tmp_path: Path,
) -> None:
    """The reported loss: a bad journal in the spool made the batch fail after it was taken,
    and the process then deleted its own journal at exit. Planted: 20 runs; stored: 20."""
    db = tmp_path / "traces.duckdb"
    spool = spool_dir(db)
    spool.mkdir(parents=True)
    for poison in POISONS[:6]:
        poison.make(spool)
    done = subprocess.run(
        [sys.executable, str(AGENT), str(db), "finish", "20"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    planted = {line.split()[1] for line in done.stdout.splitlines() if line.startswith("finished")}
    assert len(planted) == 20
    on_good_lines = {run_id for poison in POISONS[:6] for run_id in poison.stored}
    assert stored_ids(db) == planted | on_good_lines  # planted 20, stored 20 (+ 2)
    assert "folder.journal" in done.stderr and "quarantine" in done.stderr
    assert journals(db) == []


async def test_a_journal_stays_until_its_runs_are_committed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever makes a batch fail after it was taken, the runs go back to the queue and the
    journal outlives the process; the next one stores them."""
    db = tmp_path / "traces.duckdb"
    store = TraceStore(db, wait_s=1, exit_wait_s=1)

    def disk_full(conn: object, rows: object) -> None:
        raise duckdb.IOException("No space left on device")

    monkeypatch.setattr(recording, "insert_rows", disk_full)
    ids = []
    for _ in range(3):
        result = await Runner.run(Agent(name="a"), "x", model=ScriptedModel(["ok"]), store=store)
        ids.append(result.run_id)
    store.close()
    assert len(journals(db)) == 1  # kept: nothing of it was committed

    monkeypatch.undo()
    journal = journals(db)[0]
    assert {run.run_id for run in TraceStore(db).runs()} == set(ids)
    assert not journal.exists()


def test_batches_are_bounded_and_flush_stores_them_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "traces.duckdb"
    store = TraceStore(db)
    sizes: list[int] = []
    real_insert = recording.insert_rows

    def counting(conn: duckdb.DuckDBPyConnection, rows: object) -> object:
        sizes.append(len(rows.runs))  # type: ignore[attr-defined]
        return real_insert(conn, rows)  # type: ignore[arg-type]

    monkeypatch.setattr(recording, "insert_rows", counting)
    monkeypatch.setattr(recording, "MAX_BATCH_PARTS", 40)
    side = store._recorder_side()
    with side.lock:  # queue them all before the ingest thread can take any
        for index in range(100):
            side.journal.append({"run": finished(f"run_{index}").as_dict()})
            side.pending.append(finished(f"run_{index}"))
    store.flush()
    assert max(sizes) <= 40 and sum(sizes) == 100
    assert len(store.runs(limit=1000)) == 100
    store.close()
    assert journals(db) == []


# -- waiting readers go first ---------------------------------------------------------------


def test_a_fresh_reader_marker_makes_writers_give_way(tmp_path: Path) -> None:
    """And a reader with no spool to write to (no process ever recorded there) just waits."""
    db = tmp_path / "traces.duckdb"
    spool = spool_dir(db)
    spool.mkdir()  # made by the first process that records
    with readers.announced(spool):
        (marker,) = spool.glob("*.reader")
        assert readers.readers_waiting(spool)
        with (
            pytest.raises(StoreBusyError, match="a reader is waiting for it"),
            opened(db, write=True, wait_s=0),
        ):
            pass
    assert not marker.exists()
    with opened(db, write=True, wait_s=0):
        pass
    with readers.announced(tmp_path / "no.spool"):
        assert not (tmp_path / "no.spool").exists()


def test_stale_markers_are_ignored_and_removed(tmp_path: Path) -> None:
    spool = tmp_path / "traces.duckdb.spool"
    spool.mkdir()
    stale = spool / "host-1-00000000.reader"
    stale.touch()
    old = time.time() - readers.PRIORITY_S - 1
    os.utime(stale, (old, old))
    assert not readers.readers_waiting(spool)
    assert not stale.exists()


def test_a_writer_gives_way_for_a_bounded_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "traces.duckdb"
    spool = spool_dir(db)
    spool.mkdir()
    clock = [1000.0]
    monkeypatch.setattr(readers.time, "monotonic", lambda: clock[0])
    with readers.announced(spool):
        assert readers.should_give_way(db, spool)
        clock[0] += readers.MAX_GIVE_WAY_S + 0.1
        assert not readers.should_give_way(db, spool)  # one batch goes in regardless
        readers.wrote(db)
        assert readers.should_give_way(db, spool)
    assert not readers.should_give_way(db, spool)


def aged(db: Path, seconds: float) -> None:
    """Make this process's kept connection to `db` look `seconds` older."""
    database._kept[db].opened_at -= seconds


def test_a_writer_alone_keeps_its_connection_past_its_turn(tmp_path: Path) -> None:
    """Reopening costs a checkpoint and a connect: with nobody waiting, the kept connection
    serves batch after batch until `QUIET_HOLD_S`, then it is given up once in any case."""
    db = tmp_path / "traces.duckdb"
    spool_dir(db).mkdir()
    with opened(db, write=True, wait_s=0, keep=True) as first:
        pass
    aged(db, database.MAX_HOLD_S + 0.5)
    with opened(db, write=True, wait_s=0, keep=True) as again:
        assert again is first
    assert database.is_kept(db)
    aged(db, database.QUIET_HOLD_S)
    with opened(db, write=True, wait_s=0, keep=True) as after:
        assert after is not first
    database.release(db)


def test_a_waiting_writer_of_another_process_gets_the_next_turn(tmp_path: Path) -> None:
    db = tmp_path / "traces.duckdb"
    spool = spool_dir(db)
    spool.mkdir()
    readers.writer_refused(spool)  # as if refused the lock before
    mine = spool / readers._writer_marker_name()
    assert mine.exists()
    assert readers.waiting(spool) == readers.Waiting()  # its own marker never makes it wait
    with opened(db, write=True, wait_s=0, keep=True) as first:
        pass
    assert not mine.exists()  # it got in
    other = spool / "elsewhere-1.writer"
    other.touch()
    assert readers.waiting(spool) == readers.Waiting(writers=True)
    with opened(db, write=True, wait_s=0, keep=True) as again:
        assert again is first  # its turn is not over yet
    aged(db, database.MAX_HOLD_S + 0.1)
    with (
        pytest.raises(StoreBusyError, match="another process's writer is waiting for its turn"),
        opened(db, write=True, wait_s=0, keep=True),
    ):
        pass
    assert not database.is_kept(db)
    other.unlink()  # the other writer got in, and is done
    with opened(db, write=True, wait_s=0):
        pass


def test_a_writer_refused_the_lock_says_it_waits_until_it_gets_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    open_writer = database._open_writer
    db = tmp_path / "traces.duckdb"
    TraceStore(db).settle()
    spool_dir(db).mkdir()
    mine = spool_dir(db) / readers._writer_marker_name()
    with lock_held(db) as holder:
        with (
            pytest.raises(StoreBusyError, match="holds its lock"),
            opened(db, write=True, wait_s=0),
        ):
            pass
        assert mine.exists()
        assert readers.waiting(spool_dir(db)) == readers.Waiting()  # not to itself
        # Announced, it asks often, so each try is a lock probe, not a refused connect
        # (30-100 ms of CPU each).
        connects: list[Path] = []
        monkeypatch.setattr(
            database, "_open_writer", lambda path: connects.append(path) or open_writer(path)
        )
        with (
            pytest.raises(StoreBusyError, match="another process holds its lock"),
            opened(db, write=True, wait_s=0),
        ):
            pass
        assert connects == []
        assert database.poll_s(spool_dir(db)) == database.WRITER_POLL_S
        holder.release()
        with opened(db, write=True, wait_s=TIMEOUT_S):
            pass
        assert connects == [db]
        assert not mine.exists()
        assert database.poll_s(spool_dir(db)) > database.WRITER_POLL_S


def test_writers_that_wait_do_not_give_way_to_each_other(tmp_path: Path) -> None:
    """Both refused while a third held the lock: once it is free, the first to ask gets it
    (giving way to each other, both would stay out for `MAX_GIVE_WAY_S`)."""
    db = tmp_path / "traces.duckdb"
    spool = spool_dir(db)
    spool.mkdir()
    (spool / "elsewhere-1.writer").touch()  # the other waiting writer
    readers.writer_refused(spool)  # this one waits too
    with opened(db, write=True, wait_s=0):
        pass
    assert not readers.writer_announced(spool)
    with (  # got in, it no longer waits: it gives the other one its turn
        pytest.raises(StoreBusyError, match="another process's writer is waiting"),
        opened(db, write=True, wait_s=0),
    ):
        pass


def test_a_writer_that_stops_waiting_takes_its_marker_back(tmp_path: Path) -> None:
    """Left behind, it would make every other writer give way to nobody for seconds."""
    db = tmp_path / "traces.duckdb"
    TraceStore(db).settle()
    spool = spool_dir(db)
    spool.mkdir()
    mine = spool / readers._writer_marker_name()
    with lock_held(db):
        with pytest.raises(StoreBusyError), opened(db, write=True, wait_s=0):
            pass
        assert mine.exists()  # polling (the ingest thread): it will be back
        with (
            pytest.raises(StoreBusyError, match="gave up after"),
            opened(db, write=True, wait_s=0.2),
        ):
            pass
        assert not mine.exists() and not readers.writer_announced(spool)
        store = TraceStore(db, exit_wait_s=0.2)
        Runner.run_sync(Agent(name="a"), "hi", model=ScriptedModel(["done"]), store=store)
        store.close()  # the store stays locked: the run stays in the journal
        assert not mine.exists() and not readers.writer_announced(spool)
    assert len(TraceStore(db).runs()) == 1


def test_a_waiting_reader_announces_itself_and_gets_in(tmp_path: Path) -> None:
    db = tmp_path / "traces.duckdb"
    TraceStore(db).settle()  # a new, empty store
    spool_dir(db).mkdir()  # and the spool, which recording processes make
    with lock_held(db) as holder:
        answer: list[object] = []
        reader = threading.Thread(
            target=lambda: answer.append(TraceStore(db, wait_s=TIMEOUT_S).runs()), daemon=True
        )
        reader.start()
        deadline = time.monotonic() + TIMEOUT_S
        while not list(spool_dir(db).glob("*.reader")) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert list(spool_dir(db).glob("*.reader")), "the waiting reader did not announce itself"
        holder.release()
        reader.join(timeout=TIMEOUT_S)
        assert answer == [[]]
        assert not list(spool_dir(db).glob("*.reader"))
