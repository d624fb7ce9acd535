"""Requests share the run's message list (`MessageView`) and still behave as the lists they were.

Each model request of a run holds a view over one append-only conversation instead of its own
copy. What every consumer sees must not change: the messages as they were when the request was
made (whatever the run appends, truncates or compacts later), equality with lists, lists
wherever a request is serialized (pydantic dumps, cassettes, the SDK's HTTP body).
"""

from __future__ import annotations

import copy
import gc
import pickle
from pathlib import Path
from typing import Any

import orjson
import pytest
from pydantic import BaseModel

from agentbench import Agent, FunctionModel, Runner, ScriptedModel, ToolCall, tool
from agentbench.replay.cassette import Cassette
from agentbench.replay.drift import Fingerprinter, fingerprint, request_diff
from agentbench.replay.models import RecordingModel, ReplayModel
from agentbench.runtime.events import EVENT_ADAPTER, ModelRequest
from agentbench.runtime.memory import MemoryPolicy
from agentbench.runtime.message_view import MessageView, materialized

SYSTEM = {"role": "system", "content": "Be brief."}


def conversation(n: int) -> list[dict[str, Any]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(n)]


# -- the view on its own -------------------------------------------------------------------


def test_a_view_is_the_list_it_stands_for_and_ignores_later_appends() -> None:
    base = conversation(3)
    view = MessageView(SYSTEM, base)
    expected = [SYSTEM, *base]
    base.append({"role": "user", "content": "later"})
    assert view == expected and expected == view and (view != expected) is False
    assert len(view) == 4 and list(view) == expected and list(reversed(view)) == expected[::-1]
    assert view[0] is SYSTEM and view[-1] is base[2] and view[1:3] == base[:2]
    assert type(view[1:]) is list
    with pytest.raises(IndexError):
        view[4]
    assert base[3] not in view and view.index(base[1]) == 2 and view.count(SYSTEM) == 1
    assert view != [SYSTEM, *base] and view != tuple(expected)
    assert view + [SYSTEM] == [*expected, SYSTEM]  # noqa: RUF005 - the operator under test
    assert [SYSTEM] + view == [SYSTEM, *expected]  # noqa: RUF005
    assert MessageView(None, base[:3]) == base[:3] == MessageView(None, base)[:3]
    assert MessageView(SYSTEM, base) != view  # four messages now, not three


def test_copies_and_pickles_of_a_view_are_independent_lists() -> None:
    base = conversation(2)
    view = MessageView(SYSTEM, base)
    shallow, deep, unpickled = (
        copy.copy(view),
        copy.deepcopy(view),
        pickle.loads(pickle.dumps(view)),
    )
    assert all(type(c) is list and c == view for c in (shallow, deep, unpickled))
    assert shallow[1] is base[0] and deep[1] is not base[0]
    with pytest.raises(TypeError):
        hash(view)
    with pytest.raises(TypeError):
        view[0] = SYSTEM  # type: ignore[index]
    assert repr(view) == "MessageView(3 messages)"


def test_a_request_event_dumps_and_serializes_its_view_as_a_list() -> None:
    base = conversation(2)
    request = {"model": "m", "messages": MessageView(SYSTEM, base), "temperature": 0}
    event = ModelRequest(run_id="r", seq=1, agent="a", step=1, request=request)
    listed = {**request, "messages": [SYSTEM, *base]}
    dumped = event.model_dump()
    assert type(dumped["request"]["messages"]) is list and dumped["request"] == listed
    assert event.model_dump(mode="json")["request"] == listed
    assert orjson.loads(event.model_dump_json())["request"] == listed
    assert EVENT_ADAPTER.validate_json(event.model_dump_json()).request == listed
    assert materialized(request) == listed and type(materialized(request)["messages"]) is list
    assert list(materialized(request)) == list(request)  # key order kept
    assert materialized(listed) is listed
    assert orjson.dumps(materialized(request)) == orjson.dumps(listed)


def test_drift_and_fingerprints_see_a_view_as_its_list() -> None:
    base = conversation(4)
    view_request = {"model": "m", "messages": MessageView(SYSTEM, base)}
    list_request = {"model": "m", "messages": [SYSTEM, *base]}
    assert fingerprint(view_request) == fingerprint(list_request)
    incremental = Fingerprinter()
    assert incremental(view_request) == fingerprint(list_request)
    changed = {"model": "m", "messages": [SYSTEM, *base[:3], {**base[3], "content": "x"}]}
    assert request_diff(list_request, view_request) == []
    paths = [c.path for c in request_diff(changed, view_request)]
    assert paths == ["messages[4].content"]


# -- whole runs ----------------------------------------------------------------------------


@tool(effect="read_only")
def lookup(key: str) -> str:
    """Look up a key."""
    return f"value of {key}: " + "x" * (300 if key.startswith("long") else 5)


class Answer(BaseModel):
    value: int


def snapshotting(script: list[Any]) -> tuple[FunctionModel, list[list[dict[str, Any]]]]:
    """A model answering from `script` that deep-copies the messages of each call as sent."""
    seen: list[list[dict[str, Any]]] = []
    items = list(script)

    def answer(request: dict[str, Any]) -> Any:
        seen.append(copy.deepcopy(list(request["messages"])))
        return items.pop(0)

    return FunctionModel(answer, name="snap"), seen


def request_events(result: Any) -> list[Any]:
    return [e for e in result.all_events if e.kind == "model_request"]


def shared_lists(requests: list[dict[str, Any]]) -> int:
    """How many distinct lists the requests' views are windows on."""
    return len(
        {
            id(ref)
            for request in requests
            for ref in gc.get_referents(request["messages"])
            if type(ref) is list
        }
    )


async def test_every_request_keeps_what_was_sent_through_corrections_and_truncation() -> None:
    # A long tool result is cut by memory, a final answer fails validation once and is
    # corrected: every request must still show exactly what the model was sent then.
    model, seen = snapshotting(
        [
            ToolCall("lookup", {"key": "long1"}),
            [ToolCall("lookup", {"key": "a"}), ToolCall("lookup", {"key": "long2"})],
            "not json",
            '{"value": 3}',
        ]
    )
    agent = Agent(
        name="a",
        tools=[lookup],
        output_type=Answer,
        memory=MemoryPolicy(tool_result_chars=100),
        limits={"max_iterations": 10},
    )
    result = await Runner.run(agent, "find it", model=model)
    assert result.completed and result.output == Answer(value=3)
    events = request_events(result)
    assert [e.request["messages"] for e in events] == seen
    assert [r["messages"] for r in model.requests] == seen
    assert any("truncated" in str(m.get("content")) for m in seen[-1])
    assert shared_lists([e.request for e in events]) == 1  # one conversation, shared
    assert shared_lists(model.requests) == 1


async def test_requests_before_a_compaction_keep_the_conversation_they_had() -> None:
    calls = [ToolCall("lookup", {"key": f"k{i}"}) for i in range(8)]
    model, seen = snapshotting([*calls, "done"])
    agent = Agent(
        name="a",
        tools=[lookup],
        memory=MemoryPolicy(max_messages=6, keep_recent=1),
        limits={"max_iterations": 12},
    )
    result = await Runner.run(agent, "look them up", model=model)
    assert result.completed
    assert any(e.kind == "memory_decision" for e in result.events)
    assert [e.request["messages"] for e in request_events(result)] == seen
    assert [r["messages"] for r in model.requests] == seen


async def test_a_run_stopped_mid_turn_closes_its_calls_without_changing_sent_requests() -> None:
    model, seen = snapshotting([ToolCall("lookup", {"key": "a"}), ToolCall("lookup", {"key": "b"})])
    agent = Agent(name="a", tools=[lookup], limits={"max_iterations": 2})
    result = await Runner.run(agent, "go", model=model)
    assert result.stop_reason == "max_iterations"
    assert [e.request["messages"] for e in request_events(result)] == seen
    assert len(seen[-1]) == 4  # system, user, call a, result a — the closing came after


async def test_scripted_model_keeps_a_callers_list_as_it_was_at_the_call() -> None:
    model = ScriptedModel(["one", "two"])
    messages = [{"role": "user", "content": "hi"}]
    await model.complete({"model": "m", "messages": messages})
    messages.append({"role": "user", "content": "again"})
    await model.complete({"model": "m", "messages": messages})
    assert model.requests[0]["messages"] == [{"role": "user", "content": "hi"}]
    assert len(model.requests[1]["messages"]) == 2


async def test_a_recorded_cassette_holds_lists_and_replays_without_drift(tmp_path: Path) -> None:
    script = [ToolCall("lookup", {"key": "a"}), ToolCall("lookup", {"key": "b"}), "done"]
    recorder = RecordingModel(ScriptedModel(script, name="rec"))
    agent = Agent(name="a", tools=[lookup], limits={"max_iterations": 5})
    result = await Runner.run(agent, "go", model=recorder)
    assert result.completed
    for interaction, event in zip(
        recorder.cassette.interactions, request_events(result), strict=True
    ):
        assert type(interaction.request["messages"]) is list
        assert interaction.request == event.request
    path = recorder.cassette.save(tmp_path / "c.yaml")
    loaded = Cassette.load(path)
    assert [i.request for i in loaded.interactions] == [e.request for e in request_events(result)]
    replay = ReplayModel(loaded, strict=True)
    again = await Runner.run(agent, "go", model=replay)
    assert again.completed and replay.drifts == []
