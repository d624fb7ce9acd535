"""Opening the store's DuckDB file: one writing process at a time, waiting politely.

DuckDB lets one process open a file for writing, or any number for reading, and refuses a
conflicting open at once ("Could not set lock on file … Conflicting lock is held in … (PID
n)"). `opened` retries such conflicts with jittered exponential backoff up to a deadline,
telling the caller once that it is waiting, and turns every other failure into an error that
names the file and what was expected. Within a process a lock per path serialises
connections, because DuckDB also refuses a read-only and a read-write connection to one file
in the same process.
"""

from __future__ import annotations

import contextlib
import random
import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb

from agentbench.trace.errors import (
    StoreBusyError,
    StoreFormatError,
    StoreNotFoundError,
    TraceStoreError,
)

WaitNotice = Callable[[str], None]

_FIRST_DELAY_S = 0.01
_MAX_DELAY_S = 0.5
_HOLDER = re.compile(r"Conflicting lock is held in (?P<program>.*?) \(PID (?P<pid>\d+)\)")
_process_locks: dict[Path, threading.Lock] = {}
_process_locks_guard = threading.Lock()


def _process_lock(path: Path) -> threading.Lock:
    with _process_locks_guard:
        return _process_locks.setdefault(path, threading.Lock())


def holder_of(message: str) -> str:
    """ "PID 123 (python3.11)" from DuckDB's lock-conflict message, if it says."""
    found = _HOLDER.search(message)
    if found is None:
        return "another process"
    return f"PID {found['pid']} ({Path(found['program']).name})"


def is_lock_conflict(error: BaseException) -> bool:
    return isinstance(error, duckdb.IOException) and "Could not set lock" in str(error)


@contextlib.contextmanager
def opened(
    path: Path,
    *,
    write: bool,
    wait_s: float,
    on_wait: WaitNotice | None = None,
) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection to `path`, held exclusively within this process until the block ends.

    `wait_s` bounds how long to wait for another process's lock (0: try once). Raises
    StoreBusyError when it runs out, StoreNotFoundError for a missing file opened to read,
    StoreFormatError for a file DuckDB cannot read.
    """
    lock = _process_lock(path)
    got = lock.acquire(timeout=wait_s) if wait_s > 0 else lock.acquire(blocking=False)
    if not got:
        raise StoreBusyError(f"trace store {path} is in use by another thread of this process")
    try:
        conn = _connect(path, write=write, wait_s=wait_s, on_wait=on_wait)
        try:
            conn.execute("SET TimeZone = 'UTC'")  # dates and partitions must not depend on TZ
            yield conn
        finally:
            conn.close()
    finally:
        lock.release()


def _connect(
    path: Path, *, write: bool, wait_s: float, on_wait: WaitNotice | None
) -> duckdb.DuckDBPyConnection:
    if not write and not path.exists():
        raise StoreNotFoundError(
            f"no trace store at {path}: nothing has been recorded there yet (record with "
            "Runner.run(..., store=TraceStore(path)) or AGENTBENCH_DB=path)"
        )
    if write:
        path.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + wait_s
    delay = _FIRST_DELAY_S
    told = False
    while True:
        try:
            return duckdb.connect(str(path), read_only=not write)
        except duckdb.Error as exc:
            if not is_lock_conflict(exc):
                raise _open_error(path, exc) from None
            holder = holder_of(str(exc))
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise StoreBusyError(
                    f"trace store {path} is busy: {holder} holds its lock"
                    + (f"; gave up after waiting {wait_s:g} s" if wait_s > 0 else "")
                ) from None
            if on_wait is not None and not told:
                on_wait(f"trace store {path} is busy ({holder}); waiting up to {wait_s:g} s")
                told = True
            time.sleep(min(delay * (0.5 + random.random()), remaining))
            delay = min(delay * 2, _MAX_DELAY_S)


def _open_error(path: Path, exc: BaseException) -> TraceStoreError:
    text = str(exc)
    if "Permission denied" in text:
        return TraceStoreError(f"cannot open trace store {path}: permission denied")
    return StoreFormatError(
        f"{path} is not a readable DuckDB database ({text.removeprefix('IO Error: ')}); "
        "expected an agentbench trace store"
    )
