"""Worker processes that hold a DuckDB file for `sql_query`, and kill them when they overstay.

A pool per database: a call takes an idle worker (or starts one, up to `max_workers`), sends
one request line, and waits for the reply line. Only the query is charged to the query:
waiting for a free worker and starting one (python and duckdb imported, seconds on a loaded
machine) never count against its limit; each has a bound of its own. The worker judges the
query by the CPU time it used (`_sql_worker`); what this side watches is the wall clock, as
a backstop for a hang: a worker that has not answered `hang_after_s` (plus a grace) after the
query reached it is killed, not waited for, and the next call starts a fresh one. A worker
that dies mid-query (the kernel's OOM killer, RLIMIT_CPU's SIGXCPU, a crash in the engine,
the address-space limit) is reported with how it died. Workers leave with the pool, with the
interpreter, or — watched from inside — with the process that started them.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path
from typing import IO, Any

import agentbench.runtime.builtin._sql_worker as _worker_module

_WORKER = Path(_worker_module.__file__)
# Starting a worker imports python and duckdb: a fraction of a second here, many seconds on a
# starved machine. Only a worker that never says it is ready is given up on.
START_TIMEOUT_S = 300.0
KILL_GRACE_S = 1.0  # past the wall-clock backstop, how long the worker's own stop may take
_MAX_IDLE = 2


class WorkerDiedError(Exception):
    """The worker process ended without answering; the message says how."""

    def __init__(self, how: str, signal_number: int | None = None) -> None:
        super().__init__(how)
        self.signal_number = signal_number  # the signal that ended it, if one did


class WorkerStartError(Exception):
    """No worker could be started (it died or never said it was ready)."""


class WorkerOverstayedError(Exception):
    """The worker did not answer by the deadline and was killed."""


class WorkerBusyError(Exception):
    """Every worker stayed busy for as long as the caller would wait."""


class _Worker:
    def __init__(self, settings: dict[str, Any]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-I", os.fspath(_WORKER), json.dumps(settings)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            # A Ctrl-C is the command's to handle: a worker it killed first would fail the
            # query in hand, and that trial could be stored failed before the command stops.
            start_new_session=True,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self._in: IO[bytes] = self.process.stdin
        self._out: IO[bytes] = self.process.stdout
        self._pending = b""  # read past the end of the last reply line

    def read_reply(self, deadline: float) -> dict[str, Any]:
        """The next reply line, or WorkerOverstayedError/WorkerDiedError."""
        fd = self._out.fileno()
        while b"\n" not in self._pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill()
                raise WorkerOverstayedError()
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise self._died()
            self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        return json.loads(line)

    def send(self, request: dict[str, Any]) -> None:
        try:
            self._in.write(json.dumps(request).encode() + b"\n")
            self._in.flush()
        except (BrokenPipeError, OSError):
            raise self._died() from None

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for stream in (self._in, self._out):
            with contextlib.suppress(OSError):
                stream.close()

    def _died(self) -> WorkerDiedError:
        """How the worker ended, once its output closed."""
        try:
            code = self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.process.returncode
        self.kill()
        if code is not None and code < 0:
            name = signal.Signals(-code).name
            if -code == signal.SIGKILL:
                return WorkerDiedError(f"killed by {name} (most likely out of memory)", -code)
            return WorkerDiedError(f"killed by {name}", -code)
        return WorkerDiedError(f"exited with code {code}")


class WorkerPool:
    """Worker processes for one DuckDB file; safe to call from any thread."""

    def __init__(
        self, path: str, config: dict[str, Any], *, address_space_bytes: int, max_workers: int
    ) -> None:
        self.path = path
        self._settings = {
            "path": path,
            "config": config,
            "address_space_bytes": address_space_bytes,
            "parent": os.getpid(),
        }
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(max_workers)
        self._finalizer = weakref.finalize(self, _kill_all, self._idle)

    def start(self) -> None:
        """Start one worker now and report whether the database opens (UsageError-worthy)."""
        self._give_back(self._start_worker())

    def query(self, request: dict[str, Any], hang_after_s: float) -> dict[str, Any]:
        """The worker's reply to `request`. `hang_after_s` bounds, on the wall clock, the wait
        for a free worker and the query once a worker has it; starting a worker has a bound
        of its own (START_TIMEOUT_S), so none of it eats into the other."""
        if not self._slots.acquire(timeout=max(hang_after_s, 0.0)):
            raise WorkerBusyError()
        try:
            worker = self._take()
            try:
                self._hand_over(worker, request, hang_after_s)
            except WorkerDiedError:
                # An idle worker that died before the query reached it (killed from outside,
                # between its last query and this one) never ran it: one fresh worker may.
                worker = self._start_worker()
                self._hand_over(worker, request, hang_after_s)
            # From here the worker has the query: its clock, and this backstop, start now.
            reply = worker.read_reply(time.monotonic() + hang_after_s + KILL_GRACE_S)
            self._give_back(worker)
            return reply
        finally:
            self._slots.release()

    @staticmethod
    def _hand_over(worker: _Worker, request: dict[str, Any], hang_after_s: float) -> None:
        worker.send(request)
        worker.read_reply(time.monotonic() + hang_after_s)  # {"received": true}

    def close(self) -> None:
        self._finalizer()

    def _take(self) -> _Worker:
        with self._lock:
            while self._idle:
                worker = self._idle.pop()
                if worker.alive():
                    return worker
                worker.kill()
        return self._start_worker()

    def _start_worker(self) -> _Worker:
        if self._settings["parent"] != os.getpid():  # a forked copy of the pool
            self._settings["parent"] = os.getpid()
            self._idle.clear()
        worker = _Worker(self._settings)
        try:
            reply = worker.read_reply(time.monotonic() + START_TIMEOUT_S)
        except WorkerOverstayedError:
            raise WorkerStartError(f"it did not start within {START_TIMEOUT_S:g} s") from None
        except WorkerDiedError as exc:
            raise WorkerStartError(f"it ended while starting ({exc})") from None
        if "open_error" in reply:
            worker.kill()
            error = reply["open_error"]
            raise DatabaseOpenError(f"{error['type']}: {error['message']}")
        return worker

    def _give_back(self, worker: _Worker) -> None:
        with self._lock:
            if len(self._idle) < _MAX_IDLE and worker.alive():
                self._idle.append(worker)
                return
        worker.kill()


class DatabaseOpenError(Exception):
    """DuckDB would not open the database in the worker."""


def _kill_all(workers: list[_Worker]) -> None:
    while workers:
        workers.pop().kill()
