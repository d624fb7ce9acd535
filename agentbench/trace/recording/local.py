"""This process's side of recording into a store: journal, pending runs, background ingest.

A finished run is appended to the journal (durable at once) and queued; a background thread
stores queued runs in DuckDB whenever it can take the write lock, retrying with jittered
backoff while another process holds it, and taking whatever else queued meanwhile with it
(group commit) up to a bound. While runs keep coming the thread keeps its connection from batch
to batch (see `storage.database`); it closes it once idle for `IDLE_CLOSE_S`, after a flush,
when a reader waits, when another writer waits and it has had `database.MAX_HOLD_S`, and after
`database.QUIET_HOLD_S` in any case, pausing a moment then, so other processes — writers and
`agentbench traces` readers, which writers let in first (see `storage.readers`) — get their
turn. At exit the queue is flushed (bounded wait); if the store stays busy the
journal is left behind and the next process to open the store ingests it, so nothing is lost
either way. A journal is deleted (or rotated) only once every run in it is committed; runs
taken for a batch that failed go back to the queue.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import os
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from agentbench.trace.errors import StorageFaultError, StoreBusyError
from agentbench.trace.journal.parsing import parse_part
from agentbench.trace.journal.spool import Journal, Recovered, recover, spool_dir
from agentbench.trace.schema import CHILD_TABLES, RunRows
from agentbench.trace.storage import database, readers
from agentbench.trace.storage.database import WaitNotice, opened
from agentbench.trace.storage.ingest import insert_rows
from agentbench.trace.storage.migrations import migrate

log = logging.getLogger("agentbench.trace")

_FIRST_RETRY_S = 0.02
_MAX_RETRY_S = 1.0
_ROTATE_BYTES = 4 << 20
# A kept connection is closed after this long without a batch: the file is free again for
# other processes soon after this one stops recording.
IDLE_CLOSE_S = 0.5
# Group commit: once a run is queued, the thread waits this long for others to join its
# batch (they are durable in the journal meanwhile); a commit costs far more than its rows.
GATHER_S = 0.25
# Bounds on one batch, so the write lock is held for a short, bounded time: queued parts
# (a part is one run, or one eval's results) and bytes of dead journals.
MAX_BATCH_PARTS = 200
MAX_DEAD_BYTES = 8 << 20
# Errors that mean "DuckDB refuses these rows" (the rows' fault, not the store's or disk's).
_REFUSED_ROWS = (duckdb.IntegrityError, duckdb.DataError, pa.ArrowException, ValueError, TypeError)


def store_batch(
    db_path: Path,
    *,
    take: Callable[[], list[RunRows]],
    give_back: Callable[[list[RunRows]], None],
    own: set[Path],
    wait_s: float,
    on_wait: WaitNotice | None = None,
    committed: Callable[[], None] = lambda: None,
    keep: bool = False,
) -> bool:
    """Open the store for writing, migrate it, and store `take()` plus dead journals
    (`keep`: on the connection kept from the last batch, and keep it for the next one).

    The batch is taken only once the write lock is held, so whoever holds the lock sees
    every run queued before it; on any failure it is given back for the next attempt, and
    `committed` is called only once its rows are in. Returns whether dead journals were
    left for another batch.
    """
    dead: list[Recovered] = []
    more = stored = False
    try:
        with opened(
            db_path,
            write=True,
            wait_s=wait_s,
            on_wait=on_wait,
            keep=keep,
            on_open=lambda conn: _prepare(conn, db_path),
        ) as conn:
            batch = take()
            try:
                recovery = recover(spool_dir(db_path), own, max_bytes=MAX_DEAD_BYTES)
                dead, more = recovery.journals, recovery.more
                dead = _insert_each(conn, batch, dead)
            except BaseException:
                give_back(batch)
                for journal in dead:
                    journal.release()
                raise
            stored = True
    finally:
        # Committed rows stay committed even if closing the connection fails afterwards.
        if stored:
            committed()
            for journal in dead:
                log.info(
                    "stored %d finished and %d incomplete runs from %s (its process is gone)",
                    journal.finished,
                    journal.incomplete,
                    journal.path.name,
                )
                journal.discard()
    return more


def _prepare(conn: duckdb.DuckDBPyConnection, db_path: Path) -> None:
    """A new write connection for batches: migrated, and working on one thread. A batch is
    a few small Arrow inserts; DuckDB's worker threads cost more CPU coordinating them
    than they save (~15% of a batch's CPU), and the recording process has work of its own."""
    migrate(conn, db_path)
    conn.execute("SET threads TO 1")


def _insert_each(
    conn: duckdb.DuckDBPyConnection, batch: list[RunRows], dead: list[Recovered]
) -> list[Recovered]:
    """Insert our batch and the dead journals' rows, in one transaction when all goes well.

    If DuckDB refuses some rows, each part is stored on its own: our batch (its error is
    raised if it is ours), then each journal, and one whose rows are refused is quarantined
    — one bad journal never costs anyone else's runs. Returns the journals stored.
    """
    ours = RunRows()
    for part in batch:
        ours.extend(part)
    rows = RunRows()
    rows.extend(ours)
    for journal in dead:
        rows.extend(journal.rows)
    if rows.is_empty():
        return dead
    try:
        insert_rows(conn, rows)
        return dead
    except _REFUSED_ROWS:
        if not dead:
            raise
    if not ours.is_empty():
        insert_rows(conn, ours)
    stored = []
    for journal in dead:
        try:
            if not journal.rows.is_empty():
                insert_rows(conn, journal.rows)
        except _REFUSED_ROWS as exc:
            journal.quarantine(f"the store refused its rows: {' '.join(str(exc).split())[:500]}")
        else:
            stored.append(journal)
    return stored


class Recording:
    """Journal + queue + ingest thread for one store in this process."""

    def __init__(self, db_path: Path, *, fsync: bool = False, exit_wait_s: float = 10.0) -> None:
        self.db_path = db_path
        self.fsync = fsync
        self.exit_wait_s = exit_wait_s
        self._reset()

    def _reset(self) -> None:
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self.wake = threading.Condition(self.lock)
        self.journal = Journal(spool_dir(self.db_path), fsync=self.fsync)
        self.open_runs: dict[str, dict[str, Any]] = {}
        # Where the parts of open runs are in the journal (their rows are not held here).
        self.spilled: dict[str, list[tuple[int, int]]] = {}
        self.pending: list[RunRows] = []
        self.in_flight: list[RunRows] = []  # taken for a batch, not yet committed
        self.more_dead = False  # dead journals left over by the last batch
        self.thread: threading.Thread | None = None
        self.closing = False
        self._last_error = ""
        # What the disk refused to journal (see `_unkept`), and runs whose parts it refused.
        self.lost_runs = 0
        self.lost_results = 0
        self.lost_ids: set[str] = set()  # a result scoring one of these is not kept either
        self.broken: dict[str, StorageFaultError] = {}
        self.fault_told = False  # a storage fault was raised to a caller: close says no more
        # Eval results the disk refused, not raised when they were handed over (see
        # `run_finished`): the next flush raises it.
        self.untold: StorageFaultError | None = None

    def _check_fork(self) -> None:
        # A forked child shares our journal and queue objects: it must start its own.
        if os.getpid() != self.pid:
            self._reset()

    # -- called by the recorder (the runner's hook) ------------------------------------------
    def run_started(self, row: dict[str, Any]) -> None:
        """A start marker (a crash then shows the run as incomplete). One the disk refuses
        is no loss yet: the run is kept if its finishing line can be written."""
        self._check_fork()
        _live.add(self)  # flushed at exit
        with self.lock:
            try:
                self.journal.append({"start": row})
            except StorageFaultError:
                return
            self.open_runs[row["run_id"]] = row

    def run_part(self, rows: RunRows) -> None:
        """Rows a long run has finished, before it ends: journaled (durable, and counted
        once the run's own line follows), then held only as where they are in the journal."""
        self._check_fork()
        run_id = next(row["run_id"] for name in CHILD_TABLES for row in rows.table(name))
        with self.lock:
            try:
                where = self.journal.append({"part": rows.as_dict()})
            except StorageFaultError as fault:
                # Rows the recorder no longer holds: the run cannot be kept whole.
                self.broken[run_id] = fault
                raise self._unkept(fault) from None
            self.spilled.setdefault(run_id, []).append(where)

    def run_finished(self, rows: RunRows) -> None:
        """A finished run's rows (or an eval's results): journaled, then queued to be stored.
        StorageFaultError if the disk refused a run: it is not kept, and the runner says so.
        Results alone the disk refused are counted and raised by the next `flush`: their
        trial is scored, and the eval's count of kept trials leaves them out."""
        self._check_fork()
        _live.add(self)
        with self.lock:
            try:
                for run in rows.runs:
                    if run["run_id"] in self.broken:
                        raise self.broken[run["run_id"]]
                if self._drop_results_of_lost_runs(rows):
                    return  # all of it scored lost runs: nothing left to keep
                self.journal.append({"run": rows.as_dict()})
            except StorageFaultError as fault:
                self.lost_runs += len(rows.runs)
                self.lost_results += len(rows.results)
                for run in rows.runs:
                    self.lost_ids.add(run["run_id"])
                    self.open_runs.pop(run["run_id"], None)
                    self.spilled.pop(run["run_id"], None)
                    self.broken.pop(run["run_id"], None)
                if rows.runs:
                    raise self._unkept(fault) from None
                self.untold = self._unkept(fault)
                return
            for run in rows.runs:
                self.open_runs.pop(run["run_id"], None)
                for at, length in self.spilled.pop(run["run_id"], ()):
                    rows.parts.append(functools.partial(self._read_part, at, length))
            self.pending.append(rows)
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(
                    target=self._ingest_loop, name="agentbench-trace-ingest", daemon=True
                )
                self.thread.start()
            # The thread waits for a first run, then gathers others until `GATHER_S` has
            # passed or a batch is full (see `_wait_for_work`): only those two need it awake.
            # Waking it for every run would cost a thread switch each, for nothing.
            if len(self.pending) == 1 or len(self.pending) >= MAX_BATCH_PARTS:
                self.wake.notify()

    def _drop_results_of_lost_runs(self, rows: RunRows) -> bool:
        """Leave out results whose run the disk refused: a stored result always has its run
        (a run handed to a recording process and lost there may be scored already). They
        count as lost; the fault that lost the run is told already. True if none is left."""
        if not self.lost_ids or not rows.results:
            return False
        kept = [row for row in rows.results if row.get("run_id") not in self.lost_ids]
        self.lost_results += len(rows.results) - len(kept)
        rows.results[:] = kept
        return rows.is_empty()

    def _unkept(self, fault: StorageFaultError) -> StorageFaultError:
        """`fault`, saying what this process could not keep so far and where the rest is."""
        self.fault_told = True
        lost = [
            f"{count} {name}"
            for count, name in (
                (self.lost_runs, "finished run(s)"),
                (self.lost_results, "eval result(s)"),
                (len(self.broken), "running run(s), whose rows it could not journal,"),
            )
            if count
        ]
        return fault.adding(
            f"{' and '.join(lost)} could not be kept; the rest are kept (stored, or in its "
            f"journal in {self.journal.directory}/)"
        )

    # -- storing -----------------------------------------------------------------------------
    def own_journals(self) -> set[Path]:
        return {self.journal.path} if self.journal.path is not None else set()

    def has_pending(self) -> bool:
        with self.lock:
            return bool(self.pending or self.more_dead)

    def backlog(self) -> int:
        """Finished runs' rows handed over and not stored yet (batches of them, as handed)."""
        with self.lock:
            return len(self.pending) + len(self.in_flight)

    def ingest(self, wait_s: float, on_wait: WaitNotice | None = None) -> None:
        """Store one bounded batch of what is queued (and dead processes' journals);
        StoreBusyError if we can't."""
        self._check_fork()
        more = store_batch(
            self.db_path,
            take=self._take,
            give_back=self._give_back,
            own=self.own_journals(),
            wait_s=wait_s,
            on_wait=on_wait,
            committed=self._committed,
            keep=True,
        )
        with self.lock:
            self.more_dead = more
            self._maybe_rotate()

    def _take(self) -> list[RunRows]:
        with self.lock:
            batch = self.pending[:MAX_BATCH_PARTS]
            del self.pending[:MAX_BATCH_PARTS]
            self.in_flight = batch
        return batch

    def _give_back(self, batch: list[RunRows]) -> None:
        with self.lock:
            self.pending[:0] = batch
            self.in_flight = []

    def _committed(self) -> None:
        with self.lock:
            self.in_flight = []

    def _read_part(self, at: int, length: int) -> RunRows:
        with self.lock:  # the journal is not rotated meanwhile: this part's run is pending
            line = self.journal.read_line(at, length)
        return parse_part(line)

    def _maybe_rotate(self) -> None:
        """Keep the journal small: once its finished runs are stored, only open runs matter
        (and not at all while an open run has parts in it: they are its only copy)."""
        if self.pending or self.in_flight or self.spilled or self.journal.size == 0:
            return
        if self.open_runs and self.journal.size < _ROTATE_BYTES:
            return
        self.journal.rotate([{"start": row} for row in self.open_runs.values()])

    def _ingest_loop(self) -> None:
        delay = _FIRST_RETRY_S
        while True:
            self._wait_for_work()
            with self.lock:
                if self.closing:
                    return
                if not self.pending and not self.more_dead:
                    continue  # a flush stored it meanwhile: no batch, no need to open the file
            try:
                self.ingest(wait_s=0)
            except (StoreBusyError, StorageFaultError):
                # Another process is writing, or the disk is full: try again shortly (a flush
                # that cannot store them says why; the runs are safe in the journal).
                pass
            except Exception as exc:  # keep going: the runs are safe in the journal
                if str(exc) != self._last_error:
                    self._last_error = str(exc)
                    log.warning("could not store runs in %s yet: %s", self.db_path, exc)
            else:
                delay = _FIRST_RETRY_S
                if not database.is_kept(self.db_path):
                    # Given up for another process (`database._turn_is_over`): a pause (not
                    # cut short by new runs, unlike the waits here) lets it in first.
                    time.sleep(_FIRST_RETRY_S * (0.5 + random.random()))
                continue
            with self.lock:
                if not self.closing:
                    self.wake.wait(timeout=delay * (0.5 + random.random()))
            delay = min(delay * 2, database.poll_s(spool_dir(self.db_path), _MAX_RETRY_S))

    def _wait_for_work(self) -> None:
        """Until something is queued (or we close), and then `GATHER_S` more for others to
        join it; a kept connection is closed once nothing came for `IDLE_CLOSE_S`."""
        with self.lock:
            idle = not self.pending and not self.more_dead and not self.closing
            if idle and database.is_kept(self.db_path):
                self.wake.wait(timeout=IDLE_CLOSE_S)
                idle = not self.pending and not self.more_dead and not self.closing
            else:
                idle = False
        if idle:
            database.release(self.db_path)
        with self.lock:
            while not self.pending and not self.more_dead and not self.closing:
                self.wake.wait()
            gathered = time.monotonic() + GATHER_S
            while not self.closing and len(self.pending) < MAX_BATCH_PARTS:
                remaining = gathered - time.monotonic()
                if remaining <= 0:
                    break
                self.wake.wait(timeout=remaining)

    def flush(self, wait_s: float, on_wait: WaitNotice | None = None) -> None:
        """Store everything queued now, batch by batch (waiting readers get their turn in
        between), waiting up to `wait_s` in all for the lock; the file is closed after."""
        deadline = time.monotonic() + wait_s
        try:
            while self.has_pending():
                self.ingest(max(0.0, deadline - time.monotonic()), on_wait)
        except StorageFaultError as fault:
            self.fault_told, self.untold = True, None  # one fault, counting what was lost
            raise fault.adding(
                f"finished runs not stored yet stay in its journal in {self.journal.directory}/"
            ) from None
        database.release(self.db_path, wait_s=max(0.0, deadline - time.monotonic()))
        untold, self.untold = self.untold, None
        if untold is not None:
            raise untold

    def close(self) -> None:
        """Stop the thread, store what is queued, and remove the journal if nothing is open."""
        self._check_fork()
        with self.lock:
            self.closing = True
            self.wake.notify_all()
            thread = self.thread
        if thread is not None:
            thread.join(timeout=self.exit_wait_s)
        # Once a fault was raised to the caller, what it cost is the caller's to tell (the
        # eval's note counts everything lost, this close included): not said again here.
        told = self.fault_told
        try:
            self.flush(self.exit_wait_s)
        except Exception as exc:  # at exit nothing may raise; the journal keeps the runs
            with contextlib.suppress(Exception):  # the runs are safe either way
                database.release(self.db_path, wait_s=self.exit_wait_s)
            if not (told and isinstance(exc, StorageFaultError)):  # said once already
                log.warning(
                    "%d run(s) stay in the spool of %s (%s); they are stored the next time a "
                    "process opens the store",
                    len(self.pending) + len(self.in_flight),
                    self.db_path,
                    exc,
                )
        readers.writer_stopped_waiting(spool_dir(self.db_path))  # done: nobody waits for it
        with self.lock:
            # Only what is committed may go: a run taken for a batch that never committed
            # (whatever went wrong) keeps the journal, and the next process stores it.
            keep_journal = bool(self.pending or self.in_flight or self.open_runs or self.spilled)
            self.journal.close(delete=not keep_journal)
            self.thread = None
            self.closing = False
        _live.discard(self)


_live: set[Recording] = set()


@atexit.register
def _close_all() -> None:
    for recording in list(_live):
        if recording.pid == os.getpid():
            recording.close()
