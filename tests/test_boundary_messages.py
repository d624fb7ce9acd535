"""Anthropic's Messages API at the boundary, through the real `anthropic` SDK.

A function on the anthropic SDK (sync, async, streaming) is recorded against the bundled test
server through the loopback server and the forwarder, then replayed from the cassette: the
replay serves the recorded answers verbatim (their message ids, their stream of events), its
requests normalize to the chat shape agentbench compares (tool_use blocks as tool calls,
tool_result blocks as tool messages, `is_error` kept), parallel tool use gives one tool call
per block, and a call the recording cannot answer reaches the SDK as its BadRequestError
carrying agentbench's reason.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

anthropic = pytest.importorskip("anthropic")

from agentbench.boundary.forward import WireForwarder  # noqa: E402
from agentbench.boundary.messages_api import (  # noqa: E402
    message_body,
    parse_answer,
    sse_text,
    stream_events,
)
from agentbench.boundary.messages_request import normalize_request  # noqa: E402
from agentbench.boundary.session import run_turns  # noqa: E402
from agentbench.boundary.target import CallableTarget  # noqa: E402
from agentbench.boundary.wire import MESSAGES, wire_for  # noqa: E402
from agentbench.replay.cassette import Cassette  # noqa: E402
from agentbench.replay.models import RecordingModel, ReplayModel  # noqa: E402
from agentbench.runtime.models import ChatResponse, ToolCall, Usage  # noqa: E402
from agentbench.testing import OpenAICompatibleServer  # noqa: E402

TOOLS = [
    {
        "name": "weather",
        "description": "The weather now in a city.",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
]
TEMPERATURES = {"Paris": 18, "Oslo": 4}


def weather(city: str) -> dict[str, Any]:
    if city not in TEMPERATURES:
        raise LookupError(f"no station in {city}")
    return {"city": city, "temp_c": TEMPERATURES[city]}


def _tool_results(content: list[Any]) -> list[dict[str, Any]]:
    """Each tool_use block run, its result (or its error, `is_error`) as a tool_result block."""
    results = []
    for block in content:
        if block.type != "tool_use":
            continue
        try:
            text, failed = orjson.dumps(weather(**block.input)).decode(), False
        except LookupError as exc:
            text, failed = str(exc), True
        result = {"type": "tool_result", "tool_use_id": block.id, "content": text}
        results.append({**result, "is_error": True} if failed else result)
    return results


def weather_agent(input: str, target: Any) -> dict[str, Any]:
    """Anthropic's tool loop, as its docs show it; returns the answer and the message ids."""
    with anthropic.Anthropic(
        base_url=target.anthropic_base_url, api_key=target.api_key, max_retries=0
    ) as client:
        return _weather_loop(client, input, target)


def _weather_loop(client: anthropic.Anthropic, input: str, target: Any) -> dict[str, Any]:
    stream = bool(target.variables.get("stream"))
    messages: list[dict[str, Any]] = [{"role": "user", "content": input}]
    ids = []
    for _ in range(4):
        settings = {"model": target.model, "max_tokens": 256, "system": "You report weather."}
        if stream:
            with client.messages.stream(messages=messages, tools=TOOLS, **settings) as events:
                answer = events.get_final_message()
        else:
            answer = client.messages.create(messages=messages, tools=TOOLS, **settings)
        ids.append(answer.id)
        if answer.stop_reason != "tool_use":
            text = "".join(b.text for b in answer.content if b.type == "text")
            return {"text": text, "ids": ids}
        messages.append({"role": "assistant", "content": answer.content})
        messages.append({"role": "user", "content": _tool_results(answer.content)})
    return {"text": "gave up", "ids": ids}


async def async_weather_agent(input: str, target: Any) -> dict[str, Any]:
    async with anthropic.AsyncAnthropic(
        base_url=target.anthropic_base_url, api_key=target.api_key, max_retries=0
    ) as client:
        answer = await client.messages.create(
            model=target.model,
            max_tokens=64,
            messages=[{"role": "user", "content": input}],
        )
    return {"text": answer.content[0].text, "ids": [answer.id]}


def asks_twice(input: str, target: Any) -> str:
    with anthropic.Anthropic(
        base_url=target.anthropic_base_url, api_key=target.api_key, max_retries=0
    ) as client:
        for question in (input, input + " And tomorrow?"):
            try:
                client.messages.create(
                    model=target.model,
                    max_tokens=64,
                    messages=[{"role": "user", "content": question}],
                )
            except anthropic.BadRequestError as exc:
                # The SDK's own reading of Anthropic's error shape: the body's error.message.
                body = exc.body
                return f"{type(exc).__name__} ({body['type']}): {body['error']['message']}"
    return "both answered"


PARALLEL = [
    [
        ToolCall(name="weather", arguments='{"city": "Paris"}', id="toolu_paris"),
        ToolCall(name="weather", arguments='{"city": "Atlantis"}', id="toolu_atlantis"),
    ],
    "Paris is 18 C; Atlantis has no station.",
]


def _run(function: Any, model: Any, input: str, variables: dict[str, Any]) -> Any:
    target = CallableTarget.of(function, where="", model="claude-test")

    async def go() -> Any:
        try:
            return await run_turns(target, model, [input], variables=variables)
        finally:
            await model.aclose() if hasattr(model, "aclose") else None

    return asyncio.run(go())


def _record(
    function: Any, script: list[Any], input: str, variables: dict[str, Any]
) -> tuple[Any, Cassette, OpenAICompatibleServer]:
    with OpenAICompatibleServer(script) as server:
        forwarder = WireForwarder(
            "claude-test",
            anthropic_base_url=server.anthropic_base_url,
            anthropic_api_key="the-users-key",
        )
        recording = RecordingModel(forwarder)
        results = _run(function, recording, input, variables)
    return results, recording.cassette, server


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_parallel_tool_use_and_a_tool_error_record_and_replay_verbatim(stream: bool) -> None:
    variables = {"stream": stream}
    recorded, cassette, server = _record(weather_agent, PARALLEL, "Paris and Atlantis?", variables)
    output = recorded[0].output
    assert output["text"] == "Paris is 18 C; Atlantis has no station."
    # Forwarded with the user's key and the client's API version, never the loopback key.
    sent = server.requests[0]
    assert sent.path == "/v1/messages"
    assert sent.headers["x-api-key"] == "the-users-key"
    assert sent.headers["anthropic-version"]
    # What is compared: tool_use blocks as tool calls, tool_result blocks as tool messages.
    second = cassette.interactions[1].request
    assert second["messages"][0] == {"role": "system", "content": "You report weather."}
    assert [c["function"] for c in second["messages"][2]["tool_calls"]] == [
        {"name": "weather", "arguments": '{"city":"Paris"}'},
        {"name": "weather", "arguments": '{"city":"Atlantis"}'},
    ]
    assert second["messages"][3:] == [
        {"role": "tool", "tool_call_id": "toolu_paris", "content": '{"city":"Paris","temp_c":18}'},
        {
            "role": "tool",
            "tool_call_id": "toolu_atlantis",
            "content": "no station in Atlantis",
            "is_error": True,
        },
    ]
    finished = {e.call_id: e.result for e in recorded[0].events if e.kind == "tool_finished"}
    assert finished["toolu_paris"].kind == "ok"
    # Sent back with is_error: the tool's error in the trajectory, its text as the model saw it.
    assert finished["toolu_atlantis"].kind == "system_error"
    assert finished["toolu_atlantis"].error == "no station in Atlantis"

    replay = ReplayModel(cassette)
    replayed = _run(weather_agent, replay, "Paris and Atlantis?", variables)
    assert replayed[0].output == output  # the recorded message ids: served verbatim
    assert replay.drifts == []
    assert recorded[0].usage == replayed[0].usage
    assert recorded[0].usage.input_tokens > 0


def test_a_recording_streamed_or_not_answers_either_way() -> None:
    _, cassette, _ = _record(weather_agent, PARALLEL, "Paris and Atlantis?", {"stream": True})
    replay = ReplayModel(cassette)
    replayed = _run(weather_agent, replay, "Paris and Atlantis?", {"stream": False})
    assert replayed[0].output["text"] == "Paris is 18 C; Atlantis has no station."
    assert replay.drifts == []  # whether a call streams is not what it asks


def test_the_async_client_is_recorded_and_replayed() -> None:
    recorded, cassette, _ = _record(async_weather_agent, ["Mild."], "Weather in Oslo?", {})
    replayed = _run(async_weather_agent, ReplayModel(cassette), "Weather in Oslo?", {})
    assert replayed[0].output == recorded[0].output
    assert recorded[0].output["text"] == "Mild."


def test_a_call_the_recording_lacks_is_the_sdk_s_bad_request_with_agentbench_s_reason() -> None:
    _, cassette, _ = _record(async_weather_agent, ["Mild."], "Weather in Oslo?", {})
    results = _run(asks_twice, ReplayModel(cassette), "Weather in Oslo?", {})
    said = results[0].output
    assert said.startswith("BadRequestError (error): agentbench: ")  # Anthropic's shape
    assert "nearest: #1" in said and "And tomorrow?" in said


def test_normalizing_a_messages_request() -> None:
    body = {
        "model": "claude-test",
        "max_tokens": 512,
        "temperature": 0.2,
        "stream": True,
        "metadata": {"user_id": "u-1"},
        "stop_sequences": ["END"],
        "system": [{"type": "text", "text": "Be brief."}],
        "tools": TOOLS,
        "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Paris?"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Looking."},
                    {"type": "tool_use", "id": "t1", "name": "weather", "input": {"city": "P"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": [{"type": "text", "text": "18"}],
                        "is_error": False,
                    },
                    {"type": "text", "text": "Thanks."},
                ],
            },
        ],
    }
    assert normalize_request(body) == {
        "model": "claude-test",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Paris?"},
            {
                "role": "assistant",
                "content": "Looking.",
                "tool_calls": [
                    {
                        "id": "t1",
                        "type": "function",
                        "function": {"name": "weather", "arguments": '{"city":"P"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "t1", "content": "18"},
            {"role": "user", "content": "Thanks."},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "weather",
                    "description": "The weather now in a city.",
                    "parameters": TOOLS[0]["input_schema"],
                },
            }
        ],
        "tool_choice": "required",
        "parallel_tool_calls": False,
        "stop": ["END"],
        "max_tokens": 512,
        "temperature": 0.2,
        "metadata": {"user_id": "u-1"},
    }


def test_the_messages_path_is_told_from_the_others() -> None:
    assert wire_for("/v1/messages") is MESSAGES
    assert wire_for("/messages?beta=true") is MESSAGES
    assert wire_for("/v1/chat/completions") is not MESSAGES
    assert wire_for("/v1/messages/count_tokens") is None
    assert wire_for("/v1/threads/thread_1/messages") is None  # OpenAI's Assistants API


def test_an_answer_reads_back_as_it_was_written_json_and_sse() -> None:
    response = ChatResponse(
        text="Two calls.",
        tool_calls=[
            ToolCall(name="weather", arguments='{"city":"Paris"}', id="toolu_1"),
            ToolCall(name="weather", arguments='{"city":"Oslo"}', id="toolu_2"),
        ],
        finish_reason="tool_calls",
        usage=Usage(input_tokens=30, output_tokens=12),
    )
    body = message_body(response, "claude-test", message_id="msg_1")
    assert body["stop_reason"] == "tool_use"
    assert [b["type"] for b in body["content"]] == ["text", "tool_use", "tool_use"]
    for content_type, payload in (
        ("application/json", orjson.dumps(body)),
        ("text/event-stream", sse_text(stream_events(body)).encode()),
    ):
        parsed = parse_answer(content_type, payload, {})
        assert (parsed.text, parsed.tool_calls, parsed.finish_reason, parsed.usage) == (
            response.text,
            response.tool_calls,
            "tool_calls",
            response.usage,
        )
    text = sse_text(stream_events(body))
    assert text.startswith("event: message_start\ndata: ")
    assert "event: message_stop\n" in text


def test_a_stream_cut_before_message_stop_has_no_stop_reason() -> None:
    body = message_body(ChatResponse(text="half an answer"), "m", message_id="msg_1")
    events = stream_events(body)[:-2]  # no message_delta, no message_stop
    parsed = parse_answer("text/event-stream", sse_text(events).encode(), {})
    assert parsed.text == "half an answer"
    assert parsed.finish_reason is None


def test_cache_tokens_count_as_input() -> None:
    body = message_body(ChatResponse(text="hi"), "m", message_id="msg_1")
    body["usage"] = {
        "input_tokens": 10,
        "cache_read_input_tokens": 100,
        "cache_creation_input_tokens": 5,
        "output_tokens": 3,
    }
    parsed = parse_answer("application/json", orjson.dumps(body), {})
    assert parsed.usage == Usage(input_tokens=115, output_tokens=3)


def test_a_messages_request_the_server_cannot_read_is_answered_in_anthropic_s_shape() -> None:
    import httpx2

    from agentbench.boundary.server import BoundaryServer
    from agentbench.boundary.session import _Served

    async def go() -> list[Any]:
        served = _Served(ReplayModel(Cassette()))
        async with BoundaryServer(served.answer) as server:
            root = server.base_url.removesuffix("/v1")
            async with httpx2.AsyncClient() as client:
                not_json = await client.post(root + "/v1/messages", content=b"{nope")
                no_turn = await client.post(root + "/v1/messages", json={"messages": []})
        return [not_json.status_code, not_json.json(), no_turn.status_code, no_turn.json()]

    not_json_status, not_json, no_turn_status, no_turn = asyncio.run(go())
    assert not_json_status == 400 and no_turn_status == 409
    for body in (not_json, no_turn):
        assert body["type"] == "error"
        assert body["error"]["type"] == "invalid_request_error"
    assert not_json["error"]["message"].startswith("the request body is not JSON")


def test_the_test_server_answers_the_messages_api_with_faults_in_anthropic_s_shape() -> None:
    from agentbench.testing.server import HTTPFault

    script = [HTTPFault(429, "slow down", headers={"retry-after": "0"}), "Recovered."]
    with OpenAICompatibleServer(script) as server:
        asked = {"model": "m", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
        with anthropic.Anthropic(
            base_url=server.anthropic_base_url, api_key="k", max_retries=0
        ) as client:
            with pytest.raises(anthropic.RateLimitError) as refused:
                client.messages.create(**asked)
            answer = client.messages.create(**asked)
    assert refused.value.body == {
        "type": "error",
        "error": {"type": "injected", "message": "slow down"},
    }
    assert (answer.content[0].text, answer.stop_reason) == ("Recovered.", "end_turn")
    assert server.requests[0].path == "/v1/messages"


def test_a_secret_split_over_a_messages_stream_is_masked_in_the_cassette(tmp_path: Any) -> None:
    from agentbench.replay.cassette import Interaction
    from agentbench.trace.redaction.redactor import Redactor
    from agentbench.trace.redaction.rules import MASK

    token, password = "hdr-3Sd6Fg9Hj2Kl5Zx8", "pw-9Qe4Rt7Yu2Io5Pa8"
    answer = ChatResponse(
        text=f"use Bearer {token} now",
        tool_calls=[ToolCall(name="login", arguments=f'{{"password":"{password}"}}', id="t1")],
        finish_reason="tool_calls",
    )
    body = message_body(answer, "m", message_id="msg_1")
    events = sse_text(stream_events(body, fragment_chars=4)).encode()
    streamed = parse_answer("text/event-stream", events, {})
    request = {"model": "m", "messages": [{"role": "user", "content": "log in"}]}
    path = Cassette([Interaction.of(request, streamed)]).save(
        tmp_path / "c.yaml", redactor=Redactor(environ={})
    )
    written = path.read_text()
    assert token[:8] not in written and password[:8] not in written
    (replayed,) = Cassette.load(path).interactions
    assert replayed.uri.endswith("/v1/messages")
    served = replayed.response()  # still Anthropic's stream, the secrets masked whole
    assert served.text == f"use Bearer {MASK} now"
    assert orjson.loads(served.tool_calls[0].arguments) == {"password": MASK}
