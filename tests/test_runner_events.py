"""Typed events, hooks, parallel tool calls, instructions, and run isolation."""

from __future__ import annotations

import asyncio

import pytest

from agentbench import (
    Agent,
    FunctionModel,
    ModelSettings,
    Runner,
    ScriptedModel,
    StopReason,
    ToolCall,
    tool,
)
from agentbench.runtime.events import EVENT_ADAPTER


@tool(effect="read_only")
def echo(text: str) -> str:
    return text


async def test_events_have_run_id_sequence_and_roundtrip_through_the_union() -> None:
    model = ScriptedModel([ToolCall("echo", {"text": "hi"}), "done"])
    result = await Runner.run(Agent(name="a", tools=[echo]), "go", model=model)
    assert [e.seq for e in result.events] == list(range(len(result.events)))
    assert {e.run_id for e in result.events} == {result.run_id}
    assert [e.kind for e in result.events] == [
        "run_started",
        "model_request",
        "model_response",
        "tool_started",
        "tool_finished",
        "model_request",
        "model_response",
        "run_finished",
    ]
    for event in result.events:
        again = EVENT_ADAPTER.validate_json(event.model_dump_json())
        assert type(again) is type(event)
        assert again == event
    assert all(a.ts <= b.ts for a, b in zip(result.events, result.events[1:], strict=False))


async def test_stream_yields_the_same_events_as_run() -> None:
    agent = Agent(name="a", tools=[echo])
    streamed = [
        e.kind
        async for e in Runner.stream(
            agent, "go", model=ScriptedModel([ToolCall("echo", {"text": "x"}), "done"])
        )
    ]
    ran = await Runner.run(
        agent, "go", model=ScriptedModel([ToolCall("echo", {"text": "x"}), "done"])
    )
    assert streamed == [e.kind for e in ran.events]


async def test_hooks_see_every_event_and_a_failing_hook_never_breaks_the_run() -> None:
    seen: list[str] = []
    async_seen: list[str] = []

    def broken(event) -> None:
        raise ValueError("hook bug")

    async def collector(event) -> None:
        async_seen.append(event.kind)

    model = ScriptedModel([ToolCall("echo", {"text": "x"}), "done"])
    result = await Runner.run(
        Agent(name="a", tools=[echo]),
        "go",
        model=model,
        hooks=[lambda e: seen.append(e.kind), broken, collector],
    )
    assert result.completed
    assert seen == async_seen == [e.kind for e in result.events]
    assert len(result.hook_errors) == len(result.events)
    assert "ValueError('hook bug')" in result.hook_errors[0]


async def test_run_finished_reaches_hooks_when_the_consumer_stops_early() -> None:
    seen: list[str] = []
    model = ScriptedModel([ToolCall("echo", {"text": "x"}), "done"])
    stream = Runner.stream(
        Agent(name="a", tools=[echo]), "go", model=model, hooks=[lambda e: seen.append(e.kind)]
    )
    async for event in stream:
        if event.kind == "model_response":
            break
    await stream.aclose()
    assert seen[-1] == "run_finished"


async def test_cancelled_run_reports_cancelled_to_hooks() -> None:
    finished = []

    class Hangs:
        name = "hangs"

        async def complete(self, request, *, on_text_delta=None):
            await asyncio.sleep(30)

    def hook(event) -> None:
        if event.kind == "run_finished":
            finished.append(event.stop_reason)

    task = asyncio.create_task(Runner.run(Agent(name="a"), "go", model=Hangs(), hooks=[hook]))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert finished == [StopReason.CANCELLED]


async def test_read_only_calls_in_one_turn_run_concurrently() -> None:
    # Each tool waits for the other: run one after the other they would time out.
    both_started = asyncio.Barrier(2)

    @tool(effect="read_only", timeout_s=2)
    async def left() -> str:
        await both_started.wait()
        return "L"

    @tool(effect="read_only", timeout_s=2)
    async def right() -> str:
        await both_started.wait()
        return "R"

    model = ScriptedModel([[ToolCall("left", {}), ToolCall("right", {})], "done"])
    result = await Runner.run(Agent(name="a", tools=[left, right]), "go", model=model)
    outcomes = [e.result.data for e in result.events if e.kind == "tool_finished"]
    assert outcomes == ["L", "R"]
    kinds = [e.kind for e in result.events if e.kind.startswith("tool_")]
    assert kinds == ["tool_started", "tool_started", "tool_finished", "tool_finished"]
    assert [m["content"] for m in result.messages if m["role"] == "tool"] == ["L", "R"]


async def test_calls_with_a_write_run_in_order() -> None:
    order: list[str] = []

    @tool(effect="write")
    async def save(item: str) -> str:
        order.append(f"start {item}")
        await asyncio.sleep(0.01)
        order.append(f"end {item}")
        return "saved"

    @tool(effect="read_only")
    async def peek(item: str) -> str:
        order.append(f"peek {item}")
        return "seen"

    turn = [
        ToolCall("save", {"item": "a"}),
        ToolCall("peek", {"item": "a"}),
        ToolCall("save", {"item": "b"}),
    ]
    result = await Runner.run(
        Agent(name="a", tools=[save, peek]), "go", model=ScriptedModel([turn, "done"])
    )
    assert order == ["start a", "end a", "peek a", "start b", "end b"]
    assert result.completed


async def test_instructions_are_rendered_each_iteration_with_state_so_far() -> None:
    model = ScriptedModel([ToolCall("echo", {"text": "42"}), "done"])
    agent = Agent(
        name="helper",
        instructions="Help {{ user }} ({{ agent }}).",
        tools=[echo],
        state_summary=True,
    )
    await Runner.run(agent, "go", model=model, context={"user": "Ada"})
    first, second = (r["messages"][0]["content"] for r in model.requests)
    assert first == "Help Ada (helper)."
    assert second == 'Help Ada (helper).\n\n## State so far\n- echo({"text": "42"}) → ok: 42'


async def test_template_that_uses_state_controls_its_placement() -> None:
    model = ScriptedModel([ToolCall("echo", {"text": "42"}), "done"])
    agent = Agent(
        name="a",
        instructions="{% for s in state %}FACT {{ s }}\n{% endfor %}Be brief.",
        tools=[echo],
    )
    await Runner.run(agent, "go", model=model)
    assert (
        model.requests[1]["messages"][0]["content"]
        == 'FACT echo({"text": "42"}) → ok: 42\nBe brief.'
    )


async def test_undefined_template_variable_names_agent_and_variable() -> None:
    agent = Agent(name="support", instructions="Hello {{ customer_name }}")
    result = await Runner.run(agent, "go", model=ScriptedModel(["hi"]))
    assert result.stop_reason is StopReason.ERROR
    assert result.error.type == "InstructionsError"
    assert "agent 'support'" in result.error.message
    assert "variable 'customer_name' is not defined" in result.error.message


def test_template_syntax_error_fails_when_the_agent_is_built() -> None:
    from agentbench import InstructionsError

    with pytest.raises(InstructionsError, match="agent 'x': instructions template: line 1"):
        Agent(name="x", instructions="Hello {{ name ")


async def test_model_settings_reach_the_request() -> None:
    model = ScriptedModel(["ok"])
    agent = Agent(
        name="a",
        tools=[echo],
        model_settings=ModelSettings(
            model="gpt-test", temperature=0.2, seed=7, extra_body={"top_k": 5}
        ),
    )
    await Runner.run(agent, "go", model=model)
    request = model.requests[0]
    assert request["model"] == "gpt-test"
    assert (request["temperature"], request["seed"], request["top_k"]) == (0.2, 7, 5)
    assert "top_p" not in request
    assert request["tools"] == [echo.openai_schema()]


async def test_multi_turn_input_is_used_as_the_conversation() -> None:
    model = ScriptedModel(["Paris, still."])
    history = [
        {"role": "user", "content": "capital of France?"},
        {"role": "assistant", "content": "Paris."},
        {"role": "user", "content": "and now?"},
    ]
    await Runner.run(Agent(name="a"), history, model=model)
    assert model.requests[0]["messages"][1:] == history


async def test_run_many_isolates_runs_and_limits_concurrency() -> None:
    active = 0
    peak = 0

    async def answer(request, info):
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.01)
        active -= 1
        return f"echo {request['messages'][-1]['content']}"

    @tool
    def remember(ctx_key: str) -> str:
        return ctx_key

    results = await Runner.run_many(
        Agent(name="a", instructions="{{ shared }}"),
        [f"q{i}" for i in range(8)],
        model=FunctionModel(answer),
        concurrency=3,
        context={"shared": "same"},
    )
    assert [r.output for r in results] == [f"echo q{i}" for i in range(8)]
    assert len({r.run_id for r in results}) == 8
    assert peak == 3


async def test_run_many_with_a_model_factory_gives_each_run_its_own_script() -> None:
    results = await Runner.run_many(
        Agent(name="a", tools=[echo]),
        ["a", "b", "c"],
        model_factory=lambda: ScriptedModel([ToolCall("echo", {"text": "t"}), "done"]),
        concurrency=2,
    )
    assert [r.stop_reason for r in results] == [StopReason.COMPLETED] * 3


async def test_context_mutation_in_one_run_does_not_leak() -> None:
    from agentbench import RunContext

    @tool
    def bump(ctx: RunContext) -> int:
        ctx.set("count", ctx.get("count", 0) + 1)
        return ctx.get("count")

    shared = {"count": 0}
    agent = Agent(name="a", tools=[bump])
    for _ in range(2):
        result = await Runner.run(
            agent, "go", model=ScriptedModel([ToolCall("bump", {}), "ok"]), context=shared
        )
        assert [m["content"] for m in result.messages if m["role"] == "tool"] == ["1"]
    assert shared == {"count": 0}


def test_run_sync_works_inside_a_running_loop() -> None:
    async def inner():
        return Runner.run_sync(Agent(name="a"), "go", model=ScriptedModel(["fine"]))

    assert asyncio.run(inner()).output == "fine"


async def test_streaming_setting_yields_text_deltas() -> None:
    agent = Agent(name="a", model_settings=ModelSettings(stream=True))
    deltas = [
        e.text
        async for e in Runner.stream(agent, "go", model=ScriptedModel(["one two three"]))
        if e.kind == "text_delta"
    ]
    assert deltas == ["one ", "two ", "three"]
