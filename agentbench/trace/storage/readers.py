"""Waiting readers go first, and a waiting writer gets its turn: both announce themselves.

DuckDB has no queue for its file lock: whoever asks at the right instant gets it. Writers ask
again the moment a batch is done, so a reader polling with backoff could wait for a whole
burst (seconds, with four writers). So a reader that finds the store locked drops a marker
file, `<spool>/<host>-<pid>-<token>.reader` (in the spool recording processes make), and
polls often; a writer looks for fresh markers before each batch and, while there is one, does
not open the store (its runs stay safe in its journal). The lock is then free within one
writer batch, and the reader removes its marker as soon as it is in. Markers are best effort:
a reader that cannot write the spool simply waits its turn like before.

A writer refused the lock leaves `<spool>/<host>-<pid>-<token>.writer`, touched again at
each try and removed once it is in, gives up, or closes. The holder keeps its connection
from batch to batch (see `database`) and gives it up for such a writer once it has had
`database.MAX_HOLD_S` of it; a writer that is not waiting itself stays out while one is.
Waiting writers do not stay out for each other: the first to ask gets the lock. So writers
take turns of a couple of seconds, and a writer alone is never made to reopen the file only
in case someone else wants it.

Two bounds keep this from starving writers instead: a marker counts for `PRIORITY_S` after it
was made or last touched (a reader stuck behind something else, or a process killed while it
waited, stops holding writers back, and writers delete such markers), and a writer gives way
for at most `MAX_GIVE_WAY_S` in a row before it takes one batch regardless.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SUFFIX = ".reader"
WRITER_SUFFIX = ".writer"
PRIORITY_S = 5.0
MAX_GIVE_WAY_S = 2.0

_giving_way_since: dict[Path, float] = {}
_announced_writers: set[Path] = set()  # spools this process's writer waits in
_guard = threading.Lock()


@contextlib.contextmanager
def announced(spool: Path) -> Iterator[None]:
    """A marker saying a reader waits, for the duration of the block (if it can be made)."""
    name = f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}{SUFFIX}"
    marker: Path | None = spool / name
    try:
        (spool / name).touch(exist_ok=False)
    except OSError:
        # No spool (no recording process ever wrote here, so no writer to ask) or a
        # read-only one: wait without priority.
        marker = None
    try:
        yield
    finally:
        if marker is not None:
            with contextlib.suppress(OSError):
                marker.unlink(missing_ok=True)


@dataclass(frozen=True)
class Waiting:
    """Who has announced that they wait for the store (fresh markers only)."""

    readers: bool = False
    writers: bool = False  # other processes' writers: never this one's own marker


def waiting(spool: Path) -> Waiting:
    """Who waits for the store, in one look at the spool. Removes markers too old to count."""
    try:
        entries = [e for e in os.scandir(spool) if e.name.endswith((SUFFIX, WRITER_SUFFIX))]
    except OSError:
        return Waiting()  # no spool yet, or not a folder: nobody announced anything
    now = time.time()
    mine = _writer_marker_name()
    readers = writers = False
    for entry in entries:
        try:
            age = now - entry.stat(follow_symlinks=False).st_mtime
        except OSError:
            continue  # its reader got in meanwhile
        if age > PRIORITY_S:
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
        elif entry.name.endswith(SUFFIX):
            readers = True
        elif entry.name != mine:
            writers = True
    return Waiting(readers=readers, writers=writers)


def readers_waiting(spool: Path) -> bool:
    """Is a reader waiting for the store? Removes markers too old to count."""
    return waiting(spool).readers


def _writer_marker_name() -> str:
    """This process's marker: one per process (a forked child makes its own), with a random
    part, since two containers sharing a host name and the store's folder may both be PID 1."""
    global _marker
    pid = os.getpid()
    if _marker[0] != pid:
        _marker = (pid, f"{socket.gethostname()}-{pid}-{secrets.token_hex(4)}{WRITER_SUFFIX}")
    return _marker[1]


_marker: tuple[int, str] = (0, "")


def writer_refused(spool: Path) -> None:
    """This process's writer found the store locked: say it waits (again: the marker's time is
    when it last tried, so it stays fresh while the writer keeps trying). Best effort."""
    with _guard:
        _announced_writers.add(spool)
    with contextlib.suppress(OSError):
        (spool / _writer_marker_name()).touch()


def writer_announced(spool: Path) -> bool:
    """Has this process's writer said it waits, and not got in since? Others give way to it
    then, so it polls often (and cheaply: see `database._try_connect`)."""
    return spool in _announced_writers


def writer_stopped_waiting(spool: Path) -> None:
    """This process's writer has the store, gave up, or is done: it no longer waits."""
    with _guard:
        if spool not in _announced_writers:
            return
        _announced_writers.discard(spool)
    with contextlib.suppress(OSError):
        (spool / _writer_marker_name()).unlink(missing_ok=True)


def should_give_way(db_path: Path, spool: Path, who: Waiting | None = None) -> bool:
    """Should this process's writer stay out of the store for now? (See the module doc.)
    `who`: what `waiting(spool)` said, if the caller already looked."""
    who = waiting(spool) if who is None else who
    with _guard:
        if not (who.readers or who.writers):
            _giving_way_since.pop(db_path, None)
            return False
        since = _giving_way_since.setdefault(db_path, time.monotonic())
        return time.monotonic() - since < MAX_GIVE_WAY_S


def wrote(db_path: Path) -> None:
    """A batch went in: the next reader gets a fresh `MAX_GIVE_WAY_S` of priority."""
    with _guard:
        _giving_way_since.pop(db_path, None)
