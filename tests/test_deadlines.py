"""A deadline is a deadline: a result that arrives after it is a timeout, one that arrived in
time is the answer, however late the event loop gets round to either.

Each test holds the event loop (a coroutine that blocks it, as another run's CPU work or a
blocking call would) past a deadline, and decides with events — not with sleeps racing
sleeps — whether the result arrived before or after that deadline.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from agentbench import (
    Agent,
    ChatResponse,
    Limits,
    ModelError,
    Runner,
    ScriptedModel,
    StopReason,
    ToolCall,
    tool,
)
from agentbench.runtime import threads
from agentbench.runtime.deadlines import DeadlineExceeded, within
from agentbench.runtime.retry import RetryPolicy
from agentbench.runtime.tools import ResultKind

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

DEADLINE_S = 0.05
PAST_IT_S = 0.25  # how long the loop is held: well past DEADLINE_S, on any machine
BOUND_S = 10.0  # what a wait for another thread may take before the test gives up


def hold_the_loop(seconds: float) -> None:
    """Block the event loop's thread (not await): nothing else on the loop runs meanwhile."""
    until = time.monotonic() + seconds
    while (left := until - time.monotonic()) > 0:
        time.sleep(left)


def wait_until_published(idle_before: int) -> None:
    """Block until the tool's thread has published its outcome: it rejoins the idle threads
    right after (`threads._serve`), and no other tool runs in these tests."""
    until = time.monotonic() + BOUND_S
    while len(threads._idle) <= idle_before:
        assert time.monotonic() < until, "the tool's thread never published its outcome"
        time.sleep(0.001)


def held_tool(release: threading.Event) -> Any:
    @tool(timeout_s=DEADLINE_S)
    def slow_report() -> str:
        """Fetch the weekly report."""
        assert release.wait(BOUND_S)
        return "report"

    return slow_report


async def test_a_thread_answer_published_after_the_deadline_is_a_timeout_however_late() -> None:
    release = threading.Event()
    slow_report = held_tool(release)

    async def busy_loop() -> None:
        # The call is waiting on its thread now. Hold the loop past the deadline, then let the
        # tool answer (late), and look only once that answer is queued for the loop.
        idle_before = len(threads._idle)
        hold_the_loop(PAST_IT_S)
        release.set()
        wait_until_published(idle_before)

    result, _ = await asyncio.gather(slow_report.invoke({}), busy_loop())
    assert result.kind is ResultKind.SYSTEM_ERROR
    assert result.error == f"tool 'slow_report' timed out after {DEADLINE_S:g} s"


async def test_a_thread_answer_published_in_time_is_the_answer_however_late_the_loop() -> None:
    release = threading.Event()
    slow_report = held_tool(release)

    async def busy_loop() -> None:
        idle_before = len(threads._idle)
        release.set()
        wait_until_published(idle_before)  # in time: the deadline is a whole hold away
        hold_the_loop(PAST_IT_S)  # and now the loop looks late, with the timer also due

    result, _ = await asyncio.gather(slow_report.invoke({}), busy_loop())
    assert result.kind is ResultKind.OK, result.error
    assert result.data == "report"


async def test_an_async_tool_woken_in_time_is_answered_however_late_the_loop() -> None:
    waiting: dict[str, asyncio.Future[str]] = {}

    @tool(timeout_s=DEADLINE_S)
    async def fetch() -> str:
        """Fetch a value another thread delivers."""
        waiting["future"] = asyncio.get_running_loop().create_future()
        return await waiting["future"]

    async def busy_loop() -> None:
        loop = asyncio.get_running_loop()
        delivered = threading.Event()

        def deliver() -> None:  # in time: long before the loop's hold ends
            loop.call_soon_threadsafe(waiting["future"].set_result, "value")
            delivered.set()

        threading.Thread(target=deliver).start()
        assert delivered.wait(BOUND_S)
        hold_the_loop(PAST_IT_S)

    result, _ = await asyncio.gather(fetch.invoke({}), busy_loop())
    assert result.kind is ResultKind.OK, result.error
    assert result.data == "value"


async def test_an_async_tool_woken_by_a_timer_due_in_time_is_answered_however_late() -> None:
    @tool(timeout_s=DEADLINE_S)
    async def nap() -> str:
        """Sleep a little."""
        await asyncio.sleep(DEADLINE_S / 5)
        return "rested"

    async def busy_loop() -> None:
        hold_the_loop(PAST_IT_S)  # the nap's timer and the deadline are both due after it

    result, _ = await asyncio.gather(nap.invoke({}), busy_loop())
    assert result.kind is ResultKind.OK, result.error


async def test_an_async_tool_still_waiting_at_its_deadline_times_out() -> None:
    @tool(timeout_s=DEADLINE_S)
    async def nap() -> str:
        """Sleep too long."""
        await asyncio.Event().wait()  # nothing ever arrives
        return "never"

    result = await nap.invoke({})
    assert result.kind is ResultKind.SYSTEM_ERROR
    assert result.error == f"tool 'nap' timed out after {DEADLINE_S:g} s"


@pytest.mark.parametrize("first", ["blocks-at-once", "awaits-then-blocks"])
async def test_an_async_tool_that_holds_the_loop_past_its_deadline_times_out(first: str) -> None:
    @tool(timeout_s=DEADLINE_S)
    async def blocking_report() -> str:
        """A report fetched with a sync client inside an async tool."""
        if first == "awaits-then-blocks":
            await asyncio.sleep(0)
        hold_the_loop(PAST_IT_S)  # its own work: no timer can interrupt it
        return "report"

    result = await blocking_report.invoke({})
    assert result.kind is ResultKind.SYSTEM_ERROR, result.data
    assert result.error == f"tool 'blocking_report' timed out after {DEADLINE_S:g} s"


async def test_a_run_whose_answer_arrived_in_time_completes_however_late_the_loop() -> None:
    loop = asyncio.get_running_loop()
    asked = asyncio.Event()
    answer: asyncio.Future[ChatResponse] = loop.create_future()

    class Waiting:
        name = "waiting"

        async def complete(self, request: dict[str, Any], **_: Any) -> ChatResponse:
            asked.set()
            return await answer

    agent = Agent(name="a", limits=Limits(timeout_s=DEADLINE_S * 4))
    running = asyncio.create_task(Runner.run(agent, "go", model=Waiting()))
    await asked.wait()
    delivered = threading.Event()

    def deliver() -> None:
        loop.call_soon_threadsafe(answer.set_result, ChatResponse(text="done"))
        delivered.set()

    threading.Thread(target=deliver).start()
    assert delivered.wait(BOUND_S)
    hold_the_loop(PAST_IT_S)  # past the run's budget, with its answer already queued
    result = await running
    assert result.stop_reason is StopReason.COMPLETED, result.error
    assert result.output == "done"


async def test_a_run_whose_tool_answers_after_its_budget_times_out() -> None:
    running, release = threading.Event(), threading.Event()

    @tool(timeout_s=30)
    def slow_report() -> str:
        """Fetch the weekly report."""
        running.set()
        assert release.wait(BOUND_S)
        return "report"

    agent = Agent(name="a", tools=[slow_report], limits=Limits(timeout_s=DEADLINE_S))
    model = ScriptedModel([ToolCall("slow_report", {}), "never asked"])
    run = asyncio.create_task(Runner.run(agent, "go", model=model))
    until = time.monotonic() + BOUND_S
    while not running.is_set():  # the run hands the tool to its thread
        assert time.monotonic() < until
        await asyncio.sleep(0.001)
    idle_before = len(threads._idle)
    hold_the_loop(PAST_IT_S)
    release.set()
    wait_until_published(idle_before)
    result = await run
    assert result.stop_reason is StopReason.TIMEOUT
    assert "never asked" not in str(result.output)


async def test_within_tells_its_own_deadline_from_a_timeout_the_call_raised() -> None:
    async def raises_its_own() -> None:
        await asyncio.sleep(0)
        raise TimeoutError("the HTTP client's")

    with pytest.raises(TimeoutError, match="the HTTP client's") as raised:
        await within(raises_its_own(), asyncio.get_running_loop().time() + 5)
    assert not isinstance(raised.value, DeadlineExceeded)
    with pytest.raises(DeadlineExceeded):
        await within(asyncio.sleep(5), asyncio.get_running_loop().time() + DEADLINE_S)


async def test_a_cancellation_from_elsewhere_stays_a_cancellation_under_within() -> None:
    started = asyncio.Event()

    async def waits() -> None:
        started.set()
        await asyncio.sleep(5)

    task = asyncio.create_task(within(waits(), asyncio.get_running_loop().time() + 5))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.mark.server
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_a_model_answer_on_its_socket_in_time_is_the_answer_however_late_the_loop(
    stream: bool,
) -> None:
    from agentbench.runtime.openai_model import OpenAIModel
    from agentbench.testing import OpenAICompatibleServer

    answered = threading.Event()

    def respond(request: dict[str, Any]) -> str:
        answered.set()
        return "hello there"

    with OpenAICompatibleServer(responder=respond) as server:
        model = OpenAIModel(
            "test-model", base_url=server.base_url, timeout_s=0.5, retry=RetryPolicy(1)
        )
        request = {"messages": [{"role": "user", "content": "x"}], "stream": stream}

        async def busy_loop() -> None:
            until = time.monotonic() + BOUND_S
            while not server.requests:  # the client sends its request, the loop running
                assert time.monotonic() < until
                await asyncio.sleep(0.001)
            # From here the loop is held: the server answers meanwhile, and the answer's bytes
            # wait on the socket until past the call's deadline.
            assert answered.wait(BOUND_S)
            hold_the_loop(1.0)

        response, _ = await asyncio.gather(model.complete(request), busy_loop())
        await model.aclose()
    assert response.text == "hello there"


@pytest.mark.server
async def test_a_model_answer_that_trickles_past_the_deadline_times_out() -> None:
    from agentbench.runtime.openai_model import OpenAIModel
    from agentbench.testing import OpenAICompatibleServer, Trickle

    # Each piece comes well inside the timeout (the SDK's per-read timeout never fires); the
    # whole answer takes several times it.
    with OpenAICompatibleServer([Trickle(0.1, "slow words", pieces=10)] * 2) as server:
        model = OpenAIModel(
            "test-model",
            base_url=server.base_url,
            timeout_s=0.35,
            retry=RetryPolicy(max_attempts=1),
        )
        for stream in (False, True):
            request = {"messages": [{"role": "user", "content": "x"}], "stream": stream}
            with pytest.raises(ModelError, match=r"timed out after 0.35 s"):
                await model.complete(request)
        await model.aclose()
