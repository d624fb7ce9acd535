"""OpenAIModel through the real openai SDK over real HTTP, against the bundled local server."""

from __future__ import annotations

import time

import pytest

from agentbench import (
    Agent,
    ChatResponse,
    ModelError,
    ModelSettings,
    ModelTimeoutError,
    OpenAIModel,
    RetryPolicy,
    Runner,
    StopReason,
    ToolCall,
    Usage,
    UsageError,
    tool,
)
from agentbench.testing import Delay, HTTPFault, OpenAICompatibleServer, RawBody

pytestmark = pytest.mark.server

FAST_RETRY = RetryPolicy(max_attempts=3, initial_backoff_s=0.01, max_backoff_s=0.05)


@tool(effect="read_only")
def get_weather(city: str, unit: str = "c") -> dict:
    """Current weather.

    Args:
        city: City name.
        unit: "c" or "f".
    """
    return {"city": city, "temp": 21, "unit": unit}


_open_models: list[OpenAIModel] = []


@pytest.fixture
async def server():
    with OpenAICompatibleServer() as running:
        yield running
        while _open_models:  # close connections inside the test's own event loop
            await _open_models.pop().aclose()


def model_for(server: OpenAICompatibleServer, **kwargs) -> OpenAIModel:
    kwargs.setdefault("retry", FAST_RETRY)
    model = OpenAIModel("test-model", base_url=server.base_url, api_key="sk-test-key", **kwargs)
    _open_models.append(model)
    return model


async def test_plain_reply(server) -> None:
    server.add(ChatResponse(text="Hello there.", usage=Usage(input_tokens=11, output_tokens=3)))
    result = await Runner.run(Agent(name="a"), "hi", model=model_for(server))
    assert result.output == "Hello there."
    assert result.usage == Usage(input_tokens=11, output_tokens=3)
    [received] = server.requests
    assert received.path == "/v1/chat/completions"
    assert received.headers["authorization"] == "Bearer sk-test-key"
    assert received.body["model"] == "test-model"
    assert received.body["messages"][-1] == {"role": "user", "content": "hi"}
    response = next(e for e in result.events if e.kind == "model_response").response
    assert response.raw["object"] == "chat.completion"
    assert response.latency_ms > 0 and response.attempts == 1


async def test_tool_calls_round_trip(server) -> None:
    server.add(ToolCall("get_weather", {"city": "Paris"}), "It is 21 degrees in Paris.")
    result = await Runner.run(
        Agent(name="a", tools=[get_weather]), "weather?", model=model_for(server)
    )
    assert result.completed
    assert result.output == "It is 21 degrees in Paris."
    first, second = (r.body for r in server.requests)
    assert first["tools"][0]["function"]["name"] == "get_weather"
    assert second["messages"][-1]["role"] == "tool"
    assert second["messages"][-1]["content"] == '{"city":"Paris","temp":21,"unit":"c"}'
    call_id = second["messages"][-2]["tool_calls"][0]["id"]
    assert second["messages"][-1]["tool_call_id"] == call_id


async def test_stream_with_fragmented_tool_call_arguments(server) -> None:
    args = '{"city": "Reykjavik", "unit": "f"}'
    server.add(
        [ToolCall("get_weather", args), ToolCall("get_weather", {"city": "Oslo"})], "Cold in both."
    )
    agent = Agent(name="a", tools=[get_weather], model_settings=ModelSettings(stream=True))
    events = [e async for e in Runner.stream(agent, "weather?", model=model_for(server))]
    assert server.requests[0].body["stream"] is True
    first = next(e for e in events if e.kind == "model_response").response
    assert [(c.name, c.arguments) for c in first.tool_calls] == [
        ("get_weather", args),
        ("get_weather", '{"city": "Oslo"}'),
    ]
    # The arguments really did arrive in pieces.
    fragments = [
        tc["function"]["arguments"]
        for chunk in first.raw["chunks"]
        for choice in chunk["choices"]
        for tc in choice["delta"].get("tool_calls") or ()
        if tc["function"].get("arguments")
    ]
    assert len(fragments) > 4 and "".join(fragments[:5]).startswith('{"city')
    deltas = [e.text for e in events if e.kind == "text_delta"]
    assert deltas == ["Cold ", "in ", "both."]
    assert events[-1].output == "Cold in both."
    assert first.usage.total_tokens > 0  # usage arrives in the final chunk


async def test_rate_limit_then_success_is_retried(server) -> None:
    server.add(HTTPFault(429, "slow down", headers={"retry-after": "0"}), "Recovered.")
    result = await Runner.run(Agent(name="a"), "hi", model=model_for(server))
    assert result.output == "Recovered."
    assert len(server.requests) == 2
    response = next(e for e in result.events if e.kind == "model_response").response
    assert response.attempts == 2


async def test_retry_after_is_honoured(server) -> None:
    server.add(HTTPFault(503, headers={"retry-after-ms": "300"}), "ok")
    model = model_for(server, retry=RetryPolicy(max_attempts=2, initial_backoff_s=0.0, jitter=0))
    started = time.perf_counter()
    result = await Runner.run(Agent(name="a"), "hi", model=model)
    assert result.output == "ok"
    assert time.perf_counter() - started >= 0.3


async def test_retry_after_beyond_the_bound_fails_fast(server) -> None:
    server.add(HTTPFault(429, headers={"retry-after": "3600"}))
    result = await Runner.run(Agent(name="a"), "hi", model=model_for(server))
    assert result.stop_reason is StopReason.ERROR
    assert "asked to retry after 3600 s" in result.error.message
    assert len(server.requests) == 1


async def test_persistent_500_gives_a_clear_error_after_the_retries(server) -> None:
    # Each answer differs (as a flaky upstream's do), so nothing shows the error deterministic;
    # the same body twice stops early (tests/test_llama_cpp_quirks.py).
    server.add(*[HTTPFault(500, f"upstream exploded (worker {n})") for n in range(3)])
    result = await Runner.run(Agent(name="a"), "hi", model=model_for(server))
    assert result.stop_reason is StopReason.ERROR
    assert result.error.type == "ModelError"
    message = result.error.message
    assert "HTTP 500" in message and "upstream exploded (worker 2)" in message
    assert "gave up after 3 attempts" in message
    assert server.base_url in message
    assert len(server.requests) == 3


async def test_client_errors_are_not_retried_and_carry_a_hint(server) -> None:
    server.add(HTTPFault(401, "bad key"))
    with pytest.raises(ModelError) as info:
        await model_for(server).complete(
            {"model": "test-model", "messages": [{"role": "user", "content": "x"}]}
        )
    assert info.value.status_code == 401
    assert "check the API key" in str(info.value)
    assert len(server.requests) == 1


async def test_slow_response_times_out(server) -> None:
    server.add(Delay(2.0, "too late"), Delay(2.0, "too late"))
    model = model_for(
        server, timeout_s=0.2, retry=RetryPolicy(max_attempts=2, initial_backoff_s=0.01)
    )
    with pytest.raises(
        ModelTimeoutError, match=r"timed out after 0.2 s \(gave up after 2 attempts\)"
    ):
        await model.complete(
            {"model": "test-model", "messages": [{"role": "user", "content": "x"}]}
        )


async def test_garbled_argument_json_is_self_corrected_on_the_next_turn(server) -> None:
    server.add(
        ToolCall("get_weather", '{"city": "Paris", "unit": '),
        ToolCall("get_weather", {"city": "Paris"}),
        "21 degrees.",
    )
    result = await Runner.run(
        Agent(name="a", tools=[get_weather]), "weather?", model=model_for(server)
    )
    assert result.completed and result.output == "21 degrees."
    feedback = server.requests[1].body["messages"][-1]
    assert feedback["role"] == "tool"
    assert "arguments are not valid JSON" in feedback["content"]
    assert [e.kind for e in result.events].count("tool_call_rejected") == 1


async def test_a_body_that_is_not_a_completion_is_a_clear_error(server) -> None:
    server.add(RawBody('{"unexpected": true}'))
    with pytest.raises(ModelError, match="returned a body that is not a chat completion"):
        await model_for(server).complete(
            {"model": "test-model", "messages": [{"role": "user", "content": "x"}]}
        )


async def test_connection_refused_is_retried_then_reported() -> None:
    with OpenAICompatibleServer() as gone:
        url = gone.base_url
    model = OpenAIModel("m", base_url=url, retry=FAST_RETRY)
    _open_models.append(model)
    with pytest.raises(ModelError, match=r"connection failed.*gave up after 3 attempts"):
        await model.complete({"model": "m", "messages": [{"role": "user", "content": "x"}]})


async def test_vendor_parameters_travel_in_the_body(server) -> None:
    server.add("ok")
    agent = Agent(name="a", model_settings=ModelSettings(temperature=0, extra_body={"top_k": 3}))
    await Runner.run(agent, "hi", model=model_for(server))
    body = server.requests[0].body
    assert body["temperature"] == 0 and body["top_k"] == 3


def test_key_and_url_come_from_the_environment(monkeypatch, server) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    server.add("from env")
    model = OpenAIModel("test-model")
    assert "sk-from-env" not in repr(model)
    result = Runner.run_sync(Agent(name="a"), "hi", model=model)
    assert result.output == "from env"
    assert server.requests[0].headers["authorization"] == "Bearer sk-from-env"


def test_same_model_object_works_across_event_loops(server) -> None:
    server.add("one", "two")
    model = model_for(server)
    assert Runner.run_sync(Agent(name="a"), "1", model=model).output == "one"
    assert Runner.run_sync(Agent(name="a"), "2", model=model).output == "two"


def test_missing_model_name_or_key_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="needs a model name"):
        OpenAIModel()
    with pytest.raises(UsageError, match="needs an API key"):
        OpenAIModel("gpt-4o-mini")
