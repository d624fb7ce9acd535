"""Another process holding a store's DuckDB lock, for tests of what waits for it."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

TIMEOUT_S = 60
_HOLD_LOCK = (
    "import duckdb, sys\n"
    "conn = duckdb.connect(sys.argv[1])\n"
    "print('locked', flush=True)\n"
    "sys.stdin.readline()\n"
    "conn.close()\n"
)


class LockHolder:
    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process

    def release(self) -> None:
        """Let go of the lock (the process closes its connection and exits)."""
        assert self.process.stdin is not None
        if not self.process.stdin.closed:
            self.process.stdin.write("go\n")
            self.process.stdin.close()
        self.process.wait(timeout=TIMEOUT_S)


@contextlib.contextmanager
def lock_held(db: Path) -> Iterator[LockHolder]:
    """A process that holds `db`'s write lock until `release()` or the block's end."""
    process = subprocess.Popen(
        [sys.executable, "-c", _HOLD_LOCK, str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    holder = LockHolder(process)
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "locked"
        yield holder
        holder.release()
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=TIMEOUT_S)
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                stream.close()
