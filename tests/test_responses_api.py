"""The OpenAI Responses API at the boundary: requests normalized to the chat shape, bodies and
event streams parsed and written, the bundled test server speaking it to the real openai SDK
and the real OpenAI Agents SDK, and cassettes holding Responses interactions beside chat ones.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from openai import AsyncOpenAI, OpenAI
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from agentbench import ChatResponse, ModelError, ToolCall, Usage
from agentbench.boundary import responses_api as api
from agentbench.replay.cassette import RESPONSES_URI, Cassette, CassetteError, Interaction
from agentbench.testing import CutStream, HTTPFault, OpenAICompatibleServer
from agentbench.trace.redaction.redactor import Redactor

WEATHER_TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Current weather.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    "strict": True,
}
EVENT = TypeAdapter(ResponseStreamEvent)


# -- requests -------------------------------------------------------------------------------
def test_a_whole_request_normalizes_to_the_chat_shape() -> None:
    body = {
        "model": "gpt-test",
        "instructions": "Be brief.",
        "input": [
            {"role": "developer", "content": "Use metric units."},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi"}]},
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "opaque"},
            {
                "type": "message",
                "id": "msg_1",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Checking.", "annotations": []}],
            },
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": "get_weather",
                "arguments": '{"city": "Paris"}',
            },
            {
                "type": "function_call",
                "call_id": "call_2",
                "name": "get_weather",
                "arguments": "{}",
            },
            {"type": "function_call_output", "call_id": "call_1", "output": "21C"},
            {
                "type": "function_call_output",
                "call_id": "call_2",
                "output": [
                    {"type": "input_text", "text": "25"},
                    {"type": "input_text", "text": "C"},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "And this?"},
                    {"type": "input_image", "image_url": "https://x/y.png", "detail": "low"},
                ],
            },
        ],
        "tools": [WEATHER_TOOL, {"type": "web_search"}],
        "tool_choice": {"type": "function", "name": "get_weather"},
        "stream": True,
        "stream_options": {"include_obfuscation": False},
        "temperature": 0.2,
        "max_output_tokens": 50,
        "parallel_tool_calls": True,
        "reasoning": {"effort": "low"},
        "store": False,
    }
    call_1 = {"id": "call_1", "type": "function", "function": {"name": "get_weather"}}
    call_2 = {"id": "call_2", "type": "function", "function": {"name": "get_weather"}}
    call_1["function"]["arguments"] = '{"city":"Paris"}'  # re-dumped compactly
    call_2["function"]["arguments"] = "{}"
    assert api.normalize_request(body) == {
        "model": "gpt-test",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "developer", "content": "Use metric units."},
            {"role": "user", "content": "Hi"},
            # The answer's text and its calls are one assistant message, as in chat.
            {"role": "assistant", "content": "Checking.", "tool_calls": [call_1, call_2]},
            {"role": "tool", "tool_call_id": "call_1", "content": "21C"},
            {"role": "tool", "tool_call_id": "call_2", "content": "25C"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "And this?"},
                    {"type": "image_url", "image_url": {"url": "https://x/y.png", "detail": "low"}},
                ],
            },
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Current weather.",
                    "parameters": WEATHER_TOOL["parameters"],
                    "strict": True,
                },
            },
            {"type": "web_search"},
        ],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "temperature": 0.2,
        "max_output_tokens": 50,
        "parallel_tool_calls": True,
        "reasoning": {"effort": "low"},
        "store": False,
    }


def test_text_input_is_one_user_message_and_calls_without_text_one_assistant_message() -> None:
    assert api.normalize_request({"model": "m", "input": "Hello"}) == {
        "model": "m",
        "messages": [{"role": "user", "content": "Hello"}],
    }
    calls = [
        {"type": "function_call", "call_id": f"call_{n}", "name": "f", "arguments": "{}"}
        for n in (1, 2)
    ]
    messages = api.normalize_request({"input": [{"role": "user", "content": "x"}, *calls]})[
        "messages"
    ]
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert messages[1]["content"] is None
    assert [c["id"] for c in messages[1]["tool_calls"]] == ["call_1", "call_2"]


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("auto", "auto"),
        ("required", "required"),
        ({"type": "function", "name": "f"}, {"type": "function", "function": {"name": "f"}}),
        (
            {"type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": "f"}]},
            {
                "type": "allowed_tools",
                "allowed_tools": {
                    "mode": "auto",
                    "tools": [{"type": "function", "function": {"name": "f"}}],
                },
            },
        ),
        ({"type": "web_search_preview"}, {"type": "web_search_preview"}),
    ],
)
def test_tool_choice_is_mapped_to_chat(choice: Any, expected: Any) -> None:
    assert api.normalize_request({"input": "x", "tool_choice": choice})["tool_choice"] == expected


def test_the_request_the_agent_sends_back_is_the_answer_it_got() -> None:
    """An answer written as a Responses body, sent back as input the way SDKs do (its output
    items, then the tools' outputs), normalizes to the assistant message chat would hold."""
    answer = ChatResponse(
        text="Let me look.",
        tool_calls=[ToolCall("get_weather", '{"city": "Rome"}', id="call_r")],
        reasoning="The user wants weather.",
    )
    body = api.response_body(answer, "m", response_id="resp_1")
    request = {
        "input": [
            {"role": "user", "content": "Weather in Rome?"},
            *body["output"],
            {"type": "function_call_output", "call_id": "call_r", "output": "18C"},
        ]
    }
    messages = api.normalize_request(request)["messages"]
    assert messages[1] == {
        "role": "assistant",
        "content": "Let me look.",
        "tool_calls": [
            {
                "id": "call_r",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city":"Rome"}'},
            }
        ],
    }
    assert messages[2] == {"role": "tool", "tool_call_id": "call_r", "content": "18C"}


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ({"input": 3}, "input: expected text or a list of input items"),
        ({"input": ["hi"]}, "input[0]: expected an input item"),
        ({"input": [{"type": "function_call", "name": "f"}]}, "input[0]: a function_call needs"),
        ({"input": [{"role": "user", "content": [7]}]}, "input[0].content[0]: expected a content"),
        ({"input": [{"type": "function_call_output", "output": "x"}]}, "input[0]: a function_"),
    ],
)
def test_a_malformed_request_names_where(body: dict[str, Any], where: str) -> None:
    with pytest.raises(api.ResponsesFormatError, match=where.replace("[", r"\[")):
        api.normalize_request(body)


# -- responses and streams -------------------------------------------------------------------
ANSWERS = [
    ChatResponse(text="Paris is sunny today.", usage=Usage(input_tokens=12, output_tokens=5)),
    ChatResponse(
        tool_calls=[
            ToolCall("get_weather", '{"city": "Paris"}', id="call_p"),
            ToolCall("get_weather", '{"city": "Rome"}', id="call_r"),
        ],
        usage=Usage(input_tokens=30, output_tokens=20),
    ),
    ChatResponse(
        text="One moment.",
        tool_calls=[ToolCall("get_weather", "{}", id="call_x")],
        reasoning="Need the weather first.",
        usage=Usage(input_tokens=3, output_tokens=4),
    ),
    ChatResponse(
        text="cut off", finish_reason="length", usage=Usage(input_tokens=1, output_tokens=2)
    ),
]


def _essence(response: ChatResponse) -> tuple[Any, ...]:
    return (
        response.text,
        [(c.name, c.arguments, c.id) for c in response.tool_calls],
        response.finish_reason,
        response.usage,
        response.model,
        response.reasoning,
    )


def _expected(answer: ChatResponse) -> tuple[Any, ...]:
    finish = answer.finish_reason or ("tool_calls" if answer.tool_calls else "stop")
    return _essence(answer.model_copy(update={"finish_reason": finish, "model": "m"}))


@pytest.mark.parametrize("answer", ANSWERS)
def test_a_body_written_is_the_sdks_response_and_parses_back(answer: ChatResponse) -> None:
    body = api.response_body(answer, "m", response_id="resp_42")
    Response.model_validate(body)  # every field the openai SDK requires, of its type
    parsed = api.parse_response(body)
    assert _essence(parsed) == _expected(answer)
    assert parsed.raw == body
    # Item ids come from the response id and the call ids: the same answer, the same body.
    again = api.response_body(answer, "m", response_id="resp_42")
    assert again["output"] == body["output"]
    assert {item["id"] for item in body["output"]} <= {"msg_42", "rs_42", "fc_p", "fc_r", "fc_x"}


@pytest.mark.parametrize("answer", ANSWERS)
def test_a_stream_written_is_the_apis_events_and_parses_back(answer: ChatResponse) -> None:
    events = api.stream_events(answer, "m", response_id="resp_42", fragment_chars=4)
    for event in events:
        EVENT.validate_python(event)  # each event as the openai SDK types it
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == (
        "response.incomplete" if answer.finish_reason == "length" else "response.completed"
    )
    deltas: list[str] = []
    parsed = api.parse_stream(api.parse_sse(api.sse_text(events)), deltas.append)
    assert _essence(parsed) == _expected(answer)
    assert "".join(deltas) == (answer.text or "")
    assert parsed.raw == {"object": api.RESPONSES_STREAM_OBJECT, "events": events}


def test_a_stream_without_its_final_response_is_read_from_its_deltas() -> None:
    answer = ANSWERS[2]
    events = api.stream_events(answer, "m", response_id="resp_1", fragment_chars=2)
    whole = [e for e in events if e["type"] != "response.completed"]
    parsed = api.parse_stream(whole)
    assert parsed.finish_reason is None  # cut: no terminal event said the answer was whole
    assert parsed.text == "One moment." and parsed.tool_calls[0].arguments == "{}"
    assert parsed.reasoning == "Need the weather first."


def test_a_stream_cut_short_is_marked_and_says_what_arrived() -> None:
    answer = ChatResponse(tool_calls=[ToolCall("get_weather", '{"city": "Paris"}', id="call_p")])
    events = api.stream_events(answer, "m", response_id="resp_1", fragment_chars=3)
    cut_at = next(i for i, e in enumerate(events) if e["type"].endswith("arguments.delta")) + 2
    accumulator = api.ResponsesStreamAccumulator()
    for event in events[:cut_at]:
        accumulator.add(event)
    assert not accumulator.finished
    assert accumulator.cut_short() == (
        f"the stream ended without response.completed after {cut_at} event(s) "
        "(1 unfinished tool call(s))"
    )
    request = {"model": "m", "messages": [{"role": "user", "content": "weather?"}]}
    response = accumulator.response(request)
    assert response.finish_reason is None
    assert response.tool_calls[0].arguments == '{"city'  # the two fragments that arrived
    assert response.usage.estimated  # nothing reported: estimated from the request
    assert api.ResponsesStreamAccumulator().cut_short().endswith("(an empty event stream)")


def test_a_failed_response_or_stream_raises_the_models_error() -> None:
    failed = {
        "object": "response",
        "status": "failed",
        "output": [],
        "error": {"code": "server_error", "message": "The model is overloaded."},
    }
    with pytest.raises(ModelError, match=r"server_error: The model is overloaded\."):
        api.parse_response(failed)
    with pytest.raises(ModelError, match=r"rate_limit: slow down"):
        api.parse_stream([{"type": "error", "code": "rate_limit", "message": "slow down"}])
    with pytest.raises(api.ResponsesFormatError, match="event-stream line 2 is not JSON"):
        api.parse_sse('event: response.created\ndata: {"type": \n\n')


# -- the test server, through the real openai SDK -------------------------------------------
def _weather_policy(request: dict[str, Any]) -> str | list[ToolCall]:
    """Ask for Paris and Rome at once; answer from the tools' results."""
    results = [m["content"] for m in request["messages"] if m["role"] == "tool"]
    if results:
        return "Weather: " + ", ".join(results)
    return [ToolCall("get_weather", {"city": "Paris"}), ToolCall("get_weather", {"city": "Rome"})]


@pytest.mark.server
def test_the_openai_sdk_creates_responses_and_the_policy_sees_chat() -> None:
    seen: list[dict[str, Any]] = []

    def policy(request: dict[str, Any]) -> Any:
        seen.append(request)
        return _weather_policy(request)

    with OpenAICompatibleServer(responder=policy) as server:
        client = OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
        first = client.responses.create(
            model="gpt-test",
            instructions="Be brief.",
            input="Paris and Rome?",
            tools=[WEATHER_TOOL],
        )
        calls = [item for item in first.output if item.type == "function_call"]
        assert [json.loads(c.arguments) for c in calls] == [{"city": "Paris"}, {"city": "Rome"}]
        follow_up = [
            {"role": "user", "content": "Paris and Rome?"},
            *[item.model_dump(exclude_none=True) for item in first.output],
            *[
                {"type": "function_call_output", "call_id": c.call_id, "output": out}
                for c, out in zip(calls, ("21C", "25C"), strict=True)
            ],
        ]
        second = client.responses.create(model="gpt-test", input=follow_up, tools=[WEATHER_TOOL])
        assert second.output_text == "Weather: 21C, 25C"
        assert second.usage is not None and second.usage.input_tokens > 0
        client.close()
    assert seen[0]["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Paris and Rome?"},
    ]
    assert seen[0]["tools"][0]["function"]["name"] == "get_weather"
    assert [m["role"] for m in seen[1]["messages"]] == ["user", "assistant", "tool", "tool"]
    # What was received is kept as it was sent.
    assert server.requests[0].path == "/v1/responses"
    assert server.requests[0].body["input"] == "Paris and Rome?"


@pytest.mark.server
def test_the_openai_sdk_streams_responses_both_ways() -> None:
    with OpenAICompatibleServer(["Sunny in Paris today.", "Rain in Rome."]) as server:
        client = OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
        stream = client.responses.create(model="gpt-test", input="Paris?", stream=True)
        events = [event.to_dict() for event in stream]
        parsed = api.parse_stream(events)
        assert parsed.text == "Sunny in Paris today." and parsed.finish_reason == "stop"
        with client.responses.stream(model="gpt-test", input="Rome?") as helper:
            deltas = [e.delta for e in helper if e.type == "response.output_text.delta"]
            final = helper.get_final_response()
        assert deltas == ["Rain ", "in ", "Rome."] and final.output_text == "Rain in Rome."
        client.close()
    assert server.requests[1].body["stream"] is True


@pytest.mark.server
def test_a_cut_responses_stream_is_detected() -> None:
    script = [CutStream(after_chunks=6, reply="This answer never arrives whole.")]
    with OpenAICompatibleServer(script) as server:
        client = OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
        events = [e.to_dict() for e in client.responses.create(model="m", input="x", stream=True)]
        client.close()
    assert [e["type"] for e in events][-1] == "response.output_text.delta"
    accumulator = api.ResponsesStreamAccumulator()
    for event in events:
        accumulator.add(event)
    assert accumulator.cut_short() == (
        "the stream ended without response.completed after 6 event(s) (12 characters of text)"
    )
    assert api.parse_stream(events).finish_reason is None


@pytest.mark.server
def test_faults_and_bad_requests_on_the_responses_route() -> None:
    import openai

    with OpenAICompatibleServer([HTTPFault(503, "overloaded")]) as server:
        client = OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
        with pytest.raises(openai.InternalServerError, match="overloaded"):
            client.responses.create(model="m", input="x")
        with pytest.raises(openai.BadRequestError, match=r"input\[0\]: a function_call needs"):
            client.responses.create(model="m", input=[{"type": "function_call", "name": "f"}])
        client.close()
    assert len(server.requests) == 2


# -- the real OpenAI Agents SDK ---------------------------------------------------------------
async def _run_weather_agent(server: OpenAICompatibleServer, streamed: bool) -> tuple[str, list]:
    agents = pytest.importorskip("agents")
    looked_up: list[str] = []

    @agents.function_tool
    def get_weather(city: str) -> str:
        """Current weather.

        Args:
            city: City name.
        """
        looked_up.append(city)
        return f"{city} {21 if city == 'Paris' else 25}C"

    client = AsyncOpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
    agent = agents.Agent(
        name="weather",
        instructions="Answer with the weather.",
        tools=[get_weather],
        model=agents.OpenAIResponsesModel("gpt-test", client),
    )
    config = agents.RunConfig(tracing_disabled=True)
    if streamed:
        result = agents.Runner.run_streamed(agent, "Paris and Rome?", run_config=config)
        async for _ in result.stream_events():
            pass
    else:
        result = await agents.Runner.run(agent, "Paris and Rome?", run_config=config)
    await client.close()
    return result.final_output, looked_up


@pytest.mark.server
@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_streamed"])
async def test_an_agents_sdk_agent_runs_parallel_tool_calls_end_to_end(streamed: bool) -> None:
    seen: list[dict[str, Any]] = []

    def policy(request: dict[str, Any]) -> Any:
        seen.append(request)
        return _weather_policy(request)

    with OpenAICompatibleServer(responder=policy) as server:
        output, looked_up = await _run_weather_agent(server, streamed)
    assert output == "Weather: Paris 21C, Rome 25C"
    assert looked_up == ["Paris", "Rome"]
    assert [r.body.get("stream", False) for r in server.requests] == [streamed, streamed]
    first, second = seen
    assert first["messages"][0] == {"role": "system", "content": "Answer with the weather."}
    assert first["tools"][0]["function"]["name"] == "get_weather"
    assistant, *results = second["messages"][2:]
    assert [json.loads(c["function"]["arguments"]) for c in assistant["tool_calls"]] == [
        {"city": "Paris"},
        {"city": "Rome"},
    ]
    assert [(r["role"], r["content"]) for r in results] == [
        ("tool", "Paris 21C"),
        ("tool", "Rome 25C"),
    ]
    assert [r["tool_call_id"] for r in results] == [c["id"] for c in assistant["tool_calls"]]


# -- cassettes ------------------------------------------------------------------------------
REQUEST = {"model": "m", "messages": [{"role": "user", "content": "Paris?"}]}


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
@pytest.mark.parametrize("streamed", [False, True], ids=["json", "sse"])
def test_a_cassette_keeps_a_responses_interaction(
    tmp_path: Path, suffix: str, streamed: bool
) -> None:
    answer = ANSWERS[2]
    if streamed:
        live = api.parse_stream(api.stream_events(answer, "m", response_id="resp_7"), None, REQUEST)
    else:
        live = api.parse_response(api.response_body(answer, "m", response_id="resp_7"), REQUEST)
    chat = ChatResponse(text="and a chat call beside it", finish_reason="stop", model="m")
    interactions = [Interaction.of(REQUEST, live), Interaction.of(REQUEST, chat)]
    assert interactions[0].uri == RESPONSES_URI and interactions[0].streamed is streamed
    path = Cassette(interactions).save(tmp_path / f"session{suffix}")
    loaded = Cassette.load(path)
    replayed = loaded.interactions[0].response()
    assert _essence(replayed) == _essence(live)
    assert replayed.raw == live.raw
    assert loaded.interactions[0].uri == RESPONSES_URI
    assert loaded.interactions[1].response().text == "and a chat call beside it"
    deltas: list[str] = []
    again = loaded.interactions[0].response(deltas.append)  # parsed anew, deltas as it streams
    assert _essence(again) == _essence(live)
    assert "".join(deltas) == ("One moment." if streamed else "")


def test_a_secret_split_over_a_responses_streams_fragments_is_masked(tmp_path: Path) -> None:
    secret = "Zy9Xw8Vu7Ts6Rq5"
    call = ToolCall("note", {"text": f"Bearer {secret}"}, id="call_n")
    events = api.stream_events(ChatResponse(tool_calls=[call]), "m", response_id="resp_s")
    live = api.parse_stream(events, None, REQUEST)
    saved = Cassette([Interaction.of(REQUEST, live)]).save(
        tmp_path / "s.yaml", redactor=Redactor(environ={})
    )
    text = saved.read_text()
    fragments = [e["delta"] for e in events if e["type"].endswith("arguments.delta")]
    inside = [piece for piece in fragments if piece in secret]  # no rule matches one alone
    assert inside and not [piece for piece in inside if piece in text]
    assert secret not in text
    replayed = Cassette.load(saved).interactions[0].response()
    assert secret not in replayed.tool_calls[0].arguments


def test_a_cassette_refuses_a_failed_responses_body_without_its_failure(tmp_path: Path) -> None:
    body = {"object": "response", "status": "failed", "output": [], "error": {"message": "boom"}}
    path = tmp_path / "failed.yaml"
    interaction = Interaction(REQUEST, json.dumps(body))
    Cassette([interaction]).save(path)
    with pytest.raises(CassetteError, match="interaction 1: the model's response failed"):
        Cassette.load(path)
