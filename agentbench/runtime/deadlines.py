"""Deadlines judged by when a result arrived, never by when a busy event loop got round to it.

An event loop that was held up (another run's CPU work, a blocking call, a process the OS did
not schedule) runs its due timers late, in the same pass as everything that became ready
meanwhile. A plain timer then races the result: the timer's callback may run first and cancel
a call whose answer was already there, or run after it and let through an answer that came
after the deadline. So a deadline here is decided on arrival:

* a call on another thread stamps the moment its outcome is published (`threads`), and that
  stamp is compared with the deadline, whatever the loop was doing at the time;
* for an await on the loop, the deadline's callback does not cancel at once: it first lets the
  loop make `CATCH_UP_PASSES` passes (each polls for I/O without blocking and runs what is
  ready), so an answer the loop finds on hand when it gets round to the deadline — a wake-up
  already queued, a thread's answer, a response already on its socket though reading it takes
  the openai SDK a few hops — is finished, and only an await still waiting is cancelled. On a
  loop that was not held up the passes take microseconds;
* a call's own work is timed too: an await whose last step began before the deadline and ended
  after it (a coroutine that blocks the loop itself, say) is late however it was woken
  (`within`), as is a coroutine that never suspended and ran past its deadline (`tools`).

What the loop cannot tell is when something it finds ready after being held up arrived (a
response on its socket, a timer that fell due while it was held): such an answer counts as
arrived in time. A thread's answer carries its own time, so a tool on a thread is exact.

`DeadlineExceeded` is the TimeoutError these deadlines raise, so a caller can tell its own
deadline from a TimeoutError the awaited code raised for reasons of its own.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import time
from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

T = TypeVar("T")

# For callbacks that only settle a future or cancel a task: they need no copy of the caller's
# context variables, which `call_soon`/`call_at` would otherwise make.
NO_CONTEXT = contextvars.Context()
# Passes a deadline lets the loop make before it acts. The openai SDK finishes a response already
# on its socket in 3-5 passes, a short stream in 6 (measured after a held loop); one of many
# reads takes a pass more for each, so this leaves room for a few megabytes.
CATCH_UP_PASSES = 64


class DeadlineExceeded(TimeoutError):  # noqa: N818 - a TimeoutError, named for what happened
    """The deadline passed before the result arrived."""


def call_after_pending(
    loop: asyncio.AbstractEventLoop, when: float, callback: Callable[[], Any]
) -> asyncio.TimerHandle:
    """Run `callback` at loop time `when`, after `CATCH_UP_PASSES` passes of the loop (see the
    module docstring). Cancelling the returned handle before it fires stops it; once it has
    fired, `callback` must see for itself that it is too late."""
    return loop.call_at(when, _after_passes, loop, CATCH_UP_PASSES, callback, context=NO_CONTEXT)


def _after_passes(
    loop: asyncio.AbstractEventLoop, passes: int, callback: Callable[[], Any]
) -> None:
    if passes <= 0:
        callback()
        return
    loop.call_soon(_after_passes, loop, passes - 1, callback, context=NO_CONTEXT)


class _Clocked:
    """`await call`, noting when its last resumption by the loop began (`last_step`,
    time.monotonic()): that step produced the answer. What `yield from` would do otherwise, as
    `eager.resume` does."""

    __slots__ = ("call", "last_step")

    def __init__(self, call: Awaitable[Any]) -> None:
        self.call = call
        self.last_step = time.monotonic()

    def __await__(self) -> Generator[Any, Any, Any]:
        # A generator-based coroutine (`types.coroutine`, such as `eager.resume`) is its own
        # iterator; anything else awaitable gives one.
        steps: Any = self.call if inspect.isgenerator(self.call) else self.call.__await__()
        sent: Any = None
        thrown: BaseException | None = None
        while True:
            self.last_step = time.monotonic()
            try:
                yielded = steps.throw(thrown) if thrown is not None else steps.send(sent)
            except StopIteration as finished:
                return finished.value
            try:
                sent, thrown = (yield yielded), None
            except GeneratorExit:
                steps.close()
                raise
            except BaseException as exc:  # a cancellation, passed on into the call
                sent, thrown = None, exc


async def within(
    call: Awaitable[T],
    deadline: float,
    *,
    task: asyncio.Task[Any] | None = None,
    cancelling: int | None = None,
) -> T:
    """`await call`, cancelled at loop time `deadline` unless its result arrived by then;
    raises DeadlineExceeded then, or when the call's own last step ran past the deadline.
    The accounting of `asyncio.timeout`: only a cancellation that was the deadline's becomes
    DeadlineExceeded, one from elsewhere stays a cancellation. `task` and `cancelling` may be
    given by a caller that read them already."""
    task = task or asyncio.current_task()
    if task is None:
        raise RuntimeError("Timeout should be used inside a task")  # asyncio.timeout's words
    if cancelling is None:
        cancelling = task.cancelling()
    loop = asyncio.get_running_loop()
    # On time.monotonic(), for the steps' own time: uvloop's loop.time() stands still in a step.
    until = time.monotonic() + (deadline - loop.time())
    expired = False
    settled = False

    def expire() -> None:
        nonlocal expired
        if not settled:
            expired = True
            task.cancel()

    clocked = _Clocked(call)
    timer = call_after_pending(loop, deadline, expire)
    try:
        value = await clocked
    except asyncio.CancelledError:
        if expired:
            expired = False
            if task.uncancel() <= cancelling:
                raise DeadlineExceeded from None
        raise
    finally:
        settled = True
        timer.cancel()
        if expired:  # cancelled by the deadline, but the call ended some other way
            task.uncancel()
    if clocked.last_step <= until < time.monotonic():
        raise DeadlineExceeded  # its own last step crossed the deadline: late by its own doing
    return value
