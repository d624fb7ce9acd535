"""Where sync tools run off the event loop: reused daemon threads that a hung tool can never
starve. (Tools declared `blocking=False` run on the event loop instead: see `inline`.)

Python cannot kill a thread, so a sync tool that hangs past its timeout keeps its thread.
A fixed pool would eventually be all hung tools; a fresh thread per call costs the better
part of a millisecond. So threads are reused while they are idle, a new one is started
whenever none is idle, hung ones are simply left behind, and all are daemons, so a hung tool
never keeps the process alive. Idle threads exit after a while.

A call is handed over with two lock operations: each thread waits on a lock of its own for
its next call (no shared queue, no lock to find an idle thread: the idle list's `pop` and
`append` are each atomic), and the caller waits on the call's own lock. The event loop first
waits, blocked, for the answer (most sync tools return in microseconds, and this skips a trip
through the loop; briefly only while calls are slow), then goes back to its other work until
the thread wakes it or the timeout passes.

The timeout is decided by when the call's outcome arrived, not by which of two callbacks a
late event loop happens to run first: the thread stamps the moment it publishes the outcome
(under the same lock the loop reads it with), and an outcome stamped after the deadline is a
timeout, one stamped before it is the call's answer, however late the loop looks at either
(`deadlines`).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

from agentbench.runtime.deadlines import NO_CONTEXT, DeadlineExceeded

_IDLE_EXIT_S = 30.0
# How long the event loop waits, blocked, for a sync tool before going back to its other
# work and letting the tool's thread wake it. Most sync tools return in microseconds, and an
# answer given to a blocked wait skips the trip through the loop (a future, a timer, the
# self-pipe, two more iterations): for those the wait covers the time it takes to wake the
# thread and hand it the GIL, which on a busy or virtual machine is often more than 0.1 ms.
# After a call that itself ran longer than `_QUICK_S` (a tool doing I/O), the loop waits
# only briefly, so that such tools, called by many concurrent runs, do not hold up the loop.
_BLOCKED_WAIT_S = 0.0005
_BLOCKED_WAIT_AFTER_SLOW_S = 0.0001
_QUICK_S = 0.0001
# How long the last call took on its thread (not counting the hand-over); one value for all
# tools, which is enough to tell a process calling quick tools from one calling slow ones.
_last_run_s = 0.0

# The call's value, or what it raised, and when it was published (time.monotonic(), the
# event loop's clock).
Outcome = tuple[Any, BaseException | None, float]


class _Call:
    """One call handed to a thread, and the way its outcome gets back to the caller."""

    __slots__ = ("deadline", "done", "fn", "future", "hand_over", "loop", "outcome")

    def __init__(self, fn: Callable[[], Any], deadline: float | None) -> None:
        self.fn = fn
        self.deadline = deadline  # time.monotonic() by which the outcome must be published
        self.done = threading.Lock()  # released by the thread once `outcome` is set
        self.done.acquire()
        self.outcome: Outcome | None = None
        # Set by the loop once it stopped waiting blocked, under `hand_over`, so the thread
        # either sees it (and wakes the loop) or has set `outcome` before the loop looks.
        self.future: asyncio.Future[Any] | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.hand_over: threading.Lock | None = None  # the serving thread's


class _Worker:
    """One daemon thread: it waits on `go` for the call put in `call`."""

    __slots__ = ("call", "go", "hand_over")

    def __init__(self) -> None:
        self.go = threading.Lock()
        self.go.acquire()
        self.hand_over = threading.Lock()
        self.call: _Call | None = None


# Idle threads, the most recently used last: it is the one taken next, its cache the warmest.
_idle: list[_Worker] = []


def _submit(call: _Call) -> None:
    """Run `call` on an idle thread, or on a new one if none is idle."""
    try:
        worker = _idle.pop()
    except IndexError:  # none idle: a new thread, which starts with this call
        worker = _Worker()
        call.hand_over, worker.call = worker.hand_over, call
        threading.Thread(target=_serve, args=(worker,), name="agentbench-tool", daemon=True).start()
        return
    call.hand_over, worker.call = worker.hand_over, call
    worker.go.release()


def _serve(worker: _Worker) -> None:
    global _last_run_s
    while True:
        call = worker.call
        assert call is not None
        worker.call = None
        started = time.perf_counter()
        error: BaseException | None = None
        try:
            value = call.fn()
        except BaseException as exc:
            value, error = None, exc
        _last_run_s = time.perf_counter() - started
        with worker.hand_over:
            # Stamped under the lock the loop reads `outcome` with: an outcome the loop did
            # not find when its deadline came is stamped later than that deadline.
            outcome: Outcome = (value, error, time.monotonic())
            call.outcome = outcome
            future, loop = call.future, call.loop
        # Idle before the caller is woken: it may hand this thread its next call at once.
        _idle.append(worker)
        call.done.release()
        if future is not None and loop is not None:
            # A tool that outlived its timeout may finish after the loop has closed; its
            # result has no one left to receive it.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_settle, future, call, context=NO_CONTEXT)
        if not worker.go.acquire(timeout=_IDLE_EXIT_S):
            try:
                _idle.remove(worker)
            except ValueError:  # taken for a call just as the wait ended: serve it
                worker.go.acquire()
            else:
                return


async def run_in_thread(fn: Callable[[], Any], timeout_s: float | None) -> Any:
    """Run a blocking call on a daemon thread; stop waiting for it after `timeout_s`
    (raising DeadlineExceeded, a TimeoutError: one timer, no task cancelled). An outcome
    published after the deadline is a timeout, one published before it is the call's
    answer, however late the loop gets to either."""
    loop = asyncio.get_running_loop()
    # time.monotonic(), the clock the thread stamps with (uvloop's `loop.time()` is cached
    # per iteration, and may run behind it).
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    call = _Call(fn, deadline)
    _submit(call)
    blocked = _BLOCKED_WAIT_S if _last_run_s < _QUICK_S else _BLOCKED_WAIT_AFTER_SLOW_S
    if timeout_s is not None:
        blocked = min(blocked, timeout_s)
    if call.done.acquire(timeout=blocked):
        return _unpacked(call.outcome, deadline)  # type: ignore[arg-type]
    future: asyncio.Future[Any] = loop.create_future()
    with call.hand_over:  # type: ignore[union-attr]
        if call.outcome is not None:  # it finished just as the wait ended
            return _unpacked(call.outcome, deadline)
        call.future, call.loop = future, loop
    if deadline is None:
        return await future
    timer = loop.call_later(timeout_s, _expire, future, call, context=NO_CONTEXT)
    try:
        return await future
    finally:
        timer.cancel()


def _settle(future: asyncio.Future[Any], call: _Call) -> None:
    """The thread's outcome reaches the loop (possibly long after it was published)."""
    if future.done():  # timed out, or the waiting task was cancelled
        return
    value, error, _ = call.outcome  # type: ignore[misc]
    if _late(call.outcome, call.deadline):  # type: ignore[arg-type]
        future.set_exception(DeadlineExceeded())
    elif error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)


def _expire(future: asyncio.Future[Any], call: _Call) -> None:
    """The deadline, as the loop sees it: an outcome published in time (its settling still
    queued behind this) is the answer; none yet means it will come after the deadline."""
    if future.done():
        return
    with call.hand_over:  # type: ignore[union-attr]
        outcome = call.outcome
    if outcome is not None:
        _settle(future, call)
        return
    remaining = call.deadline - time.monotonic()  # type: ignore[operator]
    if remaining > 0:  # a loop whose clock runs behind time.monotonic() fired early
        call.loop.call_later(remaining, _expire, future, call, context=NO_CONTEXT)  # type: ignore[union-attr]
        return
    future.set_exception(DeadlineExceeded())


def _late(outcome: Outcome, deadline: float | None) -> bool:
    return deadline is not None and outcome[2] > deadline


def _unpacked(outcome: Outcome, deadline: float | None) -> Any:
    value, error, _ = outcome
    if _late(outcome, deadline):
        raise DeadlineExceeded
    if error is not None:
        raise error
    return value
