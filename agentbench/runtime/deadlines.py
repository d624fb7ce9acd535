"""Deadlines judged by when a result arrived, never by when a busy event loop got round to it.

An event loop that was held up (another run's CPU work, a blocking call, a process the OS did
not schedule) runs its due timers late, in the same pass as everything that became ready
meanwhile. A plain timer then races the result: the timer's callback may run first and cancel
a call whose answer was already there, or run after it and let through an answer that came
after the deadline. So a deadline here is decided on arrival:

* a call on another thread stamps the moment its outcome is published (`threads`), and that
  stamp is compared with the deadline, whatever the loop was doing at the time;
* for an await on the loop, "arrived" means the loop was handed the result: a wake-up queued
  before the deadline's callback ran. The deadline's callback therefore does not cancel at
  once: it queues the cancellation behind everything already queued (`call_after_pending`),
  so a wake-up that was due in time runs first, and the cancellation finds the call finished.
  A call that still has to wait for something after the deadline is cancelled.

`DeadlineExceeded` is the TimeoutError these deadlines raise, so a caller can tell its own
deadline from a TimeoutError the awaited code raised for reasons of its own.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

# For callbacks that only settle a future or cancel a task: they need no copy of the caller's
# context variables, which `call_soon`/`call_at` would otherwise make.
NO_CONTEXT = contextvars.Context()


class DeadlineExceeded(TimeoutError):  # noqa: N818 - a TimeoutError, named for what happened
    """The deadline passed before the result arrived."""


def call_after_pending(
    loop: asyncio.AbstractEventLoop, when: float, callback: Callable[[], Any]
) -> asyncio.TimerHandle:
    """Run `callback` at loop time `when`, after every callback the loop had already queued
    when it got there (see the module docstring). Cancelling the returned handle before it
    fires stops it; once it has fired, `callback` must see for itself that it is too late."""
    queue = functools.partial(loop.call_soon, callback, context=NO_CONTEXT)
    return loop.call_at(when, queue, context=NO_CONTEXT)


async def within(
    call: Awaitable[T],
    deadline: float,
    *,
    task: asyncio.Task[Any] | None = None,
    cancelling: int | None = None,
) -> T:
    """`await call`, cancelled at loop time `deadline` unless its result arrived by then;
    raises DeadlineExceeded then. The accounting of `asyncio.timeout`: only a cancellation
    that was the deadline's becomes DeadlineExceeded, one from elsewhere stays a
    cancellation. `task` and `cancelling` may be given by a caller that read them already."""
    task = task or asyncio.current_task()
    if task is None:
        raise RuntimeError("Timeout should be used inside a task")  # asyncio.timeout's words
    if cancelling is None:
        cancelling = task.cancelling()
    expired = False
    settled = False

    def expire() -> None:
        nonlocal expired
        if not settled:
            expired = True
            task.cancel()

    timer = call_after_pending(asyncio.get_running_loop(), deadline, expire)
    try:
        return await call
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
