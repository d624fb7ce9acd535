"""The spool: each recording process's own append-only journal, in a folder beside the store.

A run is durable the moment its line is in the journal: a start marker when it starts, all of
its rows when it finishes (one line, written with one `write`, so a torn last line from a
`kill -9` is simply ignored). Rows reach DuckDB later, in batches, whenever this process gets
the store's write lock; until then, and after a crash, the journal is the truth.

A journal is owned by its process through an exclusive `flock`, which the kernel releases
when the process dies, however it dies. So any process that can lock a journal knows its
owner is gone and may ingest it: finished runs are stored, runs that only started are stored
as `incomplete`, and the file is deleted. Ingesting twice is harmless: a run already stored
is skipped by id. (On platforms without `fcntl`, foreign journals are never recovered.)
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from agentbench.trace.schema import TIMESTAMP_COLUMNS, RunRows

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger("agentbench.trace")

SUFFIX = ".journal"
_TEMP_PREFIX = ".tmp-"


def spool_dir(db_path: Path) -> Path:
    return db_path.with_name(db_path.name + ".spool")


def _try_lock(fd: int) -> bool:
    if fcntl is None:  # pragma: no cover - Windows
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


class Journal:
    """This process's journal: created on first use, locked for the process's lifetime."""

    def __init__(self, directory: Path, *, fsync: bool = False) -> None:
        self.directory = directory
        self.fsync = fsync
        self.path: Path | None = None
        self._fd: int | None = None
        self.size = 0

    def append(self, record: dict[str, Any]) -> None:
        if self._fd is None:
            self._fd, self.path = self._create()
        line = orjson.dumps(record) + b"\n"
        _write_all(self._fd, line)
        if self.fsync:
            os.fsync(self._fd)
        self.size += len(line)

    def rotate(self, keep: list[dict[str, Any]]) -> None:
        """Start a new segment holding only `keep` (open runs' markers); drop the old one."""
        old_fd, old_path = self._fd, self.path
        self._fd, self.path, self.size = None, None, 0
        for record in keep:
            self.append(record)
        if old_fd is not None and old_path is not None:
            old_path.unlink(missing_ok=True)
            os.close(old_fd)

    def close(self, *, delete: bool) -> None:
        if self._fd is None:
            return
        if delete and self.path is not None:
            self.path.unlink(missing_ok=True)
        os.close(self._fd)
        self._fd = None

    def _create(self) -> tuple[int, Path]:
        self.directory.mkdir(parents=True, exist_ok=True)
        name = f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}"
        temp = self.directory / f"{_TEMP_PREFIX}{name}"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
        _try_lock(fd)
        # Only a locked file gets its final name, so no one can take it for a dead one.
        final = self.directory / f"{name}{SUFFIX}"
        os.rename(temp, final)
        return fd, final


@dataclass
class Recovered:
    """A dead process's journal, locked by us until `discard` (after its rows are stored)."""

    path: Path
    fd: int
    rows: RunRows
    finished: int
    incomplete: int

    def discard(self) -> None:
        self.path.unlink(missing_ok=True)
        os.close(self.fd)

    def release(self) -> None:
        os.close(self.fd)


def has_dead(directory: Path, own: set[Path]) -> bool:
    """Is there a journal whose process is gone? (Cheap: a lock attempt per file.)"""
    for path in _journals(directory, own):
        fd = _open(path)
        if fd is None:
            continue
        try:
            if _try_lock(fd) and os.fstat(fd).st_nlink > 0:
                return True
        finally:
            os.close(fd)
    return False


def recover(directory: Path, own: set[Path]) -> list[Recovered]:
    """Lock and read every journal whose owner is gone."""
    found = []
    for path in _journals(directory, own):
        fd = _open(path)
        if fd is None:
            continue
        if not _try_lock(fd) or os.fstat(fd).st_nlink == 0:
            os.close(fd)  # alive, or already ingested and removed by someone else
            continue
        with open(os.dup(fd), "rb") as handle:
            data = handle.read()
        found.append(_parse(path, fd, data))
    _remove_dead_temps(directory)
    return found


def _journals(directory: Path, own: set[Path]) -> list[Path]:
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return []
    return sorted(
        Path(e.path) for e in entries if e.name.endswith(SUFFIX) and Path(e.path) not in own
    )


def _open(path: Path) -> int | None:
    try:
        return os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None


def _remove_dead_temps(directory: Path) -> None:
    """A process killed between creating and naming its journal leaves an empty temp file."""
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return  # no process ever journaled here (a store copied or imported whole)
    for entry in entries:
        if entry.name.startswith(_TEMP_PREFIX):
            fd = _open(Path(entry.path))
            if fd is not None:
                if _try_lock(fd):
                    Path(entry.path).unlink(missing_ok=True)
                os.close(fd)


def _parse(path: Path, fd: int, data: bytes) -> Recovered:
    lines = data.split(b"\n")
    if lines and lines[-1]:
        log.info("%s: ignoring a torn last line (%d bytes)", path, len(lines[-1]))
    started: dict[str, dict[str, Any]] = {}
    rows = RunRows()
    finished: set[str] = set()
    for number, line in enumerate(lines[:-1], start=1):
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            log.warning("%s line %d is not valid JSON; skipped", path, number)
            continue
        if "start" in record:
            started[record["start"]["run_id"]] = _decode("runs", [record["start"]])[0]
        elif "run" in record:
            part = RunRows.from_dict(
                {name: _decode(name, table) for name, table in record["run"].items()}
            )
            finished.update(row["run_id"] for row in part.runs)
            rows.extend(part)
    incomplete = [row for run_id, row in started.items() if run_id not in finished]
    rows.runs.extend(incomplete)
    return Recovered(path, fd, rows, finished=len(finished), incomplete=len(incomplete))


def _decode(table: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Journal rows back to Python values: timestamps were written as ISO 8601 text."""
    for row in rows:
        for column in TIMESTAMP_COLUMNS[table]:
            value = row.get(column)
            if isinstance(value, str):
                row[column] = datetime.fromisoformat(value)
    return rows
