"""The spool: each recording process's own append-only journal, in a folder beside the store.

A run is durable the moment its line is in the journal: a start marker when it starts, all of
its rows when it finishes (one line, written with one `write`, so a torn last line from a
`kill -9` is simply ignored). A long run also writes `part` lines of rows it has finished as it
goes, so the process holds where they are rather than the rows; they count once its finishing
line is there, and the journal is not rotated while an open run has parts in it. Rows reach
DuckDB later, in batches, whenever this process gets the store's write lock; until then, and
after a crash, the journal is the truth.

A journal is owned by its process through an exclusive `flock`, which the kernel releases
when the process dies, however it dies. So any process that can lock a journal knows its
owner is gone and may ingest it: finished runs are stored, runs that only started are stored
as `incomplete`, and the file is deleted. Ingesting twice is harmless: a run already stored
is skipped by id. (On platforms without `fcntl`, foreign journals are never recovered.)

Each dead journal is recovered on its own: one that cannot be read (another user's, a folder
or a fifo under a journal's name) or has lines that do not parse (see `journal.parsing`) goes
to the quarantine (see `quarantine`) after its good lines are stored, and never stops the
others from being stored.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import secrets
import socket
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from agentbench.trace.errors import JournalError
from agentbench.trace.journal.parsing import ParsedJournal, parse_journal
from agentbench.trace.journal.quarantine import quarantine
from agentbench.trace.schema import RunRows
from agentbench.trace.storage.faults import storage_fault

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
    """This process's journal: created on first use, locked for the process's lifetime.

    A line the disk refuses (full, read-only) raises the store's `StorageFaultError`, and
    whatever part of it was written is cut off again: the journal holds whole lines only, so
    the next line written once there is room is read as it was written."""

    def __init__(self, directory: Path, *, fsync: bool = False) -> None:
        self.directory = directory
        self.store = directory.with_name(directory.name.removesuffix(".spool"))
        self.fsync = fsync
        self.path: Path | None = None
        self._fd: int | None = None
        self.size = 0

    def append(self, record: dict[str, Any]) -> tuple[int, int]:
        """Write one line (durable once this returns); where it is in this segment."""
        if self._fd is None:
            self._fd, self.path = self._create()
        line = orjson.dumps(record) + b"\n"
        try:
            _write_all(self._fd, line)
            if self.fsync:
                os.fsync(self._fd)
        except OSError as exc:
            with contextlib.suppress(OSError):  # shrinking a file needs no room
                os.ftruncate(self._fd, self.size)
            fault = storage_fault(self.store, exc, file=self.path)
            if fault is None:
                raise
            raise fault from None
        at = self.size
        self.size += len(line)
        return at, len(line)

    def read_line(self, at: int, length: int) -> bytes:
        """A line this segment holds (see `append`), read back."""
        if self._fd is None:
            raise JournalError(f"journal {self.path} is closed: its lines cannot be read back")
        data = os.pread(self._fd, length, at)
        if len(data) != length:
            raise JournalError(f"journal {self.path} is shorter than a line it was given")
        return data

    def rotate(self, keep: list[dict[str, Any]]) -> None:
        """Start a new segment holding only `keep` (open runs' markers); drop the old one.
        If the new one cannot be written, the old one stays (it holds the same markers)."""
        old_fd, old_path, old_size = self._fd, self.path, self.size
        self._fd, self.path, self.size = None, None, 0
        try:
            for record in keep:
                self.append(record)
        except BaseException:
            self.close(delete=True)
            self._fd, self.path, self.size = old_fd, old_path, old_size
            raise
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
        name = f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}"
        temp = self.directory / f"{_TEMP_PREFIX}{name}"
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(temp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
        except OSError as exc:
            fault = storage_fault(self.store, exc, file=self.directory)
            if fault is not None:
                raise fault from None
            reason = exc.strerror or str(exc)
            if isinstance(exc, FileExistsError | NotADirectoryError):
                reason = "it exists and is not a folder"
            raise JournalError(
                f"cannot keep a journal in {self.directory} ({reason}): runs are "
                "journaled there before they are stored; expected a folder this process can "
                "write (or point --db / AGENTBENCH_DB at a store in a writable place)"
            ) from None
        _try_lock(fd)
        # Only a locked file gets its final name, so no one can take it for a dead one.
        final = self.directory / f"{name}{SUFFIX}"
        os.rename(temp, final)
        return fd, final


# As much as a probe writes: a run's journal line is rarely smaller.
_PROBE_BYTES = 4096


def try_journal(directory: Path) -> None:
    """Prove that a journal can be written in `directory` now: a file made there, written and
    removed again. Raises the store's `StorageFaultError` when the disk refuses (full,
    read-only, not this user's to write), `JournalError` when the folder cannot hold
    journals at all. For a process that must know before it takes work it cannot keep."""
    store = directory.with_name(directory.name.removesuffix(".spool"))
    name = f"{_TEMP_PREFIX}probe-{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}"
    probe = directory / name
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        fault = storage_fault(store, exc, file=directory)
        if fault is not None:
            raise fault from None
        raise JournalError(
            f"cannot keep a journal in {directory} ({exc.strerror or exc}): runs are "
            "journaled there before they are stored; expected a folder this process can write"
        ) from None
    try:
        _try_lock(fd)  # held, like a journal being made: no one takes it for a dead one
        _write_all(fd, b" " * (_PROBE_BYTES - 1) + b"\n")
    except OSError as exc:
        fault = storage_fault(store, exc, file=probe)
        if fault is None:
            raise
        raise fault from None
    finally:
        os.close(fd)
        probe.unlink(missing_ok=True)


@dataclass
class Recovered:
    """A dead process's journal, locked by us until `discard` (after its rows are stored)."""

    path: Path
    fd: int
    parsed: ParsedJournal
    closed: bool = False

    @property
    def rows(self) -> RunRows:
        return self.parsed.rows

    @property
    def finished(self) -> int:
        return self.parsed.finished

    @property
    def incomplete(self) -> int:
        return self.parsed.incomplete

    def discard(self) -> None:
        """Its rows are committed: delete it, or quarantine it if some lines were bad."""
        if self.parsed.problems:
            self.quarantine(
                f"{len(self.parsed.problems)} line(s) could not be stored and are kept here "
                f"(its {self.finished} finished and {self.incomplete} incomplete run(s) on good "
                "lines were stored): " + "; ".join(self.parsed.problems[:20])
            )
            return
        self.path.unlink(missing_ok=True)
        self._close()

    def quarantine(self, why: str) -> None:
        """Set it aside with the reason (still locked, so no one else takes it meanwhile)."""
        quarantine(self.path, why, self.path.parent)
        self._close()

    def release(self) -> None:
        self._close()

    def _close(self) -> None:
        if not self.closed:
            self.closed = True
            os.close(self.fd)


@dataclass
class Recovery:
    """The dead journals taken for one batch; `more`: others were left for the next one."""

    journals: list[Recovered] = field(default_factory=list)
    more: bool = False


def has_dead(directory: Path, own: set[Path]) -> bool:
    """Is there a journal whose process is gone (or one to quarantine)? A lock try per file."""
    for path in _journals(directory, own):
        try:
            fd = _open(path)
        except OSError as exc:
            if not _maybe_alive(path, exc):
                return True
            continue
        if fd is None:
            continue
        try:
            if _try_lock(fd) and os.fstat(fd).st_nlink > 0:
                return True
        finally:
            os.close(fd)
    return False


def recover(directory: Path, own: set[Path], *, max_bytes: int | None = None) -> Recovery:
    """Lock and read journals whose owner is gone, about `max_bytes` of them at most (at
    least one); quarantine those that cannot be read at all. Never raises for a bad file."""
    recovery = Recovery()
    taken = 0
    for path in _journals(directory, own):
        if max_bytes is not None and recovery.journals and taken >= max_bytes:
            recovery.more = True
            break
        try:
            fd = _open(path)
        except OSError as exc:
            if not _maybe_alive(path, exc):
                quarantine(path, f"cannot be read: {_unreadable(path, exc)}", directory)
            continue
        if fd is None:
            continue
        if not _try_lock(fd) or os.fstat(fd).st_nlink == 0:
            os.close(fd)  # alive, or already ingested and removed by someone else
            continue
        try:
            with open(os.dup(fd), "rb") as handle:
                data = handle.read()
            parsed = parse_journal(data)
        except Exception as exc:  # one journal's trouble must not stop the others
            quarantine(path, f"cannot be read: {exc}", directory)
            os.close(fd)
            continue
        if parsed.torn_tail:
            log.info("%s: ignoring a torn last line (%d bytes)", path, parsed.torn_tail)
        recovery.journals.append(Recovered(path, fd, parsed))
        taken += len(data)
    _remove_dead_temps(directory)
    return recovery


@dataclass
class JournalState:
    """What `survey` saw of one journal: its owner's state, and its lines or why not."""

    path: Path
    alive: bool  # its process still holds it
    parsed: ParsedJournal | None = None
    error: str | None = None  # it cannot be read (then it is quarantined when recovered)


def survey(directory: Path) -> list[JournalState]:
    """Every journal in the spool, read without taking or changing anything (for doctor)."""
    states = []
    for path in _journals(directory, set()):
        try:
            fd = _open(path)
        except OSError as exc:
            alive = _maybe_alive(path, exc)
            states.append(JournalState(path, alive, error=_unreadable(path, exc)))
            continue
        if fd is None:
            continue
        try:
            alive = not _try_lock(fd)  # closing `fd` below lets go of it again
            with open(os.dup(fd), "rb") as handle:
                states.append(JournalState(path, alive, parse_journal(handle.read())))
        except Exception as exc:  # a survey reports, it never fails on a bad file
            states.append(JournalState(path, False, error=str(exc)))
        finally:
            os.close(fd)
    return states


def held_elsewhere(path: Path) -> bool:
    """Does another process hold a POSIX lock on `path` (as DuckDB does on an open store)?"""
    if fcntl is None:  # pragma: no cover - Windows
        return False
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # also drops the lock we just took
    return False


def _journals(directory: Path, own: set[Path]) -> list[Path]:
    try:
        entries = list(os.scandir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(
        Path(e.path) for e in entries if e.name.endswith(SUFFIX) and Path(e.path) not in own
    )


def _open(path: Path) -> int | None:
    """A read-only descriptor of a regular file (None if it is gone); OSError otherwise.

    Non-blocking, so a fifo under a journal's name cannot hang us."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise IsADirectoryError(errno.EISDIR, f"not a regular file ({_kind(mode)})")
    return fd


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a fifo")):
        if test(mode):
            return name
    return "a socket or device"


def _unreadable(path: Path, exc: OSError) -> str:
    reason = exc.strerror or str(exc)
    try:
        info = path.lstat()
    except OSError:
        return reason
    if stat.S_ISLNK(info.st_mode):
        return f"{reason} (a symbolic link; journals are never links)"
    return f"{reason} (owner uid {info.st_uid}, mode {stat.S_IMODE(info.st_mode):04o})"


def _maybe_alive(path: Path, exc: OSError) -> bool:
    """A journal we may not open might still be written by its owner — another user's
    running process — and then is theirs to store. Its name says which host and process."""
    if not isinstance(exc, PermissionError):
        return False  # a folder, a fifo, a link: no process writes one of those
    host, _, rest = path.name.removesuffix(SUFFIX).rpartition("-")[0].rpartition("-")
    try:
        pid = int(rest)
    except ValueError:
        return False
    if host != socket.gethostname() or pid == os.getpid():
        return False  # not on this machine (cannot tell), or ours, which we could open
    try:
        os.kill(pid, 0)
    except PermissionError:
        return True  # alive, and another user's
    except OSError:
        return False
    return True


def _remove_dead_temps(directory: Path) -> None:
    """A process killed between creating and naming its journal leaves an empty temp file."""
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return  # no process ever journaled here (a store copied or imported whole)
    for entry in entries:
        if not entry.name.startswith(_TEMP_PREFIX):
            continue
        try:
            fd = _open(Path(entry.path))
        except OSError:
            continue  # not a file of ours
        if fd is not None:
            if _try_lock(fd):
                Path(entry.path).unlink(missing_ok=True)
            os.close(fd)
