"""The replay fingerprint, computed incrementally over a session, equals the whole hash of each
request: whatever the conversation does between steps (grow, get compacted into a new list,
change its system message, come as a list or as a view, be re-parsed from a file)."""

from __future__ import annotations

import copy

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from agentbench.replay.cassette import Cassette, Interaction
from agentbench.replay.drift import Fingerprinter, fingerprint
from agentbench.replay.models import ReplayModel
from agentbench.runtime.message_view import MessageView
from agentbench.runtime.models import ChatResponse, ToolCall

TOOLS = [{"type": "function", "function": {"name": "step", "parameters": {"type": "object"}}}]


def _exchange(n: int) -> list[dict]:
    call = {
        "id": f"call_{n}",
        "type": "function",
        "function": {"name": "step", "arguments": orjson.dumps({"n": n}).decode()},
    }
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"call_{n}", "content": str(n + 1)},
    ]


OPERATIONS = st.lists(
    st.sampled_from(
        ["grow", "grow", "grow", "same", "compact", "edit", "system", "as_list", "reparse"]
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=150, deadline=None)
@given(OPERATIONS)
def test_incremental_fingerprints_equal_whole_ones(operations: list[str]) -> None:
    system = {"role": "system", "content": "Count."}
    conversation: list[dict] = [{"role": "user", "content": "count"}]
    incremental = Fingerprinter()
    for step, operation in enumerate(operations):
        messages: object
        if operation == "grow":
            conversation.extend(_exchange(step))
        elif operation == "compact":
            # Memory replaces the list: an old message gone, a summary in its place.
            conversation = [
                conversation[0],
                {"role": "user", "content": f"summary {step}"},
                *conversation[2:],
            ]
        elif operation == "edit":
            # A new list of the same length whose middle message differs by value only.
            conversation = [*conversation]
            conversation[len(conversation) // 2] = {"role": "user", "content": f"edit {step}"}
        elif operation == "system":
            system = {"role": "system", "content": f"Count. (step {step})"}
        messages = MessageView(system, conversation)
        if operation == "as_list":
            messages = [system, *conversation]
        elif operation == "reparse":
            messages = orjson.loads(orjson.dumps([system, *conversation]))
        request = {"model": "m", "messages": messages, "tools": TOOLS, "temperature": 0}
        assert incremental(request) == fingerprint(copy.deepcopy(materialize(request)))


def materialize(request: dict) -> dict:
    messages = request["messages"]
    return {**request, "messages": list(messages)}


def test_a_view_extending_the_last_one_hashes_only_what_is_new() -> None:
    conversation: list[dict] = [{"role": "user", "content": "count"}]
    system = {"role": "system", "content": "Count."}
    incremental = Fingerprinter()
    first = MessageView(system, conversation)
    incremental({"model": "m", "messages": first})
    conversation.extend(_exchange(0))
    second = MessageView(system, conversation)
    assert second.extends(first) and not first.extends(second)
    # Had the known prefix been re-read, this message would be hashed by its new content.
    conversation[0]["content"] = "changed after it was hashed"
    assert incremental({"model": "m", "messages": second}) == fingerprint(
        {
            "model": "m",
            "messages": [system, {"role": "user", "content": "count"}, *_exchange(0)],
        }
    )


def test_views_of_different_lists_or_with_and_without_system_do_not_extend() -> None:
    conversation = [{"role": "user", "content": "a"}]
    system = {"role": "system", "content": "s"}
    view = MessageView(system, conversation)
    assert not MessageView(system, [*conversation]).extends(view)
    assert not MessageView(None, conversation).extends(view)
    assert MessageView({"role": "system", "content": "other"}, conversation).extends(view)


def test_scalars_of_equal_value_but_different_type_keep_different_fingerprints() -> None:
    incremental = Fingerprinter()
    seen = {incremental({"model": "m", "temperature": value}) for value in (1, 1.0, True)}
    assert len(seen) == 3


async def test_a_cassette_without_stored_fingerprints_replays_and_still_finds_drift() -> None:
    system = {"role": "system", "content": "Count."}
    conversation: list[dict] = [{"role": "user", "content": "count"}]
    interactions = []
    for n in range(4):
        request = {"model": "m", "messages": [system, *copy.deepcopy(conversation)]}
        call = ToolCall("step", {"n": n}, id=f"call_{n}")
        interactions.append(Interaction.of(request, ChatResponse(tool_calls=[call])))
        conversation.extend(_exchange(n))
    cassette = Cassette(interactions)
    assert "fingerprints" not in cassette.info

    faithful = ReplayModel(cassette)
    conversation = [{"role": "user", "content": "count"}]
    for n in range(4):
        await faithful.complete({"model": "m", "messages": MessageView(system, conversation)})
        conversation.extend(_exchange(n))
    assert faithful.drifts == []

    drifting = ReplayModel(cassette)
    conversation = [{"role": "user", "content": "count"}]
    for n in range(4):
        await drifting.complete({"model": "m", "messages": MessageView(system, conversation)})
        conversation.extend(_exchange(n))
        if n == 1:
            conversation[-1] = {**conversation[-1], "content": "a different result"}
    assert [drift.index for drift in drifting.drifts] == [2, 3]
    assert drifting.drifts[0].changes[0].path == "messages[5].content"
