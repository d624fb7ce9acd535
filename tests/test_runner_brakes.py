"""Every brake of the loop and every stop reason, shown with ScriptedModel (no network)."""

from __future__ import annotations

import asyncio

import pytest

from agentbench import (
    Agent,
    BusinessFailure,
    ChatResponse,
    Limits,
    Runner,
    ScriptedModel,
    StopReason,
    ToolCall,
    Usage,
    tool,
)


def kinds(result) -> list[str]:
    return [e.kind for e in result.events]


def guards(result) -> list[tuple[str, str]]:
    return [(e.guard, e.action) for e in result.events if e.kind == "guard_triggered"]


@tool(effect="read_only")
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value-of-{key}"


async def test_completed_run_returns_output_and_messages() -> None:
    model = ScriptedModel([ToolCall("lookup", {"key": "a"}), "the value is value-of-a"])
    result = await Runner.run(Agent(name="a", tools=[lookup]), "what is a?", model=model)
    assert result.stop_reason is StopReason.COMPLETED
    assert result.output == "the value is value-of-a"
    assert [m["role"] for m in result.messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert result.messages[3]["content"] == "value-of-a"
    assert result.iterations == 2
    assert result.usage.total_tokens > 0
    model.assert_complete()


async def test_max_iterations_stops_the_run() -> None:
    model = ScriptedModel([ToolCall("lookup", {"key": str(i)}) for i in range(10)])
    agent = Agent(name="a", tools=[lookup], limits=Limits(max_iterations=3))
    result = await Runner.run(agent, "go", model=model)
    assert result.stop_reason is StopReason.MAX_ITERATIONS
    assert len(model.requests) == 3
    assert guards(result) == [("max_iterations", "stop")]
    assert result.output is None


async def test_wall_clock_timeout_stops_a_hanging_model() -> None:
    class Hangs:
        name = "hangs"

        async def complete(self, request, *, on_text_delta=None):
            await asyncio.sleep(30)

    agent = Agent(name="a", limits=Limits(timeout_s=0.2))
    result = await Runner.run(agent, "go", model=Hangs())
    assert result.stop_reason is StopReason.TIMEOUT
    assert "ran out of its 0.2 s budget" in result.error.message
    assert guards(result) == [("timeout", "stop")]


async def test_wall_clock_timeout_covers_tools_and_closes_open_calls() -> None:
    @tool(timeout_s=30)
    async def slow() -> str:
        await asyncio.sleep(30)
        return "never"

    agent = Agent(name="a", tools=[slow], limits=Limits(timeout_s=0.2))
    result = await Runner.run(agent, "go", model=ScriptedModel([ToolCall("slow", {})]))
    assert result.stop_reason is StopReason.TIMEOUT
    # The assistant's call still gets an answer, so the conversation stays valid for the API.
    assert result.messages[-1]["role"] == "tool"
    assert "Not executed: the run stopped (timeout)" in result.messages[-1]["content"]


async def test_repeated_call_warns_on_second_and_stops_on_third() -> None:
    runs = []

    @tool
    def search(q: str) -> str:
        runs.append(q)
        return "nothing found"

    same = ToolCall("search", {"q": "x"})
    model = ScriptedModel([same, same, same, "unreachable"])
    result = await Runner.run(Agent(name="a", tools=[search]), "go", model=model)
    assert result.stop_reason is StopReason.LOOP_DETECTED
    assert runs == ["x", "x"], "the third identical call must not execute"
    assert guards(result) == [("repeated_call", "warn"), ("loop_detected", "stop")]
    warned = [m for m in result.messages if m["role"] == "tool"][1]
    assert "call number 2 of search" in warned["content"]
    assert model.remaining == 1


async def test_repeat_thresholds_are_configurable_and_argument_order_does_not_matter() -> None:
    @tool
    def search(q: str, page: int = 1) -> str:
        return "nothing"

    calls = [
        ToolCall("search", '{"q": "x", "page": 1}'),
        ToolCall("search", '{"page": 1, "q": "x"}'),
        ToolCall("search", '{"q": "x", "page": 1}'),
        ToolCall("search", '{"q": "x", "page": 1}'),
        "done",
    ]
    agent = Agent(name="a", tools=[search], limits=Limits(repeat_warn_at=3, repeat_stop_at=4))
    result = await Runner.run(agent, "go", model=ScriptedModel(calls))
    assert result.stop_reason is StopReason.LOOP_DETECTED
    assert guards(result) == [("repeated_call", "warn"), ("loop_detected", "stop")]


async def test_different_arguments_are_not_a_loop() -> None:
    calls = [ToolCall("lookup", {"key": k}) for k in "abcde"] + ["done"]
    result = await Runner.run(Agent(name="a", tools=[lookup]), "go", model=ScriptedModel(calls))
    assert result.stop_reason is StopReason.COMPLETED
    assert guards(result) == []


async def test_token_budget_stops_before_the_next_call() -> None:
    big = Usage(input_tokens=600, output_tokens=100)
    model = ScriptedModel(
        [
            ChatResponse(tool_calls=[ToolCall("lookup", {"key": "a"})], usage=big),
            ChatResponse(tool_calls=[ToolCall("lookup", {"key": "b"})], usage=big),
            "never reached",
        ]
    )
    agent = Agent(name="a", tools=[lookup], limits=Limits(token_budget=1000))
    result = await Runner.run(agent, "go", model=model)
    assert result.stop_reason is StopReason.TOKEN_BUDGET
    assert result.usage.total_tokens == 1400
    assert len(model.requests) == 2
    assert guards(result) == [("token_budget", "stop")]


async def test_business_stop_ends_the_run_with_the_reason() -> None:
    @tool(effect="write")
    def pay(amount: int) -> str:
        raise BusinessFailure("card declined", stop=True)

    model = ScriptedModel([ToolCall("pay", {"amount": 5}), "unreachable"])
    result = await Runner.run(Agent(name="a", tools=[pay]), "pay", model=model)
    assert result.stop_reason is StopReason.BUSINESS_STOP
    assert result.output == "card declined"


async def test_business_failure_without_stop_goes_back_to_the_model() -> None:
    @tool
    def refund(order: str) -> str:
        raise BusinessFailure("order too old")

    model = ScriptedModel([ToolCall("refund", {"order": "1"}), "Sorry, that order is too old."])
    result = await Runner.run(Agent(name="a", tools=[refund]), "refund", model=model)
    assert result.stop_reason is StopReason.COMPLETED
    tool_message = model.requests[1]["messages"][-1]
    assert tool_message["content"].startswith("[business_failure] order too old")


async def test_system_error_goes_back_to_the_model() -> None:
    @tool
    def flaky() -> str:
        raise ConnectionError("db down")

    model = ScriptedModel([ToolCall("flaky", {}), "The database is down."])
    result = await Runner.run(Agent(name="a", tools=[flaky]), "go", model=model)
    assert result.completed
    finished = next(e for e in result.events if e.kind == "tool_finished")
    assert finished.result.kind.value == "system_error"
    assert model.requests[1]["messages"][-1]["content"] == "[system_error] ConnectionError: db down"


async def test_model_error_ends_the_run_with_error_and_run_finished_last() -> None:
    model = ScriptedModel([RuntimeError("provider exploded")])
    result = await Runner.run(Agent(name="a"), "go", model=model)
    assert result.stop_reason is StopReason.ERROR
    assert result.error.type == "RuntimeError"
    assert result.error.message == "RuntimeError: provider exploded"
    assert result.error.step == 1
    assert kinds(result)[-1] == "run_finished"


async def test_exhausted_script_is_a_clear_error() -> None:
    model = ScriptedModel([ToolCall("lookup", {"key": "a"})])
    result = await Runner.run(Agent(name="a", tools=[lookup]), "go", model=model)
    assert result.stop_reason is StopReason.ERROR
    assert "has no response left for request #2" in result.error.message
    assert "role='tool'" in result.error.message


def test_assert_complete_reports_unused_items() -> None:
    model = ScriptedModel(["a", "b"])
    Runner.run_sync(Agent(name="a"), "go", model=model)
    with pytest.raises(AssertionError, match="1 scripted response"):
        model.assert_complete()


def test_run_without_any_model_is_a_usage_error() -> None:
    from agentbench import UsageError

    with pytest.raises(UsageError, match="has no model"):
        Runner.run_sync(Agent(name="a"), "go")
