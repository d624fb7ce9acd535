"""Awaits that set up their guard (a tool's timer, the run's deadline) only once the awaited
coroutine suspends: the same outcomes as guarding from the start — timeouts counted from the
call's start, a tool's own TimeoutError kept apart from ours, cancellations passed through,
values and exceptions sent back into the coroutine — and no timer left behind by a call that
never suspended."""

from __future__ import annotations

import asyncio
import time

import pytest

from agentbench import Agent, Limits, Runner, ScriptedModel, StopReason, ToolCall, tool
from agentbench.runtime.eager import first_step, resume
from agentbench.runtime.tools import ResultKind


async def test_a_coroutine_that_never_suspends_finishes_in_its_first_step() -> None:
    async def quick() -> int:
        return 7

    assert first_step(quick()) == (True, 7)


async def test_the_rest_of_a_suspended_coroutine_gets_what_the_task_sends_and_throws() -> None:
    future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    seen: list[str] = []

    async def waits() -> str:
        seen.append(await future)
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            return "cancelled, and said so"
        return "slept"

    finished, yielded = first_step(coro := waits())
    assert not finished and yielded is future

    async def rest() -> str:
        return await resume(coro, yielded)

    task = asyncio.ensure_future(rest())
    await asyncio.sleep(0)
    future.set_result("answer")
    await asyncio.sleep(0.01)
    task.cancel()
    assert await task == "cancelled, and said so"
    assert seen == ["answer"]


async def test_closing_the_rest_closes_the_coroutine() -> None:
    closed = False

    async def waits() -> None:
        nonlocal closed
        try:
            await asyncio.sleep(10)
        finally:
            closed = True

    coro = waits()
    _, yielded = first_step(coro)
    rest = resume(coro, yielded)
    rest.send(None)  # type: ignore[attr-defined]
    rest.close()  # type: ignore[attr-defined]
    assert closed


async def test_an_async_tool_that_returns_at_once_leaves_no_timer() -> None:
    @tool(timeout_s=30)
    async def quick(n: int) -> int:
        return n + 1

    loop = asyncio.get_running_loop()
    before = len(loop._scheduled)  # type: ignore[attr-defined]
    result = await quick.invoke({"n": 1})
    assert result.kind is ResultKind.OK and result.data == 2
    assert len(loop._scheduled) == before  # type: ignore[attr-defined]


async def test_an_async_tools_timeout_counts_from_the_start_of_the_call() -> None:
    # Blocking work before its first await uses up most of the timeout: the timer set at that
    # await still fires at start + timeout_s, not timeout_s after the await.
    finished = False

    @tool(timeout_s=0.3)
    async def slow_start() -> str:
        nonlocal finished
        time.sleep(0.25)  # noqa: ASYNC251 - a blocking start is what is tested
        await asyncio.sleep(0.25)
        finished = True
        return "late"

    started = time.perf_counter()
    result = await slow_start.invoke({})
    assert result.kind is ResultKind.SYSTEM_ERROR
    assert result.error == "tool 'slow_start' timed out after 0.3 s"
    assert time.perf_counter() - started < 0.45
    assert not finished


@pytest.mark.parametrize("suspends", [False, True])
async def test_a_tools_own_timeout_error_is_its_failure_not_a_timeout(suspends: bool) -> None:
    @tool(timeout_s=5)
    async def calls_out() -> str:
        if suspends:
            await asyncio.sleep(0)
        raise TimeoutError("upstream took too long")

    result = await calls_out.invoke({})
    assert result.kind is ResultKind.SYSTEM_ERROR
    assert result.error == "TimeoutError: upstream took too long"


async def test_a_model_that_raises_timeout_error_at_once_ends_the_run_as_a_timeout() -> None:
    class Impatient:
        name = "impatient"

        async def complete(self, request: dict, **_: object) -> None:
            raise TimeoutError("no answer")

    result = await Runner.run(Agent(name="a", limits=Limits(timeout_s=5)), "go", model=Impatient())
    assert result.stop_reason is StopReason.TIMEOUT
    assert result.error.message == "agent 'a' ran out of its 5 s budget at step 1"


async def test_a_run_whose_awaits_never_suspend_sets_no_deadline_timer() -> None:
    @tool(effect="read_only")
    async def step(n: int) -> int:
        return n

    loop = asyncio.get_running_loop()
    before = len(loop._scheduled)  # type: ignore[attr-defined]
    model = ScriptedModel([ToolCall("step", {"n": 1}), "done"])
    result = await Runner.run(Agent(name="a", tools=[step]), "go", model=model)
    assert result.completed and result.output == "done"
    assert len(loop._scheduled) == before  # type: ignore[attr-defined]


async def test_an_async_tool_that_suspends_past_the_runs_budget_stops_the_run() -> None:
    @tool(timeout_s=30)
    async def hangs() -> str:
        await asyncio.sleep(10)
        return "late"

    agent = Agent(name="a", tools=[hangs], limits=Limits(timeout_s=0.2))
    result = await Runner.run(agent, "go", model=ScriptedModel([ToolCall("hangs", {})]))
    assert result.stop_reason is StopReason.TIMEOUT
    assert result.error.message == "agent 'a' ran out of its 0.2 s budget at step 1"
    assert not asyncio.current_task().cancelling()  # type: ignore[union-attr]
