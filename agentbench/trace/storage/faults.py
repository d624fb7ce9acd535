"""Storage faults told as such: a full disk or a read-only store, never "damaged" or a bug.

The system says why a write failed in its errno — ENOSPC, EDQUOT and EFBIG: no room; EROFS,
EACCES and EPERM: not writable — and DuckDB only in its message, which carries the system's
words ("No space left on device", "Read-only file system") and the file, or says the
connection is read-only. Either way the fault becomes a `StoreFullError` or a
`StoreReadOnlyError` naming the store, the file the write was for, the cause, and what to do.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
from pathlib import Path

import duckdb

from agentbench.trace.errors import StorageFaultError, StoreFullError, StoreReadOnlyError

# What each fault is, said of the store: "the store X's disk is full".
_NO_ROOM = {
    errno.ENOSPC: "'s disk is full",
    errno.EDQUOT: "'s disk quota is used up",
    errno.EFBIG: " has reached a file size limit",
}
_NOT_WRITABLE = (errno.EROFS, errno.EACCES, errno.EPERM)
_WORDS = {os.strerror(code): code for code in (*_NO_ROOM, *_NOT_WRITABLE)}
# DuckDB refusing a write on a connection opened read-only.
_READ_ONLY_MODE = re.compile(r"read-only mode|opened in read only mode", re.IGNORECASE)
# The file DuckDB names: `file "/x/y"`, or `file \"/x/y\"` inside the JSON of an async write.
_FILE = re.compile(r'file \\?"(?P<file>[^"\\]+)\\?"')

FULL_ADVICE = (
    "free some space on its disk (the next agentbench command to open the store then stores "
    "what its journals hold), or point --db / AGENTBENCH_DB at a store on another disk"
)
READ_ONLY_ADVICE = (
    "commands that only read it still work; to record, make it writable (the file, its "
    "folder and the .spool/ folder beside it) or point --db / AGENTBENCH_DB elsewhere"
)


def fault_errno(exc: BaseException) -> int | None:
    """The storage errno behind `exc`: an OSError's own, else the one its message names."""
    if isinstance(exc, OSError) and exc.errno in (*_NO_ROOM, *_NOT_WRITABLE):
        return exc.errno
    text = str(exc)
    for words, code in _WORDS.items():
        if words in text:
            return code
    if _READ_ONLY_MODE.search(text):
        return errno.EROFS
    return None


def storage_fault(
    store: Path, exc: BaseException, *, file: Path | None = None
) -> StorageFaultError | None:
    """`exc` as the store's storage fault, or None if it is not one. `file`: what was being
    written, when `exc` does not say (an OSError's filename, a DuckDB message's file)."""
    if isinstance(exc, StorageFaultError):
        return exc
    code = fault_errno(exc)
    if code is None:
        return None
    file = file or file_of(exc)
    reason = os.strerror(code)
    writing = f", writing {file}" if file is not None else ""
    if code in _NO_ROOM:
        headline = f"the store {store}{_NO_ROOM[code]} ({reason}{writing})"
        return StoreFullError(headline, store=store, file=file, reason=reason, advice=FULL_ADVICE)
    if not isinstance(exc, OSError) and code == errno.EROFS and _READ_ONLY_MODE.search(str(exc)):
        reason = "opened read-only"
    headline = f"the store {store} is read-only ({reason}{writing})"
    return StoreReadOnlyError(
        headline, store=store, file=file, reason=reason, advice=READ_ONLY_ADVICE
    )


def file_of(exc: BaseException) -> Path | None:
    """The file an OSError or a DuckDB error names, if it does."""
    if isinstance(exc, OSError) and exc.filename:
        return Path(os.fsdecode(exc.filename))
    found = _FILE.search(str(exc))
    return Path(found["file"]) if found else None


def roll_back(conn: duckdb.DuckDBPyConnection) -> None:
    """Roll back the open transaction, if there still is one: a COMMIT the disk refused, or a
    database DuckDB invalidated, has none left, and the error to raise is the one before."""
    with contextlib.suppress(duckdb.Error):
        conn.execute("ROLLBACK")
