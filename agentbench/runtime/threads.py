"""Where sync tools run: reused daemon threads that a hung tool can never starve.

Python cannot kill a thread, so a sync tool that hangs past its timeout keeps its thread.
A fixed pool would eventually be all hung tools; a fresh thread per call costs the better
part of a millisecond. So threads are reused while they are idle, a new one is started
whenever none is idle, hung ones are simply left behind, and all are daemons, so a hung tool
never keeps the process alive. Idle threads exit after a while. The event loop first waits a
tenth of a millisecond, blocked, for the answer (most sync tools return in microseconds, and
this skips a trip through the loop), then goes back to its other work until the thread wakes
it or the timeout passes.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import queue
import threading
from collections.abc import Callable
from typing import Any

_IDLE_EXIT_S = 30.0


class DaemonThreads:
    def __init__(self) -> None:
        self._work: queue.SimpleQueue[tuple[Callable[[], Callable[[], None]]]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0

    def submit(self, job: Callable[[], Callable[[], None]]) -> None:
        """Run `job` on an idle thread (a new one if none is); then what it returns."""
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
            report = job()
            # Idle before the caller is woken: it then finds the GIL free sooner.
            with self._lock:
                self._idle += 1
            report()
            reserved = False


_THREADS = DaemonThreads()


# For callbacks that only settle a future or cancel a task: they need no copy of the caller's
# context variables, which `call_soon`/`call_at` would otherwise make.
NO_CONTEXT = contextvars.Context()
# How long the event loop waits, blocked, for a sync tool before going back to its other
# work and letting the tool's thread wake it. Most sync tools return in microseconds, and an
# answer given to a blocked wait skips the trip through the loop (its self-pipe, two more
# iterations): a third of the hop's cost. A slower tool costs the loop this long once.
_BLOCKED_WAIT_S = 0.0001

Outcome = tuple[Any, BaseException | None]  # the call's value, or what it raised


async def run_in_thread(fn: Callable[[], Any], timeout_s: float | None) -> Any:
    """Run a blocking call on a daemon thread; stop waiting for it after `timeout_s`
    (raising TimeoutError, as `asyncio.timeout` would: one timer, no task cancelled)."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    finished = threading.Lock()
    finished.acquire()
    hand_over = threading.Lock()  # between the thread's outcome and the loop giving up waiting
    outcome: list[Outcome] = []
    parked: list[asyncio.Future[Any]] = []  # the future the loop awaits, once it stopped waiting

    def job() -> Callable[[], None]:
        try:
            value, error = fn(), None
        except BaseException as exc:
            value, error = None, exc
        with hand_over:
            outcome.append((value, error))
            future = parked[0] if parked else None
        finished.release()

        def report() -> None:
            # A tool that outlived its timeout may finish after the loop has closed; its
            # result has no one left to receive it.
            if future is not None:
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(_settle, future, (value, error), context=NO_CONTEXT)

        return report

    _THREADS.submit(job)
    blocked = _BLOCKED_WAIT_S if timeout_s is None else min(_BLOCKED_WAIT_S, timeout_s)
    if finished.acquire(timeout=blocked):
        return _unpacked(outcome[0])
    future: asyncio.Future[Any] = loop.create_future()
    with hand_over:
        if outcome:  # it finished just as the wait ended
            return _unpacked(outcome[0])
        parked.append(future)
    if timeout_s is None:
        return await future
    timer = loop.call_at(
        started + timeout_s, _settle, future, (None, TimeoutError()), context=NO_CONTEXT
    )
    try:
        return await future
    finally:
        timer.cancel()


def _settle(future: asyncio.Future[Any], outcome: Outcome) -> None:
    if future.done():  # timed out, or the waiting task was cancelled
        return
    value, error = outcome
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)


def _unpacked(outcome: Outcome) -> Any:
    value, error = outcome
    if error is not None:
        raise error
    return value
