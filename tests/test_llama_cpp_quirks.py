"""Issue 16: a real llama.cpp server (llama-cpp-python 0.3.x, chatml-function-calling).

Through the real openai SDK (`OpenAIModel`) over real HTTP against the bundled server with
llama.cpp's quirks: it rejects a null assistant content with a 500 that repeats itself, repeats
the function name in every streamed tool-call chunk, sends an empty 200 event stream for a tool
call it chose itself, and never reports usage in a stream. Old recordings sent `content: null`
where the runtime now sends "", and must not drift.
"""

from __future__ import annotations

import json
import logging
from typing import Literal

import pytest

from agentbench import (
    Agent,
    ChatResponse,
    ModelError,
    ModelSettings,
    OpenAIModel,
    Runner,
    ToolCall,
    Usage,
    tool,
)
from agentbench.cli import main
from agentbench.replay.drift import Fingerprinter, fingerprint, request_diff
from agentbench.replay.stored_events import events_of
from agentbench.runtime.completions import completion_body, parse_stream
from agentbench.runtime.tokens import estimate_request_tokens
from agentbench.testing import QUIRKS, HTTPFault, OpenAICompatibleServer, RawBody
from agentbench.trace.store import TraceStore
from tests.retry_support import NoWaitRetryPolicy

pytestmark = pytest.mark.server

LLAMA_CPP = ["llama_cpp"]


looked_up: list[str] = []


@tool(effect="read_only")
def get_weather(city: str) -> dict:
    """Current temperature of a city, in Celsius.

    Args:
        city: City name, e.g. "Paris".
    """
    looked_up.append(city)
    return {"city": city, "celsius": 21.0}


@tool(effect="read_only")
def convert(celsius: float, to: Literal["fahrenheit", "kelvin"]) -> float:
    """Convert a Celsius temperature.

    Args:
        celsius: Temperature in Celsius.
        to: Target unit.
    """
    return round(celsius * 9 / 5 + 32, 1) if to == "fahrenheit" else round(celsius + 273.15, 2)


WEATHER_SCRIPT = [
    ToolCall("get_weather", {"city": "Paris"}),
    ToolCall("convert", {"celsius": 21.0, "to": "fahrenheit"}),
    "It is 21 °C (69.8 °F) in Paris.",
]
TOOL_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
}
AFTER_A_TOOL_CALL = [
    {"role": "user", "content": "How warm is it in Paris?"},
    {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL]},
    {"role": "tool", "tool_call_id": "call_1", "content": '{"celsius": 21.0}'},
]
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
NAMED_CHOICE = {"type": "function", "function": {"name": "get_weather"}}

_open_models: list[OpenAIModel] = []


@pytest.fixture
def quirks() -> list[str]:
    return LLAMA_CPP


@pytest.fixture
async def server(quirks):
    with OpenAICompatibleServer(quirks=quirks) as running:
        yield running
        while _open_models:  # close connections inside the test's own event loop
            await _open_models.pop().aclose()


def weather_agent(settings: ModelSettings) -> Agent:
    return Agent(
        name="weather",
        instructions="Answer weather questions. Use the tools.",
        tools=[get_weather, convert],
        model_settings=settings,
    )


def model_for(server: OpenAICompatibleServer, attempts: int = 4) -> OpenAIModel:
    model = OpenAIModel(
        "test-model",
        base_url=server.base_url,
        api_key="sk-test",
        retry=NoWaitRetryPolicy(max_attempts=attempts),
    )
    _open_models.append(model)
    return model


def request(messages: list[dict], **extra) -> dict:
    return {"model": "test-model", "messages": messages, **extra}


# -- a whole agent run against llama.cpp ---------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
async def test_weather_agent_with_two_tool_calls_completes_against_llama_cpp(
    server, stream
) -> None:
    looked_up.clear()
    server.add(*WEATHER_SCRIPT)
    # llama.cpp offers the model its tools only when tool_choice is sent.
    agent = weather_agent(ModelSettings(stream=stream, tool_choice="auto"))
    deltas: list[str] = []
    result = await Runner.run(
        agent,
        "How warm is it in Paris, in Fahrenheit?",
        model=model_for(server),
        hooks=[lambda e: deltas.append(e.text) if e.kind == "text_delta" else None],
    )
    assert result.completed, result.error
    assert result.output == "It is 21 °C (69.8 °F) in Paris."
    assert looked_up == ["Paris"]
    calls = [e.tool for e in result.events if e.kind == "tool_started"]
    assert calls == ["get_weather", "convert"]
    # Every assistant message sent back carried a string content (llama.cpp rejects null).
    sent = [m for r in server.requests for m in r.body["messages"] if m.get("role") == "assistant"]
    assert sent and all(m["content"] == "" for m in sent)
    assert server.remaining == 0
    if stream:
        # Each tool-call turn: an empty stream; the same request unstreamed at once, dropped
        # on the stream's connection as llama.cpp does; then again, on a new connection.
        streamed = [r.body.get("stream") for r in server.requests]
        assert streamed == [True, None, None, True, None, None, True]
        assert deltas == ["It ", "is ", "21 ", "°C ", "(69.8 ", "°F) ", "in ", "Paris."]
        assert result.usage.estimated  # the final answer's stream reported no usage
    else:
        assert len(server.requests) == 3
        assert not result.usage.estimated  # llama.cpp reports usage in plain bodies
    assert result.usage.input_tokens > 0 and result.usage.output_tokens > 0


# -- rejects_null_content ---------------------------------------------------------------


@pytest.mark.parametrize("quirks", [["rejects_null_content"]])
async def test_a_null_assistant_content_gets_llama_cpps_500_and_is_not_retried_blindly(
    server,
) -> None:
    model = model_for(server, attempts=4)
    with pytest.raises(ModelError) as info:
        await model.complete(request(AFTER_A_TOOL_CALL, tools=[WEATHER_TOOL]))
    error = info.value
    assert len(server.requests) == 2  # the same answer twice: deterministic, not 4 attempts
    assert error.status_code == 500 and error.attempts == 2
    message = str(error)
    assert "HTTP 500" in message and f"{server.base_url}/chat/completions" in message
    assert "the server answered the same error twice" in message
    # The body is FastAPI's RequestValidationError as llama-cpp-python wraps it.
    details = json.loads(error.body)["error"]
    assert details["type"] == "internal_server_error"
    lines = details["message"].splitlines()
    assert lines[0] == "7 validation errors:"
    assert (
        "'loc': ('body', 'messages', 1, 'ChatCompletionRequestAssistantMessage', 'content')"
        in (details["message"])
    )
    assert lines[-1] == "    POST /v1/chat/completions"
    # The message quotes only the first line (with the one it announces), cut short.
    assert "ChatCompletionRequestSystemMessage" in message
    assert "ChatCompletionRequestFunctionMessage" not in message
    assert "create_chat_completion" not in message and "\n" not in message
    assert len(message) < len(error.body)


@pytest.mark.parametrize("quirks", [["rejects_null_content"]])
async def test_empty_or_absent_assistant_content_is_accepted(server) -> None:
    server.add("21 degrees.", "21 degrees.")
    model = model_for(server)
    textless = {"role": "assistant", "tool_calls": [TOOL_CALL]}
    for assistant in ({**textless, "content": ""}, textless):
        messages = [AFTER_A_TOOL_CALL[0], assistant, AFTER_A_TOOL_CALL[2]]
        response = await model.complete(request(messages))
        assert response.text == "21 degrees."
    assert len(server.requests) == 2


def test_a_tool_call_answer_becomes_a_message_with_empty_content() -> None:
    message = ChatResponse(tool_calls=[ToolCall("get_weather", {"city": "Paris"})]).as_message()
    assert message["content"] == "" and message["tool_calls"][0]["function"]["name"]
    assert ChatResponse(text="Hi.").as_message() == {"role": "assistant", "content": "Hi."}
    with_text = ChatResponse(text="Checking.", tool_calls=[ToolCall("get_weather", {})])
    assert with_text.as_message()["content"] == "Checking."


# -- repeats_stream_names ------------------------------------------------------------------


@pytest.mark.parametrize("quirks", [["repeats_stream_names"]])
async def test_a_name_repeated_in_every_streamed_chunk_is_one_name(server) -> None:
    args = '{"city": "Reykjavik", "unit": "celsius"}'
    server.add(ToolCall("get_weather", args))
    response = await model_for(server).complete(
        request(
            [{"role": "user", "content": "weather?"}],
            tools=[WEATHER_TOOL],
            tool_choice=NAMED_CHOICE,
            stream=True,
        )
    )
    assert [(c.name, c.arguments) for c in response.tool_calls] == [("get_weather", args)]
    names = [
        fragment["function"].get("name")
        for chunk in response.raw["chunks"]
        for choice in chunk["choices"]
        for fragment in choice["delta"].get("tool_calls") or ()
    ]
    assert len(names) > 3 and set(names) == {"get_weather"}  # the server did repeat it


def _fragments(*names: str) -> list[dict]:
    return [
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [{"index": 0, "function": {"name": n, "arguments": ""}}]
                    },
                }
            ]
        }
        for n in names
    ] + [{"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}]


@pytest.mark.parametrize(
    ("pieces", "name"),
    [
        (["get_weather", "get_weather", "get_weather"], "get_weather"),
        (["get", "get_wea", "get_weather"], "get_weather"),
        (["get", "_wea", "ther"], "get_weather"),
        (["get_weather"], "get_weather"),
    ],
    ids=["repeated", "cumulative", "pieces", "once"],
)
def test_streamed_tool_call_names(pieces, name) -> None:
    [call] = parse_stream(_fragments(*pieces)).tool_calls
    assert call.name == name


# -- empty_stream_for_auto_tool_choice -------------------------------------------------------


@pytest.mark.parametrize("quirks", [["empty_stream_for_auto_tool_choice"]])
@pytest.mark.parametrize("choice", [None, "auto"], ids=["absent", "auto"])
async def test_an_empty_stream_for_a_chosen_tool_call_is_asked_again_unstreamed(
    server, choice, caplog
) -> None:
    reply = ChatResponse(text="Let me look.", tool_calls=[ToolCall("get_weather", {"city": "X"})])
    server.add(reply)
    extra = {"tool_choice": choice} if choice else {}
    deltas: list[str] = []
    model = model_for(server)
    ask = request([{"role": "user", "content": "weather?"}], tools=[WEATHER_TOOL], stream=True)
    with caplog.at_level(logging.INFO, logger="agentbench.model"):
        response = await model.complete({**ask, **extra}, on_text_delta=deltas.append)
    assert [c.name for c in response.tool_calls] == ["get_weather"]
    assert response.text == "Let me look." and deltas == ["Let me look."]  # once, whole
    first, dropped, second = (r.body for r in server.requests)
    assert dropped == second  # the first unstreamed try met the stream's closed connection
    assert first["stream"] is True and "stream" not in second and "stream_options" not in second
    assert second["messages"] == first["messages"] and second["tools"] == first["tools"]
    assert response.raw["object"] == "chat.completion" and response.attempts == 1
    assert model.retry.asked == []  # asked again at once, not retried after a backoff
    assert "empty event stream" in caplog.text and "without streaming" in caplog.text
    assert "found the connection closed; asked again" in caplog.text


@pytest.mark.parametrize("quirks", [["empty_stream_for_auto_tool_choice"]])
async def test_text_and_named_tool_calls_still_stream(server) -> None:
    server.add("Sunny.", ToolCall("get_weather", {"city": "X"}))
    model = model_for(server)
    ask = request([{"role": "user", "content": "weather?"}], tools=[WEATHER_TOOL], stream=True)
    assert (await model.complete(ask)).text == "Sunny."
    named = await model.complete({**ask, "tool_choice": NAMED_CHOICE})
    assert named.tool_calls[0].name == "get_weather"
    assert len(server.requests) == 2
    assert all(r.body["stream"] for r in server.requests)


# -- no_stream_usage and usage estimates -----------------------------------------------------


@pytest.mark.parametrize("quirks", [["no_stream_usage"], []], ids=["missing", "reported"])
async def test_stream_usage_is_estimated_and_marked_only_when_missing(server, quirks) -> None:
    reported = Usage(input_tokens=111, output_tokens=7)
    server.add(ChatResponse(text="A fairly short answer.", usage=reported))
    ask = request([{"role": "user", "content": "Tell me about the weather."}], stream=True)
    response = await model_for(server).complete(ask)
    assert server.requests[0].body["stream_options"] == {"include_usage": True}
    if quirks:
        assert response.usage.estimated
        assert response.usage.input_tokens == estimate_request_tokens(ask)
        assert response.usage.output_tokens > 0
    else:
        assert response.usage == reported and not response.usage.estimated


@pytest.mark.parametrize("quirks", [[]])
async def test_a_plain_body_without_usage_is_estimated(server) -> None:
    answer = ChatResponse(tool_calls=[ToolCall("get_weather", {"city": "Oslo"})])
    body = completion_body(answer, "test-model")
    del body["usage"]
    server.add(RawBody(json.dumps(body)))
    response = await model_for(server).complete(request([{"role": "user", "content": "hi"}]))
    assert response.usage.estimated
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0


def test_an_estimate_stays_marked_when_added_up() -> None:
    reported = Usage(input_tokens=3, output_tokens=1)
    estimated = Usage(input_tokens=5, output_tokens=2, estimated=True)
    assert (reported + estimated).estimated and (estimated + reported).estimated
    assert not (reported + reported).estimated
    total = sum([reported, estimated], Usage())
    assert total == Usage(input_tokens=8, output_tokens=3, estimated=True)
    # Reported usage serializes as before; an estimate says so.
    assert reported.model_dump() == {"input_tokens": 3, "output_tokens": 1}
    assert estimated.model_dump()["estimated"] is True


# -- retries and error messages --------------------------------------------------------------


@pytest.mark.parametrize("quirks", [[]])
async def test_the_same_500_twice_stops_after_the_second_attempt(server) -> None:
    server.add(*[HTTPFault(500, "model failed to load")] * 4)
    model = model_for(server, attempts=4)
    with pytest.raises(ModelError) as info:
        await model.complete(request([{"role": "user", "content": "x"}]))
    assert len(server.requests) == 2 and info.value.attempts == 2
    assert "the server answered the same error twice" in str(info.value)
    assert info.value.status_code == 500 and "model failed to load" in info.value.body
    assert model.retry.asked == [1]


@pytest.mark.parametrize("quirks", [[]])
@pytest.mark.parametrize("status", [429, 502, 503, 504])
async def test_a_rate_limit_or_gateway_answered_the_same_way_is_still_retried(
    server, status: int
) -> None:
    # They speak of time or of the path, not of the request: the same page proves nothing.
    server.add(*[HTTPFault(status, "slow down")] * 2, "Done.")
    response = await model_for(server).complete(request([{"role": "user", "content": "x"}]))
    assert response.text == "Done." and response.attempts == 3


@pytest.mark.parametrize("quirks", [[]])
async def test_an_error_message_keeps_status_endpoint_and_first_line(server) -> None:
    text = "Bad request: " + "q" * 300 + "\nTraceback (most recent call last):\n  more"
    server.add(RawBody(text, status=400, content_type="text/plain"))
    with pytest.raises(ModelError) as info:
        await model_for(server).complete(request([{"role": "user", "content": "x"}]))
    message = str(info.value)
    assert f"HTTP 400 from {server.base_url}/chat/completions: Bad request: qqq" in message
    assert "Traceback" not in message and message.endswith("…")
    assert len(message) < 300
    assert info.value.body == text and info.value.status_code == 400


# -- the server's quirk names ----------------------------------------------------------------


def test_an_unknown_quirk_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"unknown quirk 'llama\.cpp'") as info:
        OpenAICompatibleServer(quirks=["llama.cpp"])
    for name in QUIRKS:
        assert name in str(info.value)
    assert set(QUIRKS["llama_cpp"]) == {
        "rejects_null_content",
        "repeats_stream_names",
        "empty_stream_for_auto_tool_choice",
        "no_stream_usage",
        "ignores_tools_without_tool_choice",
    }


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
async def test_without_tool_choice_llama_cpp_offers_no_tools(server, stream) -> None:
    # OpenAI's default with tools is auto; llama.cpp's chat format renders a plain chat
    # prompt, so the model writes its call as text and the run ends without a tool.
    looked_up.clear()
    server.add(*WEATHER_SCRIPT)
    agent = weather_agent(ModelSettings(stream=stream))
    result = await Runner.run(agent, "How warm is it in Paris?", model=model_for(server))
    assert result.completed and looked_up == []
    assert result.output == 'functions.get_weather:\n{"city": "Paris"}'
    assert "tool_choice" not in server.requests[0].body and len(server.requests) == 1


# -- recordings made with content null do not drift ----------------------------------------


def _recorded(content: object = None, *, absent: bool = False) -> dict:
    assistant: dict = {"role": "assistant", "tool_calls": [TOOL_CALL]}
    if not absent:
        assistant["content"] = content
    return request([AFTER_A_TOOL_CALL[0], assistant, AFTER_A_TOOL_CALL[2]], tools=[WEATHER_TOOL])


@pytest.mark.parametrize("other", [_recorded(""), _recorded(absent=True)], ids=["empty", "absent"])
def test_textless_tool_call_content_null_empty_or_absent_is_no_drift(other) -> None:
    old = _recorded(None)
    assert request_diff(old, other) == []
    assert fingerprint(old) == fingerprint(other)
    # The incremental fingerprinter agrees with a fresh one, step after step.
    fingerprinter = Fingerprinter()
    first = request(other["messages"][:1], tools=[WEATHER_TOOL])
    assert fingerprinter(first) == fingerprint(first)
    assert fingerprinter(other) == fingerprint(old)


def test_real_text_beside_tool_calls_still_drifts() -> None:
    changes = request_diff(_recorded(None), _recorded("Let me check."))
    assert [(c.path, c.old, c.new) for c in changes] == [
        ("messages[1].content", None, "Let me check.")
    ]
    assert fingerprint(_recorded(None)) != fingerprint(_recorded("Let me check."))
    # Only assistant tool-call messages: an empty user message is not a null one.
    user_null = request([{"role": "user", "content": None}])
    user_empty = request([{"role": "user", "content": ""}])
    assert request_diff(user_null, user_empty)
    assert fingerprint(user_null) != fingerprint(user_empty)


# -- estimated usage, read back through the store's readers ------------------------------------


@pytest.mark.parametrize("quirks", [["no_stream_usage"]])
async def test_estimated_usage_is_stored_and_shown_as_estimated(
    server, tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.add("It is sunny.")
    db = tmp_path / "traces.duckdb"
    store = TraceStore(db)
    agent = Agent(
        name="weather", instructions="Be brief.", model_settings=ModelSettings(stream=True)
    )
    result = await Runner.run(agent, "Weather?", model=model_for(server), store=store)
    store.flush()
    assert result.usage.estimated and result.usage.total_tokens > 0
    events = events_of(store.run(result.run_id))
    assert events[-1].kind == "run_finished" and events[-1].usage.estimated
    assert main(["traces", "list", "--db", str(db)]) == 0
    assert f"≈{result.usage.total_tokens}" in capsys.readouterr().out
    assert main(["traces", "show", result.run_id, "--db", str(db)]) == 0
    assert "(≈: estimated, the server reported none)" in capsys.readouterr().out
