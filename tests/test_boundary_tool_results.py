"""Which tool result a boundary target's request carries back, for which call.

Each request carries the whole conversation again; the results are read from its end back to
where the waiting calls were asked (so a long session is not read whole at every call). These
pin what that reading finds: a call id a model uses twice gets its second result, and a call
waiting while a sub-agent talks to the model is still answered when its caller resumes.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agentbench.boundary.traffic import TurnTraffic
from agentbench.runtime.events import ToolFinished
from agentbench.runtime.models import ChatResponse, ToolCall

SYSTEM = {"role": "system", "content": "You help."}
SUB_SYSTEM = {"role": "system", "content": "You review."}


def asked(call_id: str, name: str = "lookup") -> dict[str, Any]:
    call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def result(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def calls(call_id: str, name: str = "lookup") -> ChatResponse:
    return ChatResponse(tool_calls=[ToolCall(name, "{}", id=call_id)], finish_reason="tool_calls")


async def play(exchanges: list[tuple[list[dict[str, Any]], ChatResponse]]) -> list[Any]:
    """Requests and answers through one turn's traffic; the tool results it saw."""
    traffic = TurnTraffic("agent", "hi", model="m", context={}, hooks=[])
    await traffic.start()
    for messages, answer in exchanges:
        request = {"model": "m", "messages": messages}
        step = await traffic.request(request)
        await traffic.response(step, traffic.agent, answer)
    return [(e.call_id, e.result.data) for e in traffic.events if isinstance(e, ToolFinished)]


def test_a_call_id_used_twice_gets_the_result_sent_for_its_second_use() -> None:
    user = {"role": "user", "content": "twice"}
    first = [SYSTEM, user]
    second = [*first, asked("call_0"), result("call_0", "one")]
    third = [*second, asked("call_0"), result("call_0", "two")]
    done = ChatResponse(text="done", finish_reason="stop")
    seen = asyncio.run(play([(first, calls("call_0")), (second, calls("call_0")), (third, done)]))
    assert seen == [("call_0", "one"), ("call_0", "two")]


def test_a_call_waiting_on_a_sub_agent_is_answered_when_its_caller_resumes() -> None:
    user = {"role": "user", "content": "is T-9 fraud?"}
    review = [SUB_SYSTEM, {"role": "user", "content": "review T-9"}]
    sub_done = ChatResponse(text="likely fraud", finish_reason="stop")
    resumed = [SYSTEM, user, asked("call_r", "review"), result("call_r", "likely fraud")]
    seen = asyncio.run(
        play(
            [
                ([SYSTEM, user], calls("call_r", "review")),
                (review, calls("call_d", "details")),
                ([*review, asked("call_d", "details"), result("call_d", "T-9: 612 EUR")], sub_done),
                (resumed, ChatResponse(text="It is likely fraud.", finish_reason="stop")),
            ]
        )
    )
    assert seen == [("call_d", "T-9: 612 EUR"), ("call_r", "likely fraud")]


def test_a_message_sent_again_is_the_one_first_seen_and_values_keep_their_json_type() -> None:
    async def requests() -> list[dict[str, Any]]:
        traffic = TurnTraffic("agent", "hi", model="m", context={}, hooks=[])
        await traffic.start()
        sent = []
        for flag in (True, True, 1, 1.0):
            # Each request parsed anew, as the server parses each body.
            messages = [dict(SYSTEM), {"role": "user", "content": "go", "flag": flag}]
            request = {"model": "m", "messages": messages}
            step = await traffic.request(request)
            await traffic.response(step, traffic.agent, ChatResponse(text="ok"))
            sent.append(request)
        return sent

    first, second, third, fourth = asyncio.run(requests())
    assert second["messages"][0] is first["messages"][0]
    assert second["messages"][1] is first["messages"][1]
    # Equal in Python, not on the wire: each keeps what was sent.
    assert [type(r["messages"][1]["flag"]) for r in (first, third, fourth)] == [bool, int, float]
    assert third["messages"][0] is first["messages"][0]
