"""Three-state tool results, timeouts for sync and async tools, truncation."""

from __future__ import annotations

import asyncio
import threading
import time

from agentbench import BusinessFailure, ResultKind, ToolResult, tool


async def test_ok_result_carries_data_and_duration() -> None:
    @tool
    def add(a: int, b: int) -> int:
        return a + b

    result = await add.invoke({"a": 2, "b": "3"})
    assert result.kind is ResultKind.OK
    assert result.data == 5
    assert result.duration_ms >= 0
    assert result.observation() == "5"


async def test_business_failure_is_not_a_system_error() -> None:
    @tool
    def refund(order_id: str) -> str:
        raise BusinessFailure(f"order {order_id} is older than 30 days", data={"age_days": 45})

    result = await refund.invoke({"order_id": "A1"})
    assert result.kind is ResultKind.BUSINESS_FAILURE
    assert result.error == "order A1 is older than 30 days"
    assert "[business_failure]" in result.observation()
    assert "Retrying the same call will not change it" in result.observation()
    assert '"age_days":45' in result.observation()


async def test_returned_failure_result_is_respected() -> None:
    @tool
    def check(x: int) -> ToolResult:
        return ToolResult.business_failure("no such account")

    assert (await check.invoke({"x": 1})).kind is ResultKind.BUSINESS_FAILURE


async def test_exception_is_a_system_error() -> None:
    @tool
    def broken() -> None:
        raise KeyError("missing")

    result = await broken.invoke({})
    assert result.kind is ResultKind.SYSTEM_ERROR
    assert result.error == "KeyError: 'missing'"
    assert result.observation().startswith("[system_error]")


async def test_sync_tool_timeout_is_enforced_without_blocking_the_loop() -> None:
    release = threading.Event()

    @tool(timeout_s=0.2)
    def hangs() -> str:
        release.wait(10)
        return "late"

    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticking = asyncio.create_task(ticker())
    result = await hangs.invoke({})
    ticking.cancel()
    release.set()
    assert result.kind is ResultKind.SYSTEM_ERROR
    assert result.error == "tool 'hangs' timed out after 0.2 s"
    assert ticks > 3, "the event loop kept running while the sync tool hung"


async def test_async_tool_timeout_is_enforced() -> None:
    finished = False

    @tool(timeout_s=0.1)
    async def slow() -> str:
        nonlocal finished
        await asyncio.sleep(5)
        finished = True
        return "late"

    result = await slow.invoke({})
    assert result.kind is ResultKind.SYSTEM_ERROR
    assert "timed out after 0.1 s" in result.error
    assert not finished


async def test_long_results_are_truncated_with_a_visible_marker() -> None:
    @tool(max_result_chars=100)
    def dump() -> str:
        return "x" * 1000

    @tool(max_result_chars=50)
    def rows() -> list[dict[str, int]]:
        return [{"row": i} for i in range(100)]

    text = await dump.invoke({})
    assert text.truncated
    assert text.data.startswith("x" * 100)
    assert text.data.endswith("…[truncated 900 of 1,000 chars]")
    structured = await rows.invoke({})
    assert structured.truncated and "…[truncated" in structured.data


async def test_short_results_are_untouched() -> None:
    @tool
    def small() -> dict[str, int]:
        return {"a": 1}

    result = await small.invoke({})
    assert result.data == {"a": 1} and not result.truncated


async def test_invalid_arguments_do_not_call_the_tool() -> None:
    calls = []

    @tool
    def f(n: int) -> int:
        calls.append(n)
        return n

    result = await f.invoke({"n": "not a number"})
    assert result.kind is ResultKind.SYSTEM_ERROR
    assert "invalid arguments for 'f'" in result.error
    assert calls == []


async def test_sync_tools_run_in_separate_threads() -> None:
    threads = set()

    @tool(effect="read_only")
    def which() -> str:
        threads.add(threading.get_ident())
        time.sleep(0.01)
        return "ok"

    await asyncio.gather(which.invoke({}), which.invoke({}))
    assert threading.get_ident() not in threads
