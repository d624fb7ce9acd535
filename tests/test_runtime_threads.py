"""How tools are awaited: a sync tool's call on a daemon thread (`run_in_thread`), answered
either to the loop's short blocked wait (a fast tool) or, once the loop went back to its
other work, through a future; an async tool under its timeout, with asyncio.timeout's
accounting on one plain timer."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from agentbench.runtime.threads import run_in_thread
from agentbench.runtime.tools import ResultKind, tool


async def test_a_fast_call_returns_its_value_and_raises_its_error() -> None:
    assert await run_in_thread(lambda: 41 + 1, timeout_s=5) == 42

    def fails() -> None:
        raise KeyError("missing")

    with pytest.raises(KeyError, match="missing"):
        await run_in_thread(fails, timeout_s=5)


async def test_a_slow_call_is_answered_through_the_loop_which_keeps_running() -> None:
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0)
            ticks += 1

    def slow() -> str:
        time.sleep(0.05)
        return "late"

    def slow_failure() -> None:
        time.sleep(0.05)
        raise ValueError("no")

    ticking = asyncio.create_task(ticker())
    assert await run_in_thread(slow, timeout_s=5) == "late"
    with pytest.raises(ValueError, match="no"):
        await run_in_thread(slow_failure, timeout_s=None)
    ticking.cancel()
    assert ticks > 10, "the loop ran other work while the call was slow"


async def test_a_hung_call_times_out_after_timeout_s_even_below_the_blocked_wait() -> None:
    release = threading.Event()
    for timeout_s in (0.00001, 0.05):
        started = time.perf_counter()
        with pytest.raises(TimeoutError):
            await run_in_thread(lambda: release.wait(10), timeout_s=timeout_s)
        assert time.perf_counter() - started < 5
    release.set()


async def test_a_cancelled_wait_leaves_the_call_to_finish_unobserved() -> None:
    release = threading.Event()
    done = threading.Event()

    def waits() -> str:
        release.wait(10)
        done.set()
        return "unseen"

    waiting = asyncio.create_task(run_in_thread(waits, timeout_s=None))
    await asyncio.sleep(0.01)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    release.set()
    assert done.wait(5)
    await asyncio.sleep(0.01)  # its report reaches a cancelled future: nothing happens
    assert await run_in_thread(lambda: "next", timeout_s=5) == "next"


async def test_an_async_tools_own_timeout_error_is_its_failure_not_our_timeout() -> None:
    @tool(timeout_s=5)
    async def times_out_itself() -> str:
        raise TimeoutError("upstream took too long")

    result = await times_out_itself.invoke({})
    assert result.kind is ResultKind.SYSTEM_ERROR
    assert result.error == "TimeoutError: upstream took too long"


async def test_a_cancellation_from_elsewhere_stays_a_cancellation() -> None:
    started = asyncio.Event()

    @tool(timeout_s=5)
    async def waits() -> str:
        started.set()
        await asyncio.sleep(10)
        return "late"

    call = asyncio.create_task(waits.invoke({}))
    await started.wait()
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert call.cancelling() == 1


async def test_an_async_tool_past_its_timeout_leaves_the_task_uncancelled() -> None:
    @tool(timeout_s=0.01)
    async def slow() -> str:
        await asyncio.sleep(10)
        return "late"

    @tool(timeout_s=0.01)
    async def swallows() -> str:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            return "kept going"
        return "late"

    result = await slow.invoke({})
    assert result.error == "tool 'slow' timed out after 0.01 s"
    kept_going = await swallows.invoke({})
    assert kept_going.kind is ResultKind.OK and kept_going.data == "kept going"
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0
    await asyncio.sleep(0)  # no cancellation is left pending on this task


async def test_an_idle_thread_is_reused_and_a_hung_one_is_left_behind() -> None:
    first = await run_in_thread(threading.get_ident, timeout_s=5)
    assert await run_in_thread(threading.get_ident, timeout_s=5) == first
    release = threading.Event()
    hung_on: list[int] = []

    def hangs() -> None:
        hung_on.append(threading.get_ident())
        release.wait(10)

    with pytest.raises(TimeoutError):
        await run_in_thread(hangs, timeout_s=0.01)
    # The hung call still holds its thread: the next call gets another one.
    assert await run_in_thread(threading.get_ident, timeout_s=5) != hung_on[0]
    release.set()


async def test_idle_threads_exit_and_a_call_after_that_starts_a_new_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agentbench.runtime import threads

    monkeypatch.setattr(threads, "_IDLE_EXIT_S", 0.01)
    # A call that starts its own thread (none idle), which then waits the short idle time.
    monkeypatch.setattr(threads, "_idle", [])
    started = await run_in_thread(threading.get_ident, timeout_s=5)

    def running() -> bool:
        return any(t.ident == started for t in threading.enumerate())

    for _ in range(500):
        if not threads._idle and not running():
            break
        await asyncio.sleep(0.01)
    assert not threads._idle, "the idle thread left the idle list when its wait ran out"
    assert not running(), "and ended"
    assert await run_in_thread(lambda: "again", timeout_s=5) == "again"


async def test_the_loop_waits_blocked_long_only_while_calls_are_quick(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agentbench.runtime import threads

    waits: list[float] = []

    class Waits:
        """A call's `done` lock, recording how long the loop waits on it."""

        def __init__(self, lock: threading.Lock) -> None:
            self._lock = lock

        def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
            waits.append(timeout)
            return self._lock.acquire(blocking, timeout)

        def release(self) -> None:
            self._lock.release()

    class RecordedCall(threads._Call):
        __slots__ = ()

        def __init__(self, fn: Any, deadline: float | None) -> None:
            super().__init__(fn, deadline)
            self.done = Waits(self.done)  # type: ignore[assignment]

    monkeypatch.setattr(threads, "_Call", RecordedCall)
    monkeypatch.setattr(threads, "_QUICK_S", 0.005)  # "quick" even on a busy machine
    await run_in_thread(lambda: None, timeout_s=5)
    await run_in_thread(lambda: time.sleep(0.05), timeout_s=5)
    await run_in_thread(lambda: None, timeout_s=5)  # after a slow call: a short wait
    await run_in_thread(lambda: None, timeout_s=5)  # quick again: the long wait
    assert waits[1:] == [
        threads._BLOCKED_WAIT_S,
        threads._BLOCKED_WAIT_AFTER_SLOW_S,
        threads._BLOCKED_WAIT_S,
    ]
