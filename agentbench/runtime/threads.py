"""Where sync tools run: reused daemon threads that a hung tool can never starve.

Python cannot kill a thread, so a sync tool that hangs past its timeout keeps its thread.
A fixed pool would eventually be all hung tools; a fresh thread per call costs the better
part of a millisecond. So threads are reused while they are idle, a new one is started
whenever none is idle, hung ones are simply left behind, and all are daemons, so a hung tool
never keeps the process alive. Idle threads exit after a while.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any

_IDLE_EXIT_S = 30.0


class DaemonThreads:
    def __init__(self) -> None:
        self._work: queue.SimpleQueue[tuple[Callable[[], None]]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0

    def submit(self, job: Callable[[], None]) -> None:
        with self._lock:
            start = self._idle == 0
            if not start:
                self._idle -= 1  # reserved for this job
        self._work.put((job,))
        if start:
            threading.Thread(
                target=self._worker, args=(True,), name="agentbench-tool", daemon=True
            ).start()

    def _worker(self, reserved: bool) -> None:
        while True:
            if not reserved:
                try:
                    (job,) = self._work.get(timeout=_IDLE_EXIT_S)
                except queue.Empty:
                    with self._lock:
                        if self._idle > 0 and self._work.empty():
                            self._idle -= 1
                            return
                    continue
            else:
                (job,) = self._work.get()
            job()
            with self._lock:
                self._idle += 1
            reserved = False


_THREADS = DaemonThreads()


async def run_in_thread(fn: Callable[[], Any], timeout_s: float | None) -> Any:
    """Run a blocking call on a daemon thread; stop waiting for it after `timeout_s`."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def job() -> None:
        try:
            value, error = fn(), None
        except BaseException as exc:
            value, error = None, exc
        # A tool that outlived its timeout may finish after the loop has closed; its result
        # has no one left to receive it.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, value, error)

    _THREADS.submit(job)
    async with asyncio.timeout(timeout_s):
        return await future
