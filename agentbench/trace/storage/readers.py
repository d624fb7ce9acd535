"""Waiting readers go first: a reader announces itself in the spool, writers give way.

DuckDB has no queue for its file lock: whoever asks at the right instant gets it. Writers ask
again the moment a batch is done, so a reader polling with backoff could wait for a whole
burst (seconds, with four writers). So a reader that finds the store locked drops a marker
file, `<spool>/<host>-<pid>-<token>.reader` (in the spool recording processes make), and
polls often; a writer looks for fresh markers before each batch and, while there is one, does
not open the store (its runs stay safe in its journal). The lock is then free within one
writer batch, and the reader removes its marker as soon as it is in. Markers are best effort:
a reader that cannot write the spool simply waits its turn like before.

Two bounds keep this from starving writers instead: a marker counts for `PRIORITY_S` after it
was made (a reader stuck behind something else, or killed, stops holding writers back, and
writers delete such markers), and a writer gives way for at most `MAX_GIVE_WAY_S` in a row
before it takes one batch regardless.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

SUFFIX = ".reader"
PRIORITY_S = 5.0
MAX_GIVE_WAY_S = 2.0

_giving_way_since: dict[Path, float] = {}
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


def readers_waiting(spool: Path) -> bool:
    """Is a reader waiting for the store? Removes markers too old to count."""
    try:
        entries = [e for e in os.scandir(spool) if e.name.endswith(SUFFIX)]
    except OSError:
        return False  # no spool yet, or not a folder: nobody announced anything
    now = time.time()
    waiting = False
    for entry in entries:
        try:
            age = now - entry.stat(follow_symlinks=False).st_mtime
        except OSError:
            continue  # its reader got in meanwhile
        if age <= PRIORITY_S:
            waiting = True
        else:
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
    return waiting


def should_give_way(db_path: Path, spool: Path) -> bool:
    """Should this process's writer stay out of the store for now? (See the module doc.)"""
    waiting = readers_waiting(spool)
    with _guard:
        if not waiting:
            _giving_way_since.pop(db_path, None)
            return False
        since = _giving_way_since.setdefault(db_path, time.monotonic())
        return time.monotonic() - since < MAX_GIVE_WAY_S


def wrote(db_path: Path) -> None:
    """A batch went in: the next reader gets a fresh `MAX_GIVE_WAY_S` of priority."""
    with _guard:
        _giving_way_since.pop(db_path, None)
