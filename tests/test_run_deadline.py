"""The run's wall-clock budget (`Limits.timeout_s`): one timer per run, firing wherever the run
waits — a model call, a sync or async tool, a streamed answer, a summarizer call — with the
same stop reason, GuardTriggered event and message; a cancellation from elsewhere stays one."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
import weakref

import pytest

from agentbench import (
    Agent,
    ChatResponse,
    FunctionModel,
    Limits,
    ModelSettings,
    Runner,
    ScriptedModel,
    StopReason,
    ToolCall,
    tool,
)
from agentbench.runtime.loop import drive
from agentbench.runtime.memory import MemoryPolicy
from agentbench.runtime.run_state import RunState
from agentbench.runtime.summarizers import LLMSummarizer

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop


def timeouts(result) -> list[str]:
    return [
        e.message
        for e in result.events
        if e.kind == "guard_triggered" and (e.guard, e.action) == ("timeout", "stop")
    ]


def assert_timed_out(result, budget: str, step: int) -> None:
    message = f"agent 'a' ran out of its {budget} s budget at step {step}"
    assert result.stop_reason is StopReason.TIMEOUT
    assert result.error.type == "RunTimeoutError"
    assert result.error.message == message
    assert timeouts(result) == [message]
    assert result.events[-1].kind == "run_finished"


async def test_a_hanging_sync_tool_on_its_thread_stops_the_run() -> None:
    release = threading.Event()

    @tool(timeout_s=30)
    def hangs() -> str:
        release.wait(10)
        return "late"

    agent = Agent(name="a", tools=[hangs], limits=Limits(timeout_s=0.2))
    try:
        result = await Runner.run(agent, "go", model=ScriptedModel([ToolCall("hangs", {})]))
    finally:
        release.set()
    assert_timed_out(result, "0.2", step=1)
    assert "Not executed: the run stopped (timeout)" in result.messages[-1]["content"]


async def test_a_stream_that_stalls_stops_the_run_after_its_first_words() -> None:
    class Stalls:
        name = "stalls"

        async def complete(self, request, *, on_text_delta=None):
            on_text_delta("Hello ")
            await asyncio.sleep(30)

    agent = Agent(name="a", model_settings=ModelSettings(stream=True), limits=Limits(timeout_s=0.2))
    result = await Runner.run(agent, "go", model=Stalls())
    assert_timed_out(result, "0.2", step=1)
    assert [e.text for e in result.events if e.kind == "text_delta"] == ["Hello "]


async def test_a_hanging_summarizer_call_is_cut_off_and_the_run_stops() -> None:
    turns = iter(range(100))

    async def answer(request, info):
        if request["messages"][0]["content"].startswith("You compress"):
            await asyncio.sleep(30)
        turn = next(turns)
        return ToolCall("lookup", {"key": f"k{turn}"}) if turn < 6 else "done"

    @tool(effect="read_only")
    def lookup(key: str) -> str:
        """Look a key up."""
        return f"value-of-{key}"

    agent = Agent(
        name="a",
        tools=[lookup],
        memory=MemoryPolicy(max_messages=6, keep_recent=2, summarizer=LLMSummarizer()),
        limits=Limits(timeout_s=1.5),
    )
    result = await Runner.run(agent, "go", model=FunctionModel(answer))
    # The summarizer's failure is memory's to report (it falls back to the rules); the run
    # then stops at its next model call, as it always has.
    decision = next(e for e in result.events if e.kind == "memory_decision")
    step = decision.step
    assert decision.detail["summarizer_error"] == (
        f"RunTimeoutError: agent 'a' ran out of its 1.5 s budget at step {step}"
    )
    assert_timed_out(result, "1.5", step=step)


async def test_a_budget_spent_between_waits_stops_the_run_at_its_next_call() -> None:
    # The tool cannot be interrupted (it runs on the event loop), so the deadline passes
    # while nothing waits; the next model call finds it spent.
    @tool(blocking=False, timeout_s=None)
    def busy() -> str:
        time.sleep(0.3)
        return "done busy"

    model = ScriptedModel([ToolCall("busy", {}), "never served"])
    agent = Agent(name="a", tools=[busy], limits=Limits(timeout_s=0.1))
    result = await Runner.run(agent, "go", model=model)
    assert_timed_out(result, "0.1", step=2)
    finished = [e for e in result.events if e.kind == "tool_finished"]
    assert [e.result.data for e in finished] == ["done busy"]


async def test_a_cancellation_from_elsewhere_stays_a_cancellation() -> None:
    class CancelsItself:
        name = "cancels"

        async def complete(self, request, *, on_text_delta=None):
            asyncio.current_task().cancel()
            await asyncio.sleep(30)

    agent = Agent(name="a", limits=Limits(timeout_s=60))
    with pytest.raises(asyncio.CancelledError):
        await Runner.run(agent, "go", model=CancelsItself())


async def test_a_cancellation_at_the_moment_the_deadline_fires_stays_a_cancellation() -> None:
    # As with asyncio.timeout: when both ask, the outside cancellation wins.
    class LateThenCancelled:
        name = "late"

        async def complete(self, request, *, on_text_delta=None):
            # Past the deadline without yielding, so its timer is due at the next await.
            until = time.monotonic() + 0.15
            while time.monotonic() < until:
                pass
            asyncio.current_task().cancel()
            await asyncio.sleep(30)

    agent = Agent(name="a", limits=Limits(timeout_s=0.05))
    task = asyncio.ensure_future(Runner.run(agent, "go", model=LateThenCancelled()))
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()


async def test_the_deadline_leaves_the_task_uncancelled_after_a_timeout() -> None:
    class Hangs:
        name = "hangs"

        async def complete(self, request, *, on_text_delta=None):
            await asyncio.sleep(30)

    agent = Agent(name="a", limits=Limits(timeout_s=0.1))
    result = await Runner.run(agent, "go", model=Hangs())
    assert result.stop_reason is StopReason.TIMEOUT
    assert asyncio.current_task().cancelling() == 0
    await asyncio.sleep(0)  # no cancellation left pending for this task


async def test_a_finished_run_leaves_no_timer_holding_it() -> None:
    agent = Agent(name="a", limits=Limits(timeout_s=300))
    run = RunState(
        agent,
        "go",
        ScriptedModel([ChatResponse(text="hi")]),
        context=None,
        run_id=None,
        parent_run_id=None,
    )
    events = [event async for event in drive(run)]
    assert run.stop.reason is StopReason.COMPLETED
    alive = weakref.ref(run)
    del run, events
    gc.collect()
    assert alive() is None, "the run's deadline timer still holds the finished run"
