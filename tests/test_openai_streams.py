"""Streams that end before their answer does, through the real openai SDK over real HTTP.

A stream is whole only once a finish_reason arrives. A cut one (connection closed mid-answer,
an event cut mid-JSON) is retried like a dropped connection, and when every attempt is cut the
run stops with `error` — never `completed` with part of an answer. An empty 200 event stream
(llama.cpp's answer when it cannot stream a tool call) is asked once more without streaming.
"""

from __future__ import annotations

import pytest

from agentbench import (
    Agent,
    ChatResponse,
    ModelError,
    ModelSettings,
    OpenAIModel,
    Runner,
    StopReason,
    ToolCall,
    Usage,
    tool,
)
from agentbench.testing import CutStream, OpenAICompatibleServer
from tests.retry_support import NoWaitRetryPolicy

pytestmark = pytest.mark.server

STREAMING = ModelSettings(stream=True)
REQUEST = {"model": "test-model", "messages": [{"role": "user", "content": "x"}]}


cities_looked_up: list[str] = []


@tool(effect="read_only")
def get_weather(city: str) -> dict:
    """Current weather.

    Args:
        city: City name.
    """
    cities_looked_up.append(city)
    return {"city": city, "temp": 21}


_open_models: list[OpenAIModel] = []


@pytest.fixture
async def server():
    with OpenAICompatibleServer() as running:
        yield running
        while _open_models:  # close connections inside the test's own event loop
            await _open_models.pop().aclose()


def model_for(server: OpenAICompatibleServer, attempts: int = 3) -> OpenAIModel:
    retry = NoWaitRetryPolicy(max_attempts=attempts)
    model = OpenAIModel("test-model", base_url=server.base_url, api_key="sk-test", retry=retry)
    _open_models.append(model)
    return model


def text_deltas(result) -> list[str]:
    return [e.text for e in result.events if e.kind == "text_delta"]


@pytest.mark.parametrize("chunked", [False, True], ids=["clean-eof", "broken-connection"])
async def test_a_cut_stream_then_a_whole_one_is_retried_and_completes(server, chunked) -> None:
    # Cut after the role chunk and half of the first word: no text has reached the caller.
    server.add(CutStream(after_chunks=1, partial=True, chunked=chunked), "The full answer.")
    model = model_for(server)
    result = await Runner.run(Agent(name="a", model_settings=STREAMING), "hi", model=model)
    assert result.stop_reason is StopReason.COMPLETED
    assert result.output == "The full answer."
    assert text_deltas(result) == ["The ", "full ", "answer."]
    assert len(server.requests) == 2
    response = next(e for e in result.events if e.kind == "model_response").response
    assert response.attempts == 2 and response.finish_reason == "stop"
    assert model.retry.asked == [1]  # the RetryPolicy's backoff was used between attempts


async def test_a_stream_that_is_always_cut_stops_the_run_with_an_error(server) -> None:
    server.add(*[CutStream(after_chunks=1, partial=True)] * 3)
    model = model_for(server)
    result = await Runner.run(Agent(name="a", model_settings=STREAMING), "hi", model=model)
    assert result.stop_reason is StopReason.ERROR and not result.completed
    assert result.output is None
    assert result.error.type == "ModelError"
    assert result.error.message == (
        f"model 'test-model' at {server.base_url}: the stream ended without a finish_reason "
        "after 1 chunk(s) (no text) (gave up after 3 attempts)"
    )
    assert len(server.requests) == 3 and model.retry.asked == [1, 2]
    assert not [e for e in result.events if e.kind == "model_response"]


@pytest.mark.parametrize("done", [False, True], ids=["nothing", "only-done"])
async def test_an_empty_200_stream_is_asked_again_without_streaming(server, done) -> None:
    server.add(CutStream(after_chunks=0, done=done), "The whole answer.")
    model = model_for(server)
    result = await Runner.run(Agent(name="a", model_settings=STREAMING), "hi", model=model)
    assert result.completed and result.output == "The whole answer."
    assert text_deltas(result) == ["The whole answer."]  # one delta, never an empty answer
    assert [r.body.get("stream") for r in server.requests] == [True, None]
    response = next(e for e in result.events if e.kind == "model_response").response
    assert response.raw["object"] == "chat.completion"  # the non-streamed body, not chunks
    assert response.attempts == 1 and model.retry.asked == []  # at once, not as a retry


@pytest.mark.parametrize("chunked", [False, True], ids=["clean-eof", "broken-connection"])
async def test_a_stream_cut_after_text_reached_the_caller_fails_without_repeating_it(
    server, chunked
) -> None:
    server.add(CutStream(after_chunks=3, chunked=chunked), "never asked for")
    result = await Runner.run(
        Agent(name="a", model_settings=STREAMING), "hi", model=model_for(server)
    )
    assert result.stop_reason is StopReason.ERROR
    assert text_deltas(result) == ["The ", "whole "]  # delivered once, never again
    message = result.error.message
    assert message.startswith(
        f"model 'test-model' at {server.base_url}: the stream ended without a finish_reason "
        "after 3 chunk(s) (10 characters of text)"
    )
    assert message.endswith(
        "on attempt 1; not retried, since its text had already reached the caller"
    )
    assert ("the connection broke (peer closed connection" in message) is chunked
    assert len(server.requests) == 1 and server.remaining == 1


async def test_a_cut_stream_whose_text_nobody_saw_is_retried(server) -> None:
    server.add(CutStream(after_chunks=3), "Whole.")
    response = await model_for(server).complete({**REQUEST, "stream": True})
    assert response.text == "Whole." and response.attempts == 2


async def test_a_tool_call_cut_mid_arguments_never_runs(server) -> None:
    cities_looked_up.clear()
    server.add(
        CutStream(after_chunks=3, reply=ToolCall("get_weather", {"city": "Reykjavik"})),
        ToolCall("get_weather", {"city": "Reykjavik"}),
        "21 degrees.",
    )
    agent = Agent(name="a", tools=[get_weather], model_settings=STREAMING)
    result = await Runner.run(agent, "weather?", model=model_for(server))
    assert result.completed and result.output == "21 degrees."
    assert cities_looked_up == ["Reykjavik"]
    # Retried by the model, not shown to the agent as a call with broken arguments.
    assert not [e for e in result.events if e.kind == "tool_call_rejected"]
    first = next(e for e in result.events if e.kind == "model_response").response
    assert first.attempts == 2 and len(server.requests) == 3


async def test_an_always_cut_tool_call_is_an_error_naming_the_unfinished_call(server) -> None:
    cut = CutStream(after_chunks=3, reply=ToolCall("get_weather", {"city": "Reykjavik"}))
    server.add(cut, cut)
    with pytest.raises(ModelError) as info:
        await model_for(server, attempts=2).complete({**REQUEST, "stream": True})
    assert "after 3 chunk(s) (1 unfinished tool call(s)) (gave up after 2 attempts)" in str(
        info.value
    )
    assert info.value.attempts == 2 and len(server.requests) == 2


@pytest.mark.parametrize("chunked", [False, True], ids=["clean-eof", "broken-connection"])
async def test_a_finish_reason_without_done_is_a_whole_answer(server, chunked) -> None:
    # llama.cpp and proxies sometimes end a stream without [DONE]; the finish_reason is the
    # model's own word that the answer is whole, so the answer is kept (and not asked twice).
    reply = ChatResponse(text="All of it.", usage=Usage(input_tokens=5, output_tokens=3))
    server.add(CutStream(finish=True, chunked=chunked, reply=reply))
    result = await Runner.run(
        Agent(name="a", model_settings=STREAMING), "hi", model=model_for(server)
    )
    assert result.completed and result.output == "All of it."
    assert result.usage == Usage(input_tokens=5, output_tokens=3)
    assert len(server.requests) == 1


async def test_a_non_streamed_body_cut_in_half_is_retried(server) -> None:
    server.add(CutStream(), "Whole.")
    result = await Runner.run(Agent(name="a"), "hi", model=model_for(server))
    assert result.completed and result.output == "Whole."
    assert len(server.requests) == 2


async def test_a_non_streamed_body_always_cut_says_what_broke(server) -> None:
    server.add(CutStream(), CutStream())
    with pytest.raises(ModelError, match=r"peer closed connection .*gave up after 2 attempts"):
        await model_for(server, attempts=2).complete(REQUEST)
