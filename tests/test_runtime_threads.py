"""How tools are awaited: a sync tool's call on a daemon thread (`run_in_thread`), answered
either to the loop's short blocked wait (a fast tool) or, once the loop went back to its
other work, through a future; an async tool under its timeout, with asyncio.timeout's
accounting on one plain timer."""

from __future__ import annotations

import asyncio
import threading
import time

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
