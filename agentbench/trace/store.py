"""`TraceStore`: every run as a structured trace in one DuckDB file.

Attach one to a run with `Runner.run(..., store=TraceStore("traces.duckdb"))`, or set
`AGENTBENCH_DB`; the default file is `.agentbench/traces.duckdb` at the root of the git checkout
around the working directory (or in the working directory outside one). Recording goes through
this process's journal beside the file (see `journal.spool` and `recording.local`), so several
processes can record into one store at once and a crash loses no finished run; with
`recording_process=True` runs only encode their events and a child process records them (see
`recording.channel`).
Reading first stores what is queued and what crashed processes left, then opens the file
read-only, waiting (and saying so) while another process writes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb

from agentbench.errors import RecordingError
from agentbench.trace.code_version import find_work_tree
from agentbench.trace.errors import (
    StorageFaultError,
    StoreReadOnlyError,
    TraceStoreError,
    damaged,
)
from agentbench.trace.journal.spool import has_dead, spool_dir, survey, try_journal
from agentbench.trace.recorder import RunLabels, TraceRecorder
from agentbench.trace.recording.channel import ProcessRecorder, RecordingChannel
from agentbench.trace.recording.local import Recording, store_batch
from agentbench.trace.redaction.redactor import Redactor
from agentbench.trace.redaction.rules import RedactionRules
from agentbench.trace.schema import RunRecord, RunRows, RunTrace
from agentbench.trace.storage import portable, queries
from agentbench.trace.storage.database import WaitNotice, opened
from agentbench.trace.storage.migrations import LATEST, check, migrate

log = logging.getLogger("agentbench.trace")

ENV_VAR = "AGENTBENCH_DB"
_MAX_DEAD_BATCHES = 1000  # dead journals are stored a bounded batch at a time
DEFAULT_PATH = Path(".agentbench") / "traces.duckdb"


def default_path(root: Path | None = None) -> Path:
    """AGENTBENCH_DB if set, else `.agentbench/traces.duckdb` in `root` — by default the git
    checkout around the working directory (its root, so every command run anywhere in the
    repository finds the same store), or the working directory outside a checkout."""
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR])
    base = root or find_work_tree(Path.cwd()) or Path.cwd()
    return base / DEFAULT_PATH


class TraceStore:
    """A trace store file: pass it as `store=` to record runs, and query what was recorded."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        redaction: RedactionRules | None = None,
        wait_s: float = 30.0,
        exit_wait_s: float = 10.0,
        on_wait: WaitNotice | None = None,
        fsync: bool = False,
        recording_process: bool = False,
    ) -> None:
        self.path = Path(path if path is not None else default_path()).absolute()
        self.redaction = redaction or RedactionRules()
        self.wait_s = wait_s  # how long reads and flushes wait for another process's lock
        self.exit_wait_s = exit_wait_s
        self.on_wait = on_wait or (lambda message: log.info("%s", message))
        self.fsync = fsync
        self._recording: Recording | None = None
        self._recording_guard = threading.Lock()
        # Recording in a process of its own (see `recording.channel`): runs get hooks that
        # only encode their events, and a child process turns them into rows and stores them.
        self._channel = RecordingChannel(self) if recording_process else None
        if self._channel is not None:
            self._channel.start()

    def __repr__(self) -> str:
        return f"TraceStore({str(self.path)!r})"

    # -- recording (the runner asks for `run_hook`; the recorder calls the sink methods) ----
    def run_hook(self) -> TraceRecorder | ProcessRecorder:
        """A recorder for one `Runner` call (and the runs it hands off to)."""
        return self.hook_for(RunLabels())

    def hook_for(
        self, labels: RunLabels, redactor: Redactor | None = None
    ) -> TraceRecorder | ProcessRecorder:
        """A recorder stamping `labels` on the runs it records, redacting with `redactor`
        (this store's rules; one made for it unless given), which learns their secrets."""
        redactor = redactor or Redactor(self.redaction)
        if self._channel is not None:
            return ProcessRecorder(self._channel, labels, redactor)
        return TraceRecorder(self, redactor=redactor, labels=labels)

    def with_labels(
        self,
        *,
        eval_id: str | None = None,
        case_id: str | None = None,
        trial: int | None = None,
        replay_of: str | None = None,
        request_id: str | None = None,
        conversation_id: str | None = None,
        agent_ref: str | None = None,
        caller: str | None = None,
    ) -> LabelledStore:
        """The same store, stamping evaluation, replay or serving labels on the runs recorded."""
        return LabelledStore(
            self,
            RunLabels(
                eval_id=eval_id,
                case_id=case_id,
                trial=trial,
                replay_of=replay_of,
                request_id=request_id,
                conversation_id=conversation_id,
                agent_ref=agent_ref,
                caller=caller,
            ),
        )

    def run_started(self, row: dict[str, Any]) -> None:
        self._recorder_side().run_started(row)

    def run_part(self, rows: RunRows) -> None:
        self._recorder_side().run_part(rows)

    def run_finished(self, rows: RunRows) -> None:
        self._recorder_side().run_finished(rows)

    def record_results(self, rows: list[dict[str, Any]]) -> None:
        """Keep eval result rows (the `results` table): journaled at once, stored with the
        next batch of runs, so a killed eval keeps every result it had scored."""
        if rows and self._channel is not None:
            self._channel.record_results(list(rows))
        elif rows:
            self._recorder_side().run_finished(RunRows(results=list(rows)))

    def backlog(self) -> int:
        """How many handed-over batches of rows wait to be stored: a producer faster than
        the store (a driver collecting from many workers) waits while it is high."""
        return self._recording.backlog() if self._recording is not None else 0

    def flush(self) -> None:
        """Store every finished run now (normally a background thread does it)."""
        if self._channel is not None:
            self._channel.flush()
        if self._recording is not None:
            self._recording.flush(self.wait_s, self.on_wait)

    def start_recording(self) -> None:
        """With `recording_process=True`: return once the recording process is ready (it
        imports what it needs and opens the store: ~0.5 s, on another core). Until then the
        first runs' events wait in a pipe; a caller that wants the start out of the way (a
        server before it takes traffic, a benchmark) calls this first. No-op without one."""
        if self._channel is not None:
            self._channel.flush(even_if_idle=True)

    def close(self) -> None:
        """Flush and release this process's journal (also done at interpreter exit), and let
        the recording process store what it has and exit. Runs handed to the recording
        process that the disk refused (full, read-only) are raised here as a
        `StorageFaultError` if no `flush` told them: they were never kept."""
        try:
            if self._channel is not None:
                self._channel.close()
        finally:
            if self._recording is not None:
                self._recording.close()

    def __enter__(self) -> TraceStore:
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        if kind is None:
            self.close()
            return
        try:  # the error on its way out says what went wrong; a fault is said beside it
            self.close()
        except RecordingError as fault:
            log.warning("%s", fault)

    def _recorder_side(self) -> Recording:
        with self._recording_guard:
            if self._recording is None:
                self._recording = Recording(
                    self.path, fsync=self.fsync, exit_wait_s=self.exit_wait_s
                )
            return self._recording

    # -- reading -------------------------------------------------------------------------------
    def runs(
        self,
        *,
        agent: str | None = None,
        status: str | None = None,
        stop_reason: str | None = None,
        since: datetime | None = None,
        limit: int | None = None,
        conversation_id: str | None = None,
    ) -> list[RunRecord]:
        """Stored runs, newest first."""
        with self.reading() as conn:
            return queries.list_runs(
                conn,
                agent=agent,
                status=status,
                stop_reason=stop_reason,
                since=since,
                limit=limit,
                conversation_id=conversation_id,
            )

    def run(self, run_id: str) -> RunTrace:
        """One run's whole trace; `run_id` may be a unique prefix."""
        with self.reading() as conn:
            full = queries.resolve_run_id(conn, run_id, self.path)
            return queries.load_run(conn, full, self.path)

    def request(self, run_id: str, seq: int) -> dict[str, Any]:
        """The exact (redacted) request body of the run's llm call with this `seq`."""
        with self.reading() as conn:
            return queries.rebuild_request(conn, run_id, seq, self.path)

    def requests(self, run_id: str) -> dict[int, dict[str, Any]]:
        """Every request body of the run, by llm call `seq`."""
        with self.reading() as conn:
            return queries.rebuild_requests(conn, run_id, self.path)

    def sql(self, query: str) -> queries.QueryResult:
        """Run SQL on a read-only connection."""
        with self.reading() as conn:
            return queries.run_sql(conn, query)

    def export_parquet(
        self,
        directory: str | os.PathLike[str],
        *,
        partition_by_date: bool = False,
        eval_id: str | None = None,
    ) -> dict[str, Any]:
        """Write the whole store (or one eval's slice) to a folder of Parquet files (see
        `portable`)."""
        with self.reading() as conn:
            return portable.export_parquet(
                conn, Path(directory), partition_by_date=partition_by_date, eval_id=eval_id
            )

    def import_parquet(self, directory: str | os.PathLike[str]) -> dict[str, int]:
        """Add an exported folder's runs to this store; returns rows added per table."""
        portable.read_manifest(Path(directory))  # fail before taking the write lock
        self.flush()
        with self.writing() as conn:
            return portable.import_parquet(conn, Path(directory))

    def merge(self, source: str | os.PathLike[str]) -> dict[str, int]:
        """Add the runs, evals and results of another store file to this one (runs and evals
        it already has are skipped); the source is brought to this version's schema first."""
        other = TraceStore(source, wait_s=self.wait_s, on_wait=self.on_wait)
        other.settle(reading=True)  # only read: a read-only source merges as it is
        self.flush()
        with self.writing() as conn:
            return portable.merge_store(conn, other.path)

    @contextlib.contextmanager
    def writing(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-write connection to the migrated store (waits for the lock)."""
        with opened(self.path, write=True, wait_s=self.wait_s, on_wait=self.on_wait) as conn:
            migrate(conn, self.path)
            yield conn

    @contextlib.contextmanager
    def reading(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-only connection, after storing queued runs and crashed processes' journals."""
        self.flush()
        own = self._recording.own_journals() if self._recording is not None else set()
        spool = spool_dir(self.path)
        never_made = not self.path.exists() and spool.is_dir()
        if has_dead(spool, own) or never_made or self._never_initialised():
            self._store_dead(own, reading=True)
        for attempt in range(2):
            with opened(self.path, write=False, wait_s=self.wait_s, on_wait=self.on_wait) as conn:
                version = check(conn, self.path)
                if version == LATEST:
                    with _engine_errors(self.path):
                        yield conn
                    return
            if attempt == 0:
                try:
                    self._store_dead(own)  # an older schema: migrating needs the write lock
                except StoreReadOnlyError as fault:
                    raise fault.adding(
                        f"it was written by an older agentbench (schema {version}; this one "
                        f"reads {LATEST})",
                        advice="open it once where it can be written, and it is migrated",
                    ) from None
        raise TraceStoreError(f"{self.path}: could not bring the store to schema {LATEST}")

    def _waiting_runs(self) -> int:
        """Runs the journals of dead processes hold (stored ones included: a count to tell)."""
        states = survey(spool_dir(self.path))
        return sum(len(s.parsed.run_ids()) for s in states if not s.alive and s.parsed)

    def unkept(self) -> tuple[int, int]:
        """Finished runs and eval results this process was handed but could not keep: the
        disk refused to journal them (full, or the store read-only; see `StorageFaultError`)."""
        recording = self._recording
        return (recording.lost_runs, recording.lost_results) if recording else (0, 0)

    def settle(self, *, reading: bool = False) -> None:
        """Make the file a store at this version's schema, holding everything queued here and
        everything crashed processes left in its spool (what a reader waits for first);
        `reading`: for a caller that only reads it, a read-only store is left as it is."""
        self.flush()
        own = self._recording.own_journals() if self._recording is not None else set()
        self._store_dead(own, reading=reading)

    def check_writable(self) -> None:
        """Raise now, not at the first run, what would keep this store from recording: the
        store's `StorageFaultError` for a full disk or a read-only store (its file, its
        folder, the journal folder beside it). For a command that takes work only once it
        knows it can keep it (`agentbench serve`). Makes or migrates the store and stores what
        crashed processes' journals hold first, as its first write would."""
        self.settle()
        with self.writing() as conn:
            # A write DuckDB must accept, taken back: a store attached read-only refuses it.
            conn.execute("BEGIN TRANSACTION")
            conn.execute("CREATE TABLE agentbench_write_check (ok BOOLEAN)")
            conn.execute("ROLLBACK")
        try_journal(spool_dir(self.path))

    def _never_initialised(self) -> bool:
        """An empty file: its creator was killed before DuckDB wrote anything (opening it
        for writing makes it a store)."""
        try:
            return self.path.stat().st_size == 0
        except OSError:
            return False

    def _store_dead(self, own: set[Path], *, reading: bool = False) -> None:
        """Store what dead processes' journals hold (and make or migrate the store).

        `reading`: for a reader, a store it cannot write is read as it is — a read-only store
        stays readable; the runs its journals hold are named in a warning, as they cannot be
        stored there. A full disk is still an error: the fix is room, and then they are."""
        try:
            for _ in range(_MAX_DEAD_BATCHES):
                more = store_batch(
                    self.path,
                    take=list,
                    give_back=lambda batch: None,
                    own=own,
                    wait_s=self.wait_s,
                    on_wait=self.on_wait,
                )
                if not more:
                    return
        except StorageFaultError as fault:
            waiting = self._waiting_runs()
            if not (reading and isinstance(fault, StoreReadOnlyError) and self.path.exists()):
                if waiting:
                    raise fault.adding(
                        f"its journals in {spool_dir(self.path)}/ hold {waiting} run(s), "
                        "stored once there is room"
                    ) from None
                raise
            if waiting:
                log.warning(
                    "%s is read-only (%s): the %d run(s) its journals in %s/ hold are not in "
                    "it; they are stored once it is writable",
                    self.path,
                    fault.reason,
                    waiting,
                    spool_dir(self.path),
                )


@contextlib.contextmanager
def _engine_errors(path: Path) -> Iterator[None]:
    """A read that fails inside the engine because the file is damaged (a checksum, a block
    past the end) is the store's problem, said as such, not an engine traceback."""
    try:
        yield
    except duckdb.Error as exc:
        text = str(exc)
        cut_short = str(path) in text and "Could not read" in text
        if not (cut_short or "checksum" in text or "Corrupt database file" in text):
            raise
        raise damaged(path, f"reading it failed ({text.removeprefix('IO Error: ')})") from None


class LabelledStore:
    """A `TraceStore` view whose recorded runs carry evaluation labels.

    Its runs (a trial's turns, a served request's) share one `redactor`: a value one of them
    learned is a secret (`Redactor.learned`) is masked in the runs after it, and whoever writes
    about the runs — results, a cassette, an answer — masks with it too."""

    def __init__(self, store: TraceStore, labels: RunLabels) -> None:
        self.store = store
        self.labels = labels
        self.redactor = Redactor(store.redaction)

    def run_hook(self) -> TraceRecorder | ProcessRecorder:
        return self.store.hook_for(self.labels, self.redactor)


_env_stores: dict[Path, TraceStore] = {}
_env_guard = threading.Lock()


def store_from_env() -> TraceStore | None:
    """The store AGENTBENCH_DB names (one per path per process), or None if it is unset."""
    value = os.environ.get(ENV_VAR)
    if not value:
        return None
    path = Path(value).absolute()
    with _env_guard:
        store = _env_stores.get(path)
        if store is None:
            store = _env_stores[path] = TraceStore(path)
        return store
