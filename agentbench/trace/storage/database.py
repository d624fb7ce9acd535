"""Opening the store's DuckDB file: one writing process at a time, waiting politely.

DuckDB lets one process open a file for writing, or any number for reading, and refuses a
conflicting open at once ("Could not set lock on file … Conflicting lock is held in … (PID
n)"). `opened` retries such conflicts with jittered exponential backoff up to a deadline,
telling the caller once that it is waiting, and turns every other failure into an error that
names the file and what was expected. Within a process a lock per path serialises
connections, because DuckDB also refuses a read-only and a read-write connection to one file
in the same process.

Waiting readers get the lock first (see `readers`): a reader that has to wait says so in the
spool, and a writer that sees it stays out for a moment. A file that exists but is empty (its
creator was killed before DuckDB wrote a header) is made a new store on the first write; one
shorter than DuckDB's own block count says was cut short, and is refused as damaged.

The ingest thread keeps its write connection between batches (`keep=True`): opening,
checking and closing the file cost far more than a batch's inserts. A kept connection is
only a parking spot inside the process lock: whoever opens the path next in this process
reuses it (another keeping writer) or closes it first (a reader, a plain writer), so there is
still one connection per path and the lock probes below stay safe. It is given up when a
reader from another process announces itself, when a writer of another process does and it
has been held `MAX_HOLD_S` (writers take turns), after `QUIET_HOLD_S` whoever waits (a
process that cannot announce itself, such as the `duckdb` shell, gets a moment then), and
when its owner goes idle (`release`). Reopening costs a checkpoint and a connect, 30-100 ms:
a writer alone keeps its connection rather than reopen every couple of seconds for nobody.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb

from agentbench.trace.errors import (
    StoreBusyError,
    StoreFormatError,
    StoreNotFoundError,
    StorePathError,
    TraceStoreError,
    damaged,
)
from agentbench.trace.journal.spool import held_elsewhere, quarantine, spool_dir
from agentbench.trace.storage import readers
from agentbench.trace.storage.faults import storage_fault

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger("agentbench.trace")

WaitNotice = Callable[[str], None]

_FIRST_DELAY_S = 0.01
_MAX_DELAY_S = 0.5
# A reader that announced itself polls this often: writers let it in within one batch.
_ANNOUNCED_POLL_S = 0.02
_READER_WAITING = "a reader is waiting for it"
_WRITER_WAITING = "another process's writer is waiting for its turn"
_GIVING_WAY = (_READER_WAITING, _WRITER_WAITING)
_HELD_ELSEWHERE = "another process holds its lock"
# How often a writer that announced itself tries again: others give way to it meanwhile.
WRITER_POLL_S = 0.05
_HOLDER = re.compile(r"Conflicting lock is held in (?P<program>.*?) \(PID (?P<pid>\d+)\)")
_process_locks: dict[Path, threading.Lock] = {}
_process_locks_guard = threading.Lock()
# A kept write connection is given up for a waiting writer once it is this old, and for
# anyone at all once it is `QUIET_HOLD_S` old.
MAX_HOLD_S = 2.0
QUIET_HOLD_S = 10.0


@dataclass
class _Kept:
    conn: duckdb.DuckDBPyConnection
    pid: int  # a forked child must neither use nor close its parent's connection
    opened_at: float


_kept: dict[Path, _Kept] = {}  # guarded by the path's process lock
# In a forked child: the connections its parent kept. DuckDB's threads did not come along, so
# closing or freeing one aborts the child (`terminate called…`), and DuckDB, its memory copied,
# refuses to open the same file again in this process: the child waits, as for a busy store.
_inherited: dict[Path, _Kept] = {}


def _after_fork_in_child() -> None:
    global _process_locks_guard
    _inherited.update(_kept)
    _kept.clear()
    # A parent's thread may have held one at the fork: held forever here.
    _process_locks.clear()
    _process_locks_guard = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _held_by_parent(path: Path) -> str | None:
    """Why this forked process cannot open `path`: its parent had it open at the fork."""
    kept = _inherited.get(path)
    if kept is None:
        return None
    return (
        f"the process this one was forked from (PID {kept.pid}) had it open; a forked "
        "process cannot open it too (its runs wait in its journal, stored once it exits)"
    )


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
    keep: bool = False,
    on_open: Callable[[duckdb.DuckDBPyConnection], None] | None = None,
) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection to `path`, held exclusively within this process until the block ends.

    `keep` (writers): park the connection afterwards for the next keeping writer, unless the
    block failed. `on_open` runs once on each new connection (not on a kept one).
    `wait_s` bounds how long to wait for another process's lock (0: try once). Raises
    StoreBusyError when it runs out, StoreNotFoundError for a missing file opened to read,
    StoreFormatError for a file DuckDB cannot read (StoreDamagedError: one cut short).
    """
    lock = _process_lock(path)
    got = lock.acquire(timeout=wait_s) if wait_s > 0 else lock.acquire(blocking=False)
    if not got:
        raise StoreBusyError(f"trace store {path} is in use by another thread of this process")
    try:
        kept = _reusable(path) if write and keep else _close_kept(path)
        if kept is None:
            conn = _connect(path, write=write, wait_s=wait_s, on_wait=on_wait)
            kept = _Kept(conn, os.getpid(), time.monotonic())
            try:
                _check_whole(conn, path)
                conn.execute("SET TimeZone = 'UTC'")  # dates and partitions must not depend on TZ
                if on_open is not None:
                    with _told_as_faults(path, write=write):
                        on_open(conn)
            except BaseException:
                conn.close()
                raise
        done = False
        try:
            with _told_as_faults(path, write=write):
                yield kept.conn
            done = True
        finally:
            if done and write and keep and not _turn_is_over(path, kept):
                _kept[path] = kept
            else:
                kept.conn.close()
    finally:
        lock.release()


@contextlib.contextmanager
def _told_as_faults(path: Path, *, write: bool) -> Iterator[None]:
    """A write the disk refused (full, read-only) is the store's storage fault, said as such
    (DuckDB says it as a transaction or I/O error, or as a database it has invalidated)."""
    try:
        yield
    except duckdb.Error as exc:
        fault = storage_fault(path, exc) if write else None
        if fault is None:
            raise
        raise fault from None


def is_kept(path: Path) -> bool:
    """Does this process keep a write connection to `path` open between batches?"""
    kept = _kept.get(path)
    return kept is not None and kept.pid == os.getpid()


def release(path: Path, *, wait_s: float = 0.0) -> bool:
    """Close this process's kept connection to `path` (its owner went idle, or is done).
    False if another thread holds the path meanwhile (it closes or keeps it itself)."""
    lock = _process_lock(path)
    if not (lock.acquire(timeout=wait_s) if wait_s > 0 else lock.acquire(blocking=False)):
        return False
    try:
        _close_kept(path)
    finally:
        lock.release()
    return True


def _reusable(path: Path) -> _Kept | None:
    """The kept connection, if it may serve another batch (see `_turn_is_over`)."""
    kept = _kept.get(path)
    if kept is None or kept.pid != os.getpid():
        _kept.pop(path, None)
        return None
    if _turn_is_over(path, kept):
        return _close_kept(path)
    readers.wrote(path)
    del _kept[path]
    return kept


def _turn_is_over(path: Path, kept: _Kept) -> bool:
    """Should the kept connection be given up now? For a reader of another process that
    waits (it goes first, as for a new connection), for a writer of another process that
    waits once it has been held `MAX_HOLD_S`, and for anyone after `QUIET_HOLD_S`."""
    held = time.monotonic() - kept.opened_at
    if held >= QUIET_HOLD_S:
        return True
    spool = spool_dir(path)
    who = readers.waiting(spool)
    if held < MAX_HOLD_S:
        who = readers.Waiting(readers=who.readers)  # writers wait for the end of the turn
    return readers.should_give_way(path, spool, who)


def _close_kept(path: Path) -> None:
    """Close the kept connection to `path`, if any (the caller holds the process lock)."""
    kept = _kept.pop(path, None)
    if kept is not None and kept.pid == os.getpid():
        kept.conn.close()


def _connect(
    path: Path, *, write: bool, wait_s: float, on_wait: WaitNotice | None
) -> duckdb.DuckDBPyConnection:
    if not write and not path.exists():
        raise StoreNotFoundError(
            f"no trace store at {path}: nothing has been recorded there yet (record with "
            "Runner.run(..., store=TraceStore(path)) or AGENTBENCH_DB=path)"
        )
    if write:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # a mistyped --db: a file where a folder should be, say
            fault = storage_fault(path, exc, file=path.parent)
            if fault is not None:
                raise fault from None
            raise StorePathError(
                f"cannot make a trace store at {path}: its folder {path.parent} cannot be "
                f"created ({exc.strerror}: {exc.filename})"
            ) from None
        _initialise_if_empty(path)
    spool = spool_dir(path)
    deadline = time.monotonic() + wait_s
    delay = _FIRST_DELAY_S
    told = False
    conflict = ""
    with contextlib.ExitStack() as waiting:
        while True:
            conn, conflict = _try_connect(
                path, write=write, spool=spool, last=conflict, polling=wait_s <= 0
            )
            if conn is not None:
                return conn
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if write and wait_s > 0:
                    # It stops waiting: others must not give way to it any more. (A writer
                    # polling without a wait, the ingest thread, will be back.)
                    readers.writer_stopped_waiting(spool)
                raise StoreBusyError(
                    f"trace store {path} is busy: {conflict}"
                    + (f"; gave up after waiting {wait_s:g} s" if wait_s > 0 else "")
                )
            if not told:
                if on_wait is not None:
                    on_wait(f"trace store {path} is busy ({conflict}); waiting up to {wait_s:g} s")
                if not write:
                    waiting.enter_context(readers.announced(spool))
                told = True
            time.sleep(min(delay * (0.5 + random.random()), remaining))
            delay = min(delay * 2, poll_s(spool) if write else _ANNOUNCED_POLL_S)


def poll_s(spool: Path, longest: float = _MAX_DELAY_S) -> float:
    """The longest wait between a writer's tries: `WRITER_POLL_S` once it has announced
    itself (others give way to it meanwhile), else `longest`."""
    return WRITER_POLL_S if readers.writer_announced(spool) else longest


def _try_connect(
    path: Path, *, write: bool, spool: Path, last: str, polling: bool = False
) -> tuple[duckdb.DuckDBPyConnection | None, str]:
    """A connection, or None and who is in the way (a lock holder, a waiting reader or
    writer). A writer refused the lock says it waits (`readers.writer_refused`); writers that
    wait do not give way to each other, only to readers (the first to ask gets it).

    Once DuckDB has named the holder (`last`), or when a writer that announced itself polls
    (`polling`: one try a call, again and again), the lock is probed directly first: a refused
    `duckdb.connect` costs 30-100 ms of CPU, a probe microseconds, so waiting stays cheap
    and polling can be frequent."""
    announced = write and readers.writer_announced(spool)
    if write:
        who = readers.waiting(spool)
        if announced:
            who = readers.Waiting(readers=who.readers)
        if readers.should_give_way(path, spool, who):
            return None, _READER_WAITING if who.readers else _WRITER_WAITING
    known = last and last not in _GIVING_WAY  # DuckDB named the holder: probe first
    if (known or (announced and polling)) and _lock_taken(path, write=write):
        if write:
            readers.writer_refused(spool)
        return None, last if known else _HELD_ELSEWHERE
    try:
        conn = _open_writer(path) if write else duckdb.connect(str(path), read_only=True)
    except duckdb.Error as exc:
        if not is_lock_conflict(exc):
            forked = _held_by_parent(path)
            if forked is not None:
                return None, forked
            raise _open_error(path, exc, write=write) from None
        if write:
            readers.writer_refused(spool)
        return None, f"{holder_of(str(exc))} holds its lock"
    if write:
        readers.wrote(path)
        readers.writer_stopped_waiting(spool)
    return conn, ""


# Rows in a row group of the store's tables, for writers (DuckDB's default is 122,880). A
# checkpoint compacts a table's small row groups (one a batch) into full ones, holding what it
# merges in memory: with full-size groups of wide rows (request bodies) that is hundreds of MB
# at a time in whatever process writes (~450 MB for rows of 1.5 KB; a 10,000-case eval's
# driver peaked at 456 MB, 248 MB since). At 4,096 rows it is ~70 MB, and the file is no
# larger (`benchmarks/store_peak.py`). DuckDB takes the size per attachment, not from the file.
ROW_GROUP_ROWS = 4096


def _open_writer(path: Path) -> duckdb.DuckDBPyConnection:
    """A read-write connection to `path`: the file attached (with `ROW_GROUP_ROWS`) to an
    in-memory catalog and made the default, so every statement reads as on the file's own."""
    conn = duckdb.connect()
    try:
        quoted = str(path).replace("'", "''")
        conn.execute(f"ATTACH '{quoted}' AS store (ROW_GROUP_SIZE {ROW_GROUP_ROWS})")
        conn.execute("USE store")
    except BaseException:
        conn.close()
        raise
    return conn


def _lock_taken(path: Path, *, write: bool) -> bool:
    """Does another process hold the file lock DuckDB takes (a POSIX lock on the whole
    file: shared to read, exclusive to write)? Safe only because this process holds no
    connection to `path` meanwhile (`opened` serialises them): closing our probe drops
    every POSIX lock this process has on the file."""
    if fcntl is None:  # pragma: no cover - Windows
        return False
    try:
        fd = os.open(path, os.O_RDWR if write else os.O_RDONLY)
    except OSError:
        return False  # let DuckDB say what is wrong
    try:
        fcntl.lockf(fd, (fcntl.LOCK_EX if write else fcntl.LOCK_SH) | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def _initialise_if_empty(path: Path) -> None:
    """An empty file where the store should be: its creator died before DuckDB wrote the
    header, so nothing was ever in it. Replace it with a new store (DuckDB refuses to open
    an empty file), under a lock in the spool so two processes do not race to do it, and
    never while some process still holds the file open through DuckDB."""
    try:
        if path.stat().st_size != 0:
            return
    except FileNotFoundError:
        return
    spool = spool_dir(path)
    try:
        spool.mkdir(parents=True, exist_ok=True)
        guard = (spool / ".init.lock").open("a")
    except OSError as exc:
        fault = storage_fault(path, exc)
        if fault is not None:
            raise fault from None
        raise TraceStoreError(
            f"{path} is an empty file (a store whose creation was cut short) and it cannot be "
            f"initialised: {exc}; delete it, or point --db / AGENTBENCH_DB elsewhere"
        ) from None
    with guard:
        if fcntl is not None:
            fcntl.flock(guard.fileno(), fcntl.LOCK_EX)  # released when `guard` closes
        try:
            if path.stat().st_size != 0 or held_elsewhere(path):
                return  # someone else made it a store meanwhile, or is making it one
        except FileNotFoundError:
            return
        wal = path.with_name(path.name + ".wal")
        if wal.exists():
            quarantine(
                wal,
                f"the write-ahead log of {path.name}, found beside an empty store file (its "
                "creation was cut short); moved aside so a new store could be made there",
                spool,
            )
        path.unlink()
        duckdb.connect(str(path)).close()
        log.warning("%s was an empty file (never initialised); made it a new trace store", path)


def _check_whole(conn: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Refuse a file shorter than the blocks DuckDB says it holds: it was cut short, and
    reading it would fail half-way through a query with an engine error."""
    # One row per attached database (a writer's in-memory catalog too): the file's is ours.
    cursor = conn.execute(
        "SELECT * FROM pragma_database_size() WHERE database_name = current_database()"
    )
    names = [d[0] for d in cursor.description or ()]
    row = dict(zip(names, cursor.fetchone() or (), strict=False))
    # Used blocks, not total: DuckDB trims free blocks off the end of the file.
    needed = int(row.get("block_size") or 0) * int(row.get("used_blocks") or 0)
    size = path.stat().st_size
    if size < needed:
        raise damaged(
            path,
            f"the file is {size:,} bytes but its header says it holds {needed:,} bytes of "
            "data in use: it was cut short (truncated)",
        )


def _open_error(path: Path, exc: BaseException, *, write: bool) -> TraceStoreError:
    text = str(exc)
    fault = storage_fault(path, exc) if write else None
    if fault is not None:  # a store this process may read but not write is not damaged
        return fault
    if "Permission denied" in text:
        return TraceStoreError(f"cannot open trace store {path}: permission denied")
    if _is_duckdb_file(path) and "version" not in text.lower():  # not a DuckDB upgrade
        return damaged(path, f"DuckDB cannot open it ({text.removeprefix('IO Error: ')})")
    return StoreFormatError(
        f"{path} is not a readable DuckDB database ({text.removeprefix('IO Error: ')}); "
        "expected an agentbench trace store"
    )


def _is_duckdb_file(path: Path) -> bool:
    """Does the file start like a DuckDB database ("DUCK" at byte 8)? Then it is damaged,
    not foreign."""
    try:
        with path.open("rb") as handle:
            return handle.read(12)[8:12] == b"DUCK"
    except OSError:
        return False
