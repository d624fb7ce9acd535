"""This process's side of recording into a store: journal, pending runs, background ingest.

A finished run is appended to the journal (durable at once) and queued; a background thread
stores queued runs in DuckDB whenever it can take the write lock, retrying with jittered
backoff while another process holds it, and taking whatever else queued meanwhile with it
(group commit). The connection is closed after every batch, so other processes — writers and
`agentbench traces` readers — get their turn. At exit the queue is flushed (bounded wait); if
the store stays busy the journal is left behind and the next process to open the store
ingests it, so nothing is lost either way.
"""

from __future__ import annotations

import atexit
import logging
import os
import random
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentbench.trace.database import WaitNotice, opened
from agentbench.trace.errors import StoreBusyError
from agentbench.trace.ingest import insert_rows
from agentbench.trace.migrations import migrate
from agentbench.trace.schema import RunRows
from agentbench.trace.spool import Journal, recover, spool_dir

log = logging.getLogger("agentbench.trace")

_FIRST_RETRY_S = 0.02
_MAX_RETRY_S = 1.0
_ROTATE_BYTES = 4 << 20


def store_batch(
    db_path: Path,
    *,
    take: Callable[[], list[RunRows]],
    give_back: Callable[[list[RunRows]], None],
    own: set[Path],
    wait_s: float,
    on_wait: WaitNotice | None = None,
) -> None:
    """Open the store for writing, migrate it, and store `take()` plus dead journals.

    The batch is taken only once the write lock is held, so whoever holds the lock sees
    every run queued before it; on failure the batch is given back for the next attempt.
    """
    with opened(db_path, write=True, wait_s=wait_s, on_wait=on_wait) as conn:
        migrate(conn, db_path)
        batch = take()
        dead = recover(spool_dir(db_path), own)
        rows = RunRows()
        for part in batch:
            rows.extend(part)
        for journal in dead:
            rows.extend(journal.rows)
        try:
            if not rows.is_empty():
                insert_rows(conn, rows)
        except BaseException:
            give_back(batch)
            for journal in dead:
                journal.release()
            raise
        for journal in dead:
            log.info(
                "stored %d finished and %d incomplete runs from %s (its process is gone)",
                journal.finished,
                journal.incomplete,
                journal.path.name,
            )
            journal.discard()


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
        self.pending: list[RunRows] = []
        self.thread: threading.Thread | None = None
        self.closing = False
        self._last_error = ""

    def _check_fork(self) -> None:
        # A forked child shares our journal and queue objects: it must start its own.
        if os.getpid() != self.pid:
            self._reset()

    # -- called by the recorder (the runner's hook) ------------------------------------------
    def run_started(self, row: dict[str, Any]) -> None:
        self._check_fork()
        _live.add(self)  # flushed at exit
        with self.lock:
            self.journal.append({"start": row})
            self.open_runs[row["run_id"]] = row

    def run_finished(self, rows: RunRows) -> None:
        self._check_fork()
        _live.add(self)
        with self.lock:
            self.journal.append({"run": rows.as_dict()})
            for run in rows.runs:
                self.open_runs.pop(run["run_id"], None)
            self.pending.append(rows)
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(
                    target=self._ingest_loop, name="agentbench-trace-ingest", daemon=True
                )
                self.thread.start()
            self.wake.notify()

    # -- storing -----------------------------------------------------------------------------
    def own_journals(self) -> set[Path]:
        return {self.journal.path} if self.journal.path is not None else set()

    def has_pending(self) -> bool:
        with self.lock:
            return bool(self.pending)

    def ingest(self, wait_s: float, on_wait: WaitNotice | None = None) -> None:
        """Store what is queued (and any dead process's journal); StoreBusyError if we can't."""
        self._check_fork()
        store_batch(
            self.db_path,
            take=self._take,
            give_back=self._give_back,
            own=self.own_journals(),
            wait_s=wait_s,
            on_wait=on_wait,
        )
        with self.lock:
            self._maybe_rotate()

    def _take(self) -> list[RunRows]:
        with self.lock:
            batch, self.pending = self.pending, []
        return batch

    def _give_back(self, batch: list[RunRows]) -> None:
        with self.lock:
            self.pending[:0] = batch

    def _maybe_rotate(self) -> None:
        """Keep the journal small: once its finished runs are stored, only open runs matter."""
        if self.pending or self.journal.size == 0:
            return
        if self.open_runs and self.journal.size < _ROTATE_BYTES:
            return
        self.journal.rotate([{"start": row} for row in self.open_runs.values()])

    def _ingest_loop(self) -> None:
        delay = _FIRST_RETRY_S
        while True:
            with self.lock:
                while not self.pending and not self.closing:
                    self.wake.wait()
                if self.closing:
                    return
            try:
                self.ingest(wait_s=0)
            except StoreBusyError:
                pass  # another process is writing; try again shortly
            except Exception as exc:  # keep going: the runs are safe in the journal
                if str(exc) != self._last_error:
                    self._last_error = str(exc)
                    log.warning("could not store runs in %s yet: %s", self.db_path, exc)
            else:
                delay = _FIRST_RETRY_S
                continue
            with self.lock:
                if not self.closing:
                    self.wake.wait(timeout=delay * (0.5 + random.random()))
            delay = min(delay * 2, _MAX_RETRY_S)

    def flush(self, wait_s: float, on_wait: WaitNotice | None = None) -> None:
        """Store everything queued now, waiting up to `wait_s` for the lock."""
        if self.has_pending():
            self.ingest(wait_s, on_wait)

    def close(self) -> None:
        """Stop the thread, store what is queued, and remove the journal if nothing is open."""
        self._check_fork()
        with self.lock:
            self.closing = True
            self.wake.notify_all()
            thread = self.thread
        if thread is not None:
            thread.join(timeout=self.exit_wait_s)
        try:
            self.flush(self.exit_wait_s)
        except Exception as exc:  # at exit nothing may raise; the journal keeps the runs
            log.warning(
                "%d run(s) stay in the spool of %s (%s); they are stored the next time a "
                "process opens the store",
                len(self.pending),
                self.db_path,
                exc,
            )
        with self.lock:
            keep_journal = bool(self.pending or self.open_runs)
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
