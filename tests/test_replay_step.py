"""A replayed step made cheaper (issue #15) computes exactly what it did: the replay fingerprint
(its id search, its tool-message shortcut), a latency set in place, a tool turn driven by the
loop, session removals merged back, sync tools that are not blocking."""

from __future__ import annotations

import asyncio
import hashlib
import re
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentbench import Agent, Limits, Runner, ToolCall, tool
from agentbench.replay import drift
from agentbench.replay.drift import Fingerprinter
from agentbench.runtime.context import RunContext
from agentbench.runtime.events import ContextChanged, ToolFinished
from agentbench.runtime.message_view import MessageView
from agentbench.runtime.models import ChatResponse, ScriptedModel, Usage
from agentbench.runtime.records import SharedFieldNames, assign, built

# The fingerprint as FINGERPRINT_VERSION 3 defined it, written out plainly: the request's
# keys sorted, volatile ones left out; a conversation as the system message's digest and a
# running hash of the others' digests; each digest blake2b-16 of the sorted JSON with ids cut.
_OLD_IDS = re.compile(rb'"(?:tool_call_id|id)":"(?:[^"\\]|\\.)*",?')


def _old_digest(value: Any) -> bytes:
    blob = _OLD_IDS.sub(b"", orjson.dumps(value, option=orjson.OPT_SORT_KEYS))
    return hashlib.blake2b(blob, digest_size=16).digest()


def _reference(request: dict[str, Any]) -> str:
    hasher = hashlib.blake2b(digest_size=16)
    for key in sorted(request):
        if key in drift.VOLATILE_TOP_LEVEL:
            continue
        hasher.update(key.encode())
        value = request[key]
        if key == "messages" and isinstance(value, list | MessageView):
            messages = list(value)
            lead = 1 if messages and messages[0].get("role") == "system" else 0
            if lead:
                hasher.update(_old_digest(drift._textless_calls(messages[0])))
            state = hashlib.blake2b(digest_size=16)
            for message in messages[lead:]:
                state.update(_old_digest(drift._textless_calls(message)))
            hasher.update(state.digest())
        else:
            hasher.update(_old_digest(value))
    return hasher.hexdigest()


# Text made of the pieces the id search turns on: quotes, escapes, keys, separators.
PIECES = ['"', "\\", "i", "d", ":", ",", "{", "}", "x", "\n", "é", "😀", "tool_call_", '"id":"']
TEXT = st.lists(st.sampled_from(PIECES), max_size=30).map("".join)


@settings(max_examples=300, deadline=None)
@given(TEXT)
def test_the_id_search_finds_what_it_found(text: str) -> None:
    blob = text.encode()
    assert drift._VOLATILE_IDS.sub(b"", blob) == _OLD_IDS.sub(b"", blob)


@settings(max_examples=300, deadline=None)
@given(TEXT, TEXT, st.sampled_from([None, "", "text"]))
def test_message_digests_are_unchanged(call_id: str, content: str, text: str | None) -> None:
    tool_message = {"role": "tool", "tool_call_id": call_id, "content": content}
    reordered = dict(reversed(list(tool_message.items())))
    call = {"id": call_id, "type": "function", "function": {"name": "f", "arguments": content}}
    assistant = {"role": "assistant", "content": text, "tool_calls": [call]}
    odd = {"role": "tool", "tool_call_id": 7, "content": content}  # not the shortcut's shape
    nested = {"role": "tool", "tool_call_id": call_id, "content": [{"id": call_id}]}
    messages = (tool_message, reordered, assistant, odd, nested, {**tool_message, "name": "f"})
    for message in messages:
        expected = _old_digest(drift._textless_calls(message))
        assert drift._message_digest(message) == expected


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(TEXT, TEXT), min_size=1, max_size=6), st.booleans())
def test_fingerprints_equal_the_version_3_ones(
    exchanges: list[tuple[str, str]], view: bool
) -> None:
    system = {"role": "system", "content": "Count."}
    conversation: list[dict[str, Any]] = [{"role": "user", "content": "count", "id": "u1"}]
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"id": "x"}}}]
    incremental = Fingerprinter()
    for number, (call_id, content) in enumerate(exchanges):
        call = {"id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}
        conversation.append({"role": "assistant", "content": "", "tool_calls": [call]})
        conversation.append({"role": "tool", "tool_call_id": call_id, "content": content})
        messages: Any = MessageView(system, conversation) if view else [system, *conversation]
        request = {"model": "m", "messages": messages, "tools": tools, "user": str(number)}
        assert incremental(request) == _reference(request) == drift.fingerprint(request)


def test_a_latency_set_in_place_is_what_assignment_gives() -> None:
    fields = {"text": "hi", "usage": Usage()}
    by_assignment, in_place = built(ChatResponse, dict(fields)), built(ChatResponse, fields)
    by_assignment.latency_ms = 1.5
    assign(in_place, "latency_ms", 1.5)
    assert in_place == by_assignment
    assert in_place.model_fields_set == {"text", "usage", "latency_ms"}
    assert in_place.__pydantic_fields_set__ is by_assignment.__pydantic_fields_set__
    assert type(in_place.__pydantic_fields_set__) is SharedFieldNames
    # The shared set of the records built without it is untouched.
    assert built(ChatResponse, dict(fields)).model_fields_set == {"text", "usage"}


def _agent(step: Any, **limits: Any) -> Agent:
    return Agent(name="a", instructions="Count.", tools=[step], limits=Limits(**limits))


def _script(calls: int) -> ScriptedModel:
    return ScriptedModel([*(ToolCall("step", {"n": n}) for n in range(calls)), "done"])


@pytest.mark.parametrize("kind", ["sync", "async", "blocking=False"])
def test_each_kind_of_tool_runs_a_turn_alike(kind: str) -> None:
    def add(n: int) -> int:
        """Add one."""
        return n + 1

    async def add_async(n: int) -> int:
        """Add one."""
        return n + 1

    made = {
        "sync": tool(name="step")(add),
        "async": tool(name="step")(add_async),
        "blocking=False": tool(name="step", blocking=False)(add),
    }[kind]
    result = Runner.run_sync(_agent(made), "count", model=_script(3))
    assert result.completed and result.output == "done"
    finished = [e for e in result.events if isinstance(e, ToolFinished)]
    assert [e.result.data for e in finished] == [1, 2, 3]
    step = ["model_request", "model_response", "tool_started", "tool_finished"]
    assert [e.kind for e in result.events] == [
        "run_started",
        *step * 3,
        "model_request",
        "model_response",
        "run_finished",
    ]
    assert [m["content"] for m in result.messages if m["role"] == "tool"] == ["1", "2", "3"]


def test_a_tool_that_overruns_times_out_however_it_ends() -> None:
    import time

    @tool(name="step", blocking=False, timeout_s=0.01)
    def slow(n: int) -> int:
        """Slow."""
        time.sleep(0.03)
        raise TimeoutError("its own")

    @tool(name="step", blocking=False)
    def own(n: int) -> int:
        """Raises its own TimeoutError, in time."""
        raise TimeoutError("its own")

    late = Runner.run_sync(_agent(slow), "count", model=_script(1))
    errors = [e.result.error for e in late.events if isinstance(e, ToolFinished)]
    assert errors == ["tool 'step' timed out after 0.01 s"]
    early = Runner.run_sync(_agent(own), "count", model=_script(1))
    errors = [e.result.error for e in early.events if isinstance(e, ToolFinished)]
    assert errors == ["TimeoutError: its own"]


def test_a_run_timing_out_in_a_tool_stops_with_timeout() -> None:
    @tool(name="step")
    async def hang(n: int) -> int:
        """Hangs."""
        await asyncio.sleep(5)
        return n

    agent = _agent(hang, timeout_s=0.05)
    result = Runner.run_sync(agent, "count", model=_script(1))
    assert result.stop_reason == "timeout"
    assert result.messages[-1]["content"].startswith("Not executed: the run stopped (timeout)")


def test_parallel_read_only_calls_still_run_together() -> None:
    @tool(name="step", effect="read_only")
    async def step(n: int) -> int:
        """Read only."""
        await asyncio.sleep(0)
        return n * 10

    model = ScriptedModel([[ToolCall("step", {"n": 1}), ToolCall("step", {"n": 2})], "done"])
    result = Runner.run_sync(_agent(step), "count", model=model)
    kinds = [e.kind for e in result.events]
    assert kinds[3:7] == ["tool_started", "tool_started", "tool_finished", "tool_finished"]
    assert [m["content"] for m in result.messages if m["role"] == "tool"] == ["10", "20"]


def test_session_removals_reach_the_next_turn() -> None:
    @tool(name="step")
    def forget(n: int, context: RunContext) -> str:
        """Forget the key."""
        context.delete("kept", scope="session")
        return "forgotten"

    agent = Agent(name="a", instructions="Count.", tools=[forget])
    model = ScriptedModel([ToolCall("step", {"n": 1}), "done"])
    result = Runner.run_sync(agent, "count", model=model, context={"a.kept": 1})
    removed = [e for e in result.events if isinstance(e, ContextChanged) and e.op == "remove"]
    assert [e.key for e in removed] == ["a.kept"]
    assert "a.kept" not in result.context.session


def test_usage_adds_up_as_before() -> None:
    class Counted(Usage):
        pass

    total = (
        Usage() + Usage(input_tokens=3, output_tokens=4) + Counted(input_tokens=1, estimated=True)
    )
    assert (total.input_tokens, total.output_tokens, total.estimated) == (4, 4, True)
    assert total.model_fields_set == {"input_tokens", "output_tokens", "estimated"}


def test_a_made_event_keeps_the_time_it_reads_back_with() -> None:
    import time
    from datetime import UTC

    from agentbench.runtime.event_log import EventLog
    from agentbench.runtime.events import ToolStarted

    log = EventLog("run_1", "a")
    before = time.time()
    fields = {"step": 1, "call_id": "c", "tool": "t", "arguments": {}}
    made = log.make(ToolStarted, {**fields, "run_id": "run_1", "seq": 0, "agent": "a"})
    assert made.ts.tzinfo is UTC and before - 1e-6 <= made.ts.timestamp() <= time.time()
    assert log[0] == made and log[0].ts == made.ts
    assert "ts" not in made.model_fields_set
