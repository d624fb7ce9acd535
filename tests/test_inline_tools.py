"""Sync tools declared `blocking=False` run on the event loop, without the thread hop; their
timeout is cooperative and their results, messages and events are those of a threaded run."""

from __future__ import annotations

import threading
import time

import pytest

from agentbench import (
    Agent,
    BusinessFailure,
    Runner,
    ScriptedModel,
    ToolCall,
    ToolDefinitionError,
    tool,
)
from agentbench.runtime.tools import ResultKind, ToolResult, _finish


def _spin(seconds: float) -> None:
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        pass


async def test_a_non_blocking_tool_runs_on_the_event_loop_thread_and_a_default_one_does_not() -> (
    None
):
    threads: dict[str, int] = {}

    @tool(blocking=False)
    def inline() -> str:
        threads["inline"] = threading.get_ident()
        return "in"

    @tool
    def threaded() -> str:
        threads["threaded"] = threading.get_ident()
        return "out"

    assert (await inline.invoke({})).data == "in"
    assert (await threaded.invoke({})).data == "out"
    assert threads["inline"] == threading.get_ident()
    assert threads["threaded"] != threading.get_ident()


async def test_an_overrun_is_reported_as_the_thread_would_report_it() -> None:
    @tool(blocking=False, timeout_s=0.01)
    def slow() -> str:
        _spin(0.05)
        return "late"

    @tool(blocking=False, timeout_s=0.01)
    def slow_then_fails() -> str:
        _spin(0.05)
        raise ValueError("after the deadline")

    for made in (slow, slow_then_fails):
        result = await made.invoke({})
        assert result.kind is ResultKind.SYSTEM_ERROR
        assert result.error == f"tool {made.name!r} timed out after 0.01 s"


async def test_outcomes_in_time_are_classified_as_for_any_tool() -> None:
    @tool(blocking=False, timeout_s=5)
    def own_timeout() -> str:
        raise TimeoutError("the upstream API timed out")

    @tool(blocking=False)
    def refuses() -> str:
        raise BusinessFailure("account closed", stop=True)

    @tool(blocking=False)
    def broken() -> str:
        return {}["missing"]

    mine = await own_timeout.invoke({})
    assert mine.kind is ResultKind.SYSTEM_ERROR
    assert mine.error == "TimeoutError: the upstream API timed out"
    refused = await refuses.invoke({})
    assert (refused.kind, refused.error, refused.stop) == (
        ResultKind.BUSINESS_FAILURE,
        "account closed",
        True,
    )
    assert (await broken.invoke({})).error == "KeyError: 'missing'"


def test_blocking_false_is_for_sync_functions() -> None:
    async def fetch() -> str:
        return "x"

    with pytest.raises(ToolDefinitionError, match="blocking=False is for sync functions"):
        tool(blocking=False)(fetch)


async def test_a_run_with_an_inline_tool_matches_the_same_run_with_a_threaded_one() -> None:
    def lookup(key: str) -> dict[str, str]:
        """Look a key up."""
        if key == "gone":
            raise BusinessFailure("no such key")
        return {"key": key, "value": key.upper()}

    def run_with(blocking: bool):
        made = tool(effect="read_only", blocking=blocking)(lookup)
        script = [
            [ToolCall("lookup", {"key": "a"}, id="c1"), ToolCall("lookup", {"key": "b"}, id="c2")],
            ToolCall("lookup", {"key": "gone"}, id="c3"),
            ToolCall("lookup", {"key": 3}, id="c4"),
            "done",
        ]
        return Runner.run(Agent(name="a", tools=[made]), "go", model=ScriptedModel(script))

    threaded, inline = await run_with(True), await run_with(False)

    def shape(result):
        out = []
        for event in result.events:
            fields = event.model_dump(exclude={"run_id", "ts", "duration_ms", "latency_ms"})
            if event.kind == "tool_finished":
                fields["result"].pop("duration_ms")
            if event.kind == "model_response":
                fields["response"].pop("latency_ms")
            out.append(fields)
        return out

    assert inline.stop_reason is threaded.stop_reason
    assert inline.messages == threaded.messages
    assert shape(inline) == shape(threaded)


async def test_scalar_results_are_built_as_ok_then_finished_would_build_them() -> None:
    long_text = "x" * 50
    for value in (3, 2.5, True, None, "short", long_text):

        @tool(blocking=False, max_result_chars=10)
        def give(value: object = value) -> object:
            return value

        built = await give.invoke({})
        expected = _finish(ToolResult.ok(value), time.perf_counter(), 10)
        assert built.model_dump(exclude={"duration_ms"}) == expected.model_dump(
            exclude={"duration_ms"}
        )
        assert built.model_fields_set == expected.model_fields_set
        assert built.observation() == expected.observation()
    assert (await give.invoke({})).truncated
