"""Request drift against a recording converted from a trace: what the trace could not know.

A trace an instrumentation wrote may hold only part of each request (openai-v2: no tool
definitions, no tool_choice, only the settings it names), and JSON text it or the code that
replays it spelled its own way. Its cassette names what the trace recorded
(`imported_trace.recorded_fields`); drift compares only that, tool-call arguments (and, for
such a recording, tool results) as parsed JSON — and a recording of agentbench's own is
compared whole, as before. The end-to-end journeys with the real instrumentations are in
`test_production_traces.py`; these pin the rules themselves.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentbench.replay import models as replay_models
from agentbench.replay.cassette import Cassette, Interaction
from agentbench.replay.drift import TraceSource, request_diff
from agentbench.replay.models import ReplayModel
from agentbench.runtime.models import ChatResponse, ToolCall

OPENAI_V2 = TraceSource(
    "opentelemetry.util.genai.handler 0.4b0",
    frozenset({"model", "messages", "temperature", "max_tokens"}),
)
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]


def request(*messages: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"model": "gpt-4o-mini", "messages": list(messages), **fields}


SYSTEM = {"role": "system", "content": "You answer weather questions."}
USER = {"role": "user", "content": "How warm is it in Paris?"}


def asked(arguments: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": arguments},
            }
        ],
    }


def told(content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": "call_1", "content": content}


def paths(changes: list[Any]) -> list[str]:
    return [f"{c.path}: {c.kind}" for c in changes]


def test_fields_the_trace_did_not_record_are_not_compared() -> None:
    recorded = request(SYSTEM, USER, temperature=0, max_tokens=300)
    current = request(
        SYSTEM, USER, temperature=0, max_tokens=300, tools=TOOLS, tool_choice="auto", seed=7
    )
    assert paths(request_diff(recorded, current)) == [
        "tools: added",
        "tool_choice: added",
        "seed: added",
    ]
    assert request_diff(recorded, current, OPENAI_V2) == []
    assert OPENAI_V2.unknown(current) == ["tools", "tool_choice", "seed"]


def test_what_the_trace_recorded_is_still_compared() -> None:
    recorded = request(SYSTEM, USER, temperature=0, max_tokens=300)
    current = request(
        {"role": "system", "content": "Be brief."}, USER, temperature=0.7, tools=TOOLS
    )
    assert paths(request_diff(recorded, current, OPENAI_V2)) == [
        "messages[0].content: changed",
        "temperature: changed",
        "max_tokens: removed",
    ]


def test_a_stop_sequence_is_compared_as_the_trace_records_it() -> None:
    """The GenAI conventions record `stop` as a list: the app's "END" was recorded ["END"]."""
    source = TraceSource("openai-v2", frozenset({"model", "messages", "stop"}))
    recorded = request(SYSTEM, USER, stop=["END"])
    assert request_diff(recorded, request(SYSTEM, USER, stop="END"), source) == []
    changed = request_diff(recorded, request(SYSTEM, USER, stop="STOP"), source)
    assert paths(changed) == ["stop[0]: changed"]


def test_a_trace_that_recorded_whole_requests_compares_every_field() -> None:
    whole = TraceSource("openinference.instrumentation.openai 0.1.66")
    recorded = request(SYSTEM, USER, tools=TOOLS)
    current = request(SYSTEM, USER, tools=TOOLS, tool_choice="auto")
    assert paths(request_diff(recorded, current, whole)) == ["tool_choice: added"]


def test_whether_the_app_streamed_is_not_compared() -> None:
    """OpenInference records the body as sent, `stream: true` too; a boundary target's
    requests never say how the answer is delivered."""
    whole = TraceSource("openinference.instrumentation.openai 0.1.66")
    recorded = request(SYSTEM, USER, stream=True, stream_options={"include_usage": True})
    assert request_diff(recorded, request(SYSTEM, USER), whole) == []
    assert paths(request_diff(recorded, request(SYSTEM, USER))) == ["stream: removed"]


@pytest.mark.parametrize("source", [None, OPENAI_V2])
def test_tool_call_arguments_are_compared_as_parsed_json(source: TraceSource | None) -> None:
    # openai-v2 records arguments as an object, written back with spaces; a boundary target's
    # requests re-dump them compactly; frameworks re-serialize them in their own key order.
    recorded = request(SYSTEM, USER, asked('{"city": "Paris", "unit": "C"}'), told("21"))
    same = request(SYSTEM, USER, asked('{"unit":"C","city":"Paris"}'), told("21"))
    assert request_diff(recorded, same, source) == []
    other = request(SYSTEM, USER, asked('{"city":"Oslo","unit":"C"}'), told("21"))
    assert paths(request_diff(recorded, other, source)) == [
        "messages[2].tool_calls[0].function.arguments: changed"
    ]


def test_tool_results_from_a_trace_are_compared_as_parsed_json() -> None:
    # The app sent json.dumps(result); the code replaying it (an agentbench agent's tool
    # returning the dict, serialized compactly) sends the same data spelled its own way.
    recorded = request(SYSTEM, USER, asked("{}"), told('{"city": "Paris", "celsius": 21.0}'))
    respelled = request(SYSTEM, USER, asked("{}"), told('{"city":"Paris","celsius":21.0}'))
    assert request_diff(recorded, respelled, OPENAI_V2) == []
    changed = request(SYSTEM, USER, asked("{}"), told('{"city":"Paris","celsius":25.0}'))
    assert paths(request_diff(recorded, changed, OPENAI_V2)) == ["messages[3].content: changed"]
    # A recording of agentbench's own holds the exact text the tool gave: compared as text.
    assert paths(request_diff(recorded, respelled)) == ["messages[3].content: changed"]


def test_a_respelled_message_keeps_its_place_among_inserted_ones() -> None:
    """Messages are aligned by their parsed JSON, so one respelled beside an inserted one is
    not taken for a removed and an added message."""
    recorded = request(SYSTEM, USER, asked('{"city": "Paris"}'), told("21"))
    extra = {"role": "user", "content": "Also Oslo."}
    current = request(SYSTEM, USER, extra, asked('{"city":"Paris"}'), told("21"))
    assert paths(request_diff(recorded, current, OPENAI_V2)) == ["messages[2]: added"]


def test_a_malformed_entry_compares_everything() -> None:
    assert TraceSource.of({"imported_trace": "yes"}) is None
    hand_edited = TraceSource.of({"imported_trace": {"recorded_fields": "model"}})
    assert hand_edited is not None and hand_edited.recorded_fields is None


def cassette(source: TraceSource | None) -> Cassette:
    recorded = request(SYSTEM, USER, temperature=0)
    answer = ChatResponse(tool_calls=[ToolCall(name="get_weather", arguments='{"city": "P"}')])
    second = request(SYSTEM, USER, asked('{"city": "P"}'), told("21"), temperature=0)
    final = ChatResponse(text="21 degrees.")
    made = Cassette([Interaction.of(recorded, answer), Interaction.of(second, final)])
    if source is not None:
        made.update_info(imported_trace=source.as_info())
    return made


def replay(model: ReplayModel, *requests: dict[str, Any]) -> None:
    async def go() -> None:
        for sent in requests:
            await model.complete(sent)

    asyncio.run(go())


def test_replay_of_an_imported_trace_serves_the_app_s_requests_without_drift(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = ReplayModel(cassette(OPENAI_V2))
    first = request(SYSTEM, USER, temperature=0, tools=TOOLS, tool_choice="auto")
    second = request(
        SYSTEM,
        USER,
        asked('{"city": "P"}'),
        told("21"),
        temperature=0,
        tools=TOOLS,
        tool_choice="auto",
    )
    # Equal on what the trace recorded: told by the fingerprints alone, no diff is made.
    monkeypatch.setattr(replay_models, "request_diff", pytest.fail)
    replay(model, first, second)
    assert model.drifts == [] and model.uncompared == ["tools", "tool_choice"]


def test_replay_of_an_imported_trace_still_finds_a_changed_prompt() -> None:
    model = ReplayModel(cassette(OPENAI_V2))
    changed = request({"role": "system", "content": "Be brief."}, USER, temperature=0, tools=TOOLS)
    replay(model, changed)
    assert [paths(d.changes) for d in model.drifts] == [["messages[0].content: changed"]]


def test_a_recording_of_agentbench_s_own_compares_the_whole_request() -> None:
    model = ReplayModel(cassette(None))
    replay(model, request(SYSTEM, USER, temperature=0, tools=TOOLS))
    assert [paths(d.changes) for d in model.drifts] == [["tools: added"]]
    assert model.uncompared == []


def test_a_trace_s_whole_requests_are_fingerprinted_as_the_trace_knew_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """OpenInference kept `stream: true` in each body: the app's requests, never streamed
    at a boundary target, are told equal by their fingerprints alone — whether a call was
    first looked for among calls made at once (`prefer`) or not."""
    recorded = [request(SYSTEM, USER, tools=TOOLS, stream=True), request(SYSTEM, tools=TOOLS)]
    answers = [ChatResponse(text="a"), ChatResponse(text="b")]
    made = Cassette([Interaction.of(r, a) for r, a in zip(recorded, answers, strict=True)])
    made.update_info(imported_trace={"instrumentation": "openinference"})
    model = ReplayModel(made)
    monkeypatch.setattr(replay_models, "request_diff", pytest.fail)
    first = request(SYSTEM, USER, tools=TOOLS)
    assert model.prefer(first, [0, 1]) is None  # the next recorded call is asked it already
    replay(model, first, request(SYSTEM, tools=TOOLS))
    assert model.drifts == [] and model.uncompared == []
