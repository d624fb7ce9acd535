"""The ingest thread keeps its DuckDB connection between batches, and still lets others in.

Kept while runs keep coming; closed by a flush, after a moment without runs, for a reader in
this process, for a reader of another process that announces itself, and for a writer of
another process at the end of a turn; and a process killed while it keeps one loses no
finished run. Real processes, each waited for with a
bound and killed if left over.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agentbench import Agent, FunctionModel, Runner, ToolCall, tool
from agentbench.trace import TraceStore
from agentbench.trace.recording import local as recording
from agentbench.trace.storage import database

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

AGENT = Path(__file__).parent / "fixtures" / "trace_agent.py"
TIMEOUT_S = 60
# Opens the store for writing without waiting: fails while any process holds its lock.
TAKE_LOCK = "import duckdb, sys; duckdb.connect(sys.argv[1]).close(); print('took it')"


@tool(effect="read_only")
def lookup(item: str) -> str:
    """Look an item up."""
    return f"{item} is in stock"


def model() -> FunctionModel:
    def answer(request: dict[str, object], info: object) -> object:
        messages = request["messages"]
        assert isinstance(messages, list)
        return ToolCall("lookup", {"item": "tea"}) if messages[-1]["role"] == "user" else "ok"

    return FunctionModel(answer)


async def record(store: TraceStore, count: int) -> list[str]:
    agent = Agent(name="shop", tools=[lookup])
    return [
        (await Runner.run(agent, "tea?", model=model(), store=store)).run_id for _ in range(count)
    ]


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {TIMEOUT_S} s: {what}")
        time.sleep(0.005)


class Recording(threading.Thread):
    """Runs recorded into a store one after another, on a thread of their own, until told to
    stop: what the store keeps its connection for."""

    def __init__(self, store: TraceStore) -> None:
        super().__init__(daemon=True)
        self.store = store
        self.runs: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        async def loop() -> None:
            while not self.stop.is_set():
                self.runs.extend(await record(self.store, 1))

        asyncio.run(loop())


@contextlib.contextmanager
def recording_all_along(store: TraceStore) -> Iterator[Recording]:
    """Record into `store` for the whole block, its connection kept from the start."""
    recording = Recording(store)
    recording.start()
    try:
        wait_until(lambda: database.is_kept(store.path), "the ingest thread keeps its connection")
        yield recording
    finally:
        recording.stop.set()
        recording.join(timeout=TIMEOUT_S)


def other_process_takes_the_lock(db: Path) -> bool:
    done = subprocess.run(
        [sys.executable, "-c", TAKE_LOCK, str(db)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    return done.returncode == 0 and done.stdout.strip() == "took it"


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=TIMEOUT_S)
        if process.stdout is not None:
            process.stdout.close()


@pytest.fixture
def slow_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kept connection stays until something closes it on purpose."""
    monkeypatch.setattr(recording, "IDLE_CLOSE_S", TIMEOUT_S)
    monkeypatch.setattr(database, "MAX_HOLD_S", TIMEOUT_S)
    monkeypatch.setattr(database, "QUIET_HOLD_S", 10 * TIMEOUT_S)


async def test_a_flush_closes_the_kept_connection(tmp_path: Path, slow_idle: None) -> None:
    store = TraceStore(tmp_path / "traces.duckdb")
    ids = await record(store, 3)
    wait_until(lambda: database.is_kept(store.path), "the ingest thread keeps its connection")
    store.flush()
    assert not database.is_kept(store.path)
    assert other_process_takes_the_lock(store.path)
    assert {run.run_id for run in store.runs()} == set(ids)
    store.close()


async def test_an_idle_kept_connection_is_closed(tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "traces.duckdb")
    await record(store, 3)
    # Kept after the batch, then closed IDLE_CLOSE_S later with no flush from anyone.
    wait_until(lambda: database.is_kept(store.path), "the ingest thread keeps its connection")
    wait_until(lambda: not database.is_kept(store.path), "the idle connection is closed")
    assert other_process_takes_the_lock(store.path)
    store.close()


async def test_a_reader_in_this_process_gets_in_while_one_is_kept(
    tmp_path: Path, slow_idle: None
) -> None:
    store = TraceStore(tmp_path / "traces.duckdb")
    ids = await record(store, 2)
    wait_until(lambda: database.is_kept(store.path), "the ingest thread keeps its connection")
    assert {run.run_id for run in store.runs()} == set(ids)  # read-only: the kept one closed
    more = await record(store, 2)  # and recording goes on afterwards
    assert {run.run_id for run in store.runs()} == {*ids, *more}
    store.close()


def test_a_reader_of_another_process_gets_in_while_runs_keep_coming(
    tmp_path: Path, slow_idle: None
) -> None:
    """Neither idleness nor the hold limit closes the connection here: only the reader's
    announcement can, so the reader getting in shows writers give way to it."""
    store = TraceStore(tmp_path / "traces.duckdb")
    with recording_all_along(store) as recording:
        reader = subprocess.run(
            [sys.executable, "-m", "agentbench", "traces", "list", "--db", str(store.path)],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        )
        assert reader.returncode == 0, reader.stderr
        assert recording.is_alive()  # it got in while runs were still being recorded
        count = len(recording.runs)
        wait_until(lambda: len(recording.runs) > count + 2, "recording goes on after the reader")
    assert {run.run_id for run in store.runs()} == set(recording.runs)
    store.close()


def test_a_writer_of_another_process_gets_its_turn_while_runs_keep_coming(
    tmp_path: Path, slow_idle: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing closes the connection here but another writer's announcement at the end of a
    turn: the other process storing its runs (its exit waits for that) shows writers take
    turns, and this one's recording goes on after it."""
    monkeypatch.setattr(database, "MAX_HOLD_S", 0.2)
    store = TraceStore(tmp_path / "traces.duckdb")
    with recording_all_along(store) as recording:
        started = time.monotonic()
        other = subprocess.run(
            [sys.executable, str(AGENT), str(store.path), "finish", "3"],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        )
        assert other.returncode == 0, other.stderr
        # Its exit waits up to 60 s for the store: it got in by asking, not by waiting that out.
        assert time.monotonic() - started < TIMEOUT_S / 2
        assert recording.is_alive()  # it got in while runs were still being recorded here
        theirs = {line.split()[1] for line in other.stdout.splitlines()}
        assert len(theirs) == 3
        count = len(recording.runs)
        wait_until(lambda: len(recording.runs) > count + 2, "recording goes on after it")
    assert {run.run_id for run in store.runs()} == {*recording.runs, *theirs}
    assert not list(store.path.with_name("traces.duckdb.spool").glob("*.writer"))
    store.close()


def test_kill_9_while_a_connection_is_kept_loses_no_finished_run(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    db = tmp_path / "traces.duckdb"
    agent = subprocess.Popen(
        [sys.executable, str(AGENT), str(db), "finish", "100000", "0.002"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    processes.append(agent)
    assert agent.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(lines) < 60 and time.monotonic() < deadline:  # several batches committed
        line = agent.stdout.readline()
        assert line, "the agent process ended early"
        lines.append(line.split()[1])
    agent.send_signal(signal.SIGKILL)
    agent.wait(timeout=TIMEOUT_S)
    lines.extend(line.split()[1] for line in agent.stdout.read().splitlines() if line)

    runs = {run.run_id: run for run in TraceStore(db).runs()}
    assert set(lines) <= set(runs)
    assert {runs[run_id].status for run_id in lines} == {"completed"}


async def test_the_thread_opens_nothing_when_a_flush_took_its_batch(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A flush stores what the thread was gathering: the thread must not open the file for
    an empty batch (here a direct read-only connection would make that open fail)."""
    monkeypatch.setattr(recording, "GATHER_S", 0.5)
    store = TraceStore(tmp_path / "traces.duckdb")
    opens: list[Path] = []
    connect = database._connect
    monkeypatch.setattr(
        database, "_connect", lambda path, **kw: opens.append(path) or connect(path, **kw)
    )
    ids = await record(store, 2)
    store.flush()
    opened_by_flush = len(opens)
    await asyncio.sleep(recording.GATHER_S + 0.3)  # the thread wakes from gathering meanwhile
    assert len(opens) == opened_by_flush
    assert "could not store runs" not in caplog.text
    assert {run.run_id for run in store.runs()} == set(ids)
    store.close()
