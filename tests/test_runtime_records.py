"""Records the runtime builds without validating (`records.built`): what validation would give.

Events, scripted and replayed responses and tool results are built from values the runtime
made itself, sharing them (no copies) and one set of field names per kind. They must be the
records `cls(**fields)` gives — same fields, order, defaults and `model_fields_set` — and
stay independent records: assigning to one never shows on another.
"""

from __future__ import annotations

import copy
import pickle
import re
from typing import Any

from agentbench import Agent, Runner, ScriptedModel, ToolCall, tool
from agentbench.runtime.completions import parse_completion
from agentbench.runtime.events import EVENT_ADAPTER, ToolStarted
from agentbench.runtime.models import ChatResponse, Usage, to_response
from agentbench.runtime.records import built
from agentbench.runtime.tools import ResultKind, ToolResult


@tool(effect="read_only")
def lookup(n: int) -> dict[str, int]:
    """Look up item n."""
    return {"n": n}


@tool(effect="read_only")
def name_of(n: int) -> str:
    """The name of item n."""
    return f"item {n}"


async def _run() -> list[object]:
    script = [ToolCall("lookup", {"n": 1}), ToolCall("name_of", {"n": 2}), "done"]
    result = await Runner.run(
        Agent(name="a", tools=[lookup, name_of]), "go", model=ScriptedModel(script)
    )
    assert result.completed
    return result.events


def _validated(record: object) -> object:
    """The same record made by validation, from the same field values and fields set."""
    cls = type(record)
    given = {name: getattr(record, name) for name in record.model_fields_set}  # type: ignore[attr-defined]
    return cls(**given)


async def test_built_events_are_what_validation_gives() -> None:
    for event in await _run():
        again = _validated(event)
        assert again.model_dump(exclude={"ts"}) == event.model_dump(exclude={"ts"})  # type: ignore[attr-defined]
        assert list(again.__dict__) == list(event.__dict__)  # type: ignore[attr-defined]
        assert again.model_fields_set == event.model_fields_set  # type: ignore[attr-defined]
        dumped = event.model_dump(mode="json")  # type: ignore[attr-defined]
        assert EVENT_ADAPTER.validate_python(dumped).model_dump(mode="json") == dumped


async def test_built_events_share_the_conversation_instead_of_copying() -> None:
    # The events as the run built them (its hooks get those; its log keeps them packed).
    built_events: list[Any] = []
    script = [ToolCall("lookup", {"n": 1}), ToolCall("name_of", {"n": 2}), "done"]
    agent = Agent(name="a", tools=[lookup, name_of])
    await Runner.run(agent, "go", model=ScriptedModel(script), hooks=[built_events.append])
    started = [e for e in built_events if e.kind == "tool_started"]
    finished = [e for e in built_events if e.kind == "tool_finished"]
    for before, after in zip(started, finished, strict=True):
        assert before.arguments is after.arguments


async def test_assigning_to_a_built_event_changes_that_event_alone() -> None:
    first, second = [e for e in await _run() if isinstance(e, ToolStarted)]
    assert first.model_fields_set == second.model_fields_set
    first.tool = "renamed"
    first.kind = "tool_started"
    assert "kind" in first.model_fields_set
    assert "kind" not in second.model_fields_set
    assert second.tool == "name_of"


async def test_copies_and_pickles_of_built_records_are_independent() -> None:
    event = next(e for e in await _run() if isinstance(e, ToolStarted))
    for copied in (
        event.model_copy(update={"step": 9}),
        copy.copy(event),
        copy.deepcopy(event),
        pickle.loads(pickle.dumps(event)),
    ):
        assert type(copied.model_fields_set) is set
        copied.call_id = "other"
        assert event.call_id != "other"
        assert "step" not in event.model_fields_set or event.step != 9


def test_a_scripted_call_served_twice_gets_a_fresh_id_each_time() -> None:
    reused = ToolCall(name="lookup")  # arguments left to their default
    first, second = (to_response(reused, {"messages": []}, "m").tool_calls[0] for _ in "ab")
    for served in (first, second):
        assert re.fullmatch(r"call_[0-9a-f]{24}", served.id)
        assert served.model_fields_set == {"name", "id"}
        assert served.model_dump() == {**reused.model_dump(), "id": served.id}
    assert first.id != second.id and reused.id not in (first.id, second.id)
    fixed = ToolCall("lookup", "{}", id="c1")  # an id set by the script is kept
    assert to_response(fixed, {"messages": []}, "m").tool_calls[0].id == "c1"


def test_built_results_responses_and_usage_match_validation() -> None:
    usage = Usage(input_tokens=3, output_tokens=4) + Usage(output_tokens=1, estimated=True)
    assert usage == Usage(input_tokens=3, output_tokens=5, estimated=True)
    assert usage.model_fields_set == {"input_tokens", "output_tokens", "estimated"}
    result = built(ToolResult, {"kind": ResultKind.OK, "data": 1, "duration_ms": 0.5})
    assert result == ToolResult(kind=ResultKind.OK, data=1, duration_ms=0.5)
    for item in ["hi", ToolCall("lookup", {"n": 1}), [ToolCall("lookup", "{}", id="c1")]]:
        response = to_response(item, {"messages": []}, "m")
        assert _validated(response) == response
        assert _validated(response).model_fields_set == response.model_fields_set
    body = {
        "model": "m",
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": "c", "function": {"name": "lookup", "arguments": '{"n":1}'}}
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2},
    }
    parsed = parse_completion(body)
    assert parsed == ChatResponse.model_validate(_validated(parsed).model_dump())
    assert parsed.raw is body
    # Values of another type than the field's still go through validation, as before.
    body["usage"] = {"prompt_tokens": 5.0, "completion_tokens": 2}
    assert parse_completion(body).usage == Usage(input_tokens=5, output_tokens=2)
