"""`agentbench proxy` through the real openai SDK: record against the bundled test server,
replay with no network (sync, async, streaming, conversations interleaved at once), a request
the recording has no answer for refused with the nearest recorded call, a conversation going
live from its divergence, and no secret of the agent's reaching the cassette."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import orjson
import pytest

from agentbench.boundary.forward import WireForwarder
from agentbench.boundary.proxy import FRESH_FINGERPRINTER_EVERY, Proxy, RecordedCalls
from agentbench.boundary.server import BoundaryServer
from agentbench.replay.cassette import Cassette, Interaction
from agentbench.runtime.models import ChatResponse, ToolCall
from agentbench.testing.server import HTTPFault, OpenAICompatibleServer

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

MODEL = "test-model"
PROXY = [sys.executable, "-m", "agentbench", "proxy"]
WEATHER = [
    {
        "type": "function",
        "function": {
            "name": "weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]


def echo(request: dict[str, Any]) -> str:
    """The upstream's policy: each conversation's answer says which question it answers."""
    last = request["messages"][-1]
    return f"answer {len(request['messages'])} to {last['content']}"


@contextlib.contextmanager
def running(proxy: Proxy) -> Iterator[str]:
    """`proxy` served on its own event loop in a thread; yields the OpenAI base URL."""
    with serving(proxy.answer, proxy.aclose) as url:
        yield url


@contextlib.contextmanager
def serving(answer: Any, closing: Any = None) -> Iterator[str]:
    """A BoundaryServer answering with `answer` on its own event loop in a thread."""
    ready = threading.Event()
    holder: dict[str, Any] = {}

    async def serve() -> None:
        holder["stop"] = stop = asyncio.Event()
        holder["loop"] = asyncio.get_running_loop()
        async with BoundaryServer(answer) as server:
            holder["url"] = server.base_url
            ready.set()
            await stop.wait()
        if closing is not None:
            await closing()

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    assert ready.wait(10)
    try:
        yield holder["url"]
    finally:
        holder["loop"].call_soon_threadsafe(holder["stop"].set)
        thread.join(10)


def client(url: str, **options: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=url, api_key="sk-agent-side-key-0123456789abcdef", **options)


def ask(url: str, question: str, **options: Any) -> str:
    with client(url, **options) as openai_client:
        answer = openai_client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": question}]
        )
    return str(answer.choices[0].message.content)


def record(tmp_path: Path, upstream: OpenAICompatibleServer, questions: list[str]) -> Path:
    """Each question asked once through a recording proxy; returns the saved cassette."""
    proxy = Proxy(upstream=WireForwarder("upstream", base_url=upstream.base_url, api_key="k"))
    with running(proxy) as url:
        for question in questions:
            ask(url, question)
    return proxy.cassette.save(tmp_path / "proxy.yaml")


def test_a_recording_replays_through_the_sdk_with_no_upstream(tmp_path: Path) -> None:
    script = [ToolCall(name="weather", arguments='{"city": "Paris"}', id="call_1"), "Sunny."]
    with OpenAICompatibleServer(script) as upstream:
        proxy = Proxy(upstream=WireForwarder("up", base_url=upstream.base_url, api_key="k"))
        with running(proxy) as url, client(url) as sdk:
            messages: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]
            first = sdk.chat.completions.create(model=MODEL, messages=messages, tools=WEATHER)
            call = first.choices[0].message.tool_calls[0]
            messages += [
                first.choices[0].message.model_dump(exclude_none=True),
                {"role": "tool", "tool_call_id": call.id, "content": "18C, sunny"},
            ]
            last = sdk.chat.completions.create(model=MODEL, messages=messages, tools=WEATHER)
        path = proxy.cassette.save(tmp_path / "weather.yaml")
    # The upstream is gone: replay answers alone, the same answers.
    replay = Proxy(recording=Cassette.load(path))
    with running(replay) as url, client(url) as sdk:
        again = sdk.chat.completions.create(model=MODEL, messages=messages[:1], tools=WEATHER)
        assert again.choices[0].message.tool_calls[0].function.name == "weather"
        final = sdk.chat.completions.create(model=MODEL, messages=messages, tools=WEATHER)
    assert final.choices[0].message.content == last.choices[0].message.content == "Sunny."
    assert (replay.tally.replayed, replay.tally.refused) == (2, [])


def test_async_streaming_replays_the_recorded_events_verbatim(tmp_path: Path) -> None:
    async def stream(url: str) -> list[Any]:
        async with openai.AsyncOpenAI(base_url=url, api_key="x") as sdk:
            events = await sdk.chat.completions.create(
                model=MODEL,
                messages=[{"role": "user", "content": "Tell me a story"}],
                stream=True,
            )
            return [chunk async for chunk in events]

    with OpenAICompatibleServer(["Once upon a time, a proxy."]) as upstream:
        proxy = Proxy(upstream=WireForwarder("up", base_url=upstream.base_url, api_key="k"))
        with running(proxy) as url:
            live = asyncio.run(stream(url))
        path = proxy.cassette.save(tmp_path / "stream.yaml")
    assert Cassette.load(path).interactions[0].streamed
    with running(Proxy(recording=Cassette.load(path))) as url:
        replayed = asyncio.run(stream(url))
    # The live answer's chunks, ids and chunking included, not a stream made up afterwards.
    assert [c.model_dump() for c in replayed] == [c.model_dump() for c in live]
    assert len(replayed) > 3
    text = "".join(c.choices[0].delta.content or "" for c in replayed if c.choices)
    assert text == "Once upon a time, a proxy."


def test_conversations_interleaved_at_once_are_told_apart(tmp_path: Path) -> None:
    """Two conversations of two turns each, recorded one after the other, replayed at once in
    the other order, their turns interleaved: each request gets its own conversation's answer
    (in arrival order, the first would get the other conversation's)."""
    with OpenAICompatibleServer(responder=echo) as upstream:
        proxy = Proxy(upstream=WireForwarder("up", base_url=upstream.base_url, api_key="k"))
        with running(proxy) as url:
            recorded = {t: asyncio.run(converse_alone(url, t)) for t in ("cats", "dogs")}
        path = proxy.cassette.save(tmp_path / "two.yaml")
    replay = Proxy(recording=Cassette.load(path))
    with running(replay) as url:
        replayed = asyncio.run(interleaved(url, ["dogs", "cats"]))
    assert replayed == recorded
    assert recorded["cats"] == ["cats: answer 1 to cats", "cats: answer 3 to more"]
    assert (replay.tally.replayed, replay.tally.refused) == (4, [])


async def _turns(sdk: openai.AsyncOpenAI, topic: str, between: Any = None) -> list[str]:
    messages: list[Any] = [{"role": "user", "content": topic}]
    said = []
    for turn in range(2):
        if turn == 1 and between is not None:
            await between()
        answer = await sdk.chat.completions.create(model=MODEL, messages=messages)
        text = str(answer.choices[0].message.content)
        said.append(f"{topic}: {text}")
        messages += [{"role": "assistant", "content": text}, {"role": "user", "content": "more"}]
    return said


async def converse_alone(url: str, topic: str) -> list[str]:
    async with openai.AsyncOpenAI(base_url=url, api_key="x") as sdk:
        return await _turns(sdk, topic)


async def interleaved(url: str, topics: list[str]) -> dict[str, list[str]]:
    """The conversations' turns strictly interleaved: every first turn, then every second."""
    firsts_done = asyncio.Barrier(len(topics))
    async with openai.AsyncOpenAI(base_url=url, api_key="x") as sdk:
        said = await asyncio.gather(*(_turns(sdk, t, firsts_done.wait) for t in topics))
    return dict(zip(topics, said, strict=True))


def test_a_request_the_recording_has_no_answer_for_is_refused_naming_the_nearest(
    tmp_path: Path,
) -> None:
    with OpenAICompatibleServer(responder=echo) as upstream:
        path = record(tmp_path, upstream, ["What is 2+2?", "Capital of France?"])
    refused: list[Any] = []
    replay = Proxy(recording=Cassette.load(path), on_refusal=refused.append)
    with running(replay) as url:
        assert ask(url, "Capital of France?") == "answer 1 to Capital of France?"
        with pytest.raises(openai.BadRequestError) as caught:
            ask(url, "Capital of Spain?", max_retries=0)
        # Asked more often than recorded: refused too, and said so.
        with pytest.raises(openai.BadRequestError) as again:
            ask(url, "Capital of France?", max_retries=0)
    message = caught.value.message
    assert "nearest is #2 of 2" in message, message
    assert "messages[0].content" in message and "Spain" in message
    assert "each has been answered" in again.value.message
    assert [r.call for r in refused] == [2, 3]
    assert replay.summary()[0] == "agentbench proxy: 3 call(s): 1 replayed, 0 forwarded, 2 refused"
    assert "recorded calls never asked: #1" in "\n".join(replay.summary())


def test_no_secret_the_agent_sends_reaches_the_cassette_or_the_upstream(tmp_path: Path) -> None:
    secrets = {
        "key": "sk-agent-side-key-0123456789abcdef",
        "x-api-key": "sk-ant-api03-headersecret0123456789",
        "cookie": "session=cookiesecret0123456789",
        "body": "sk-proj-bodysecret0123456789abcdef",
    }
    with OpenAICompatibleServer(responder=echo) as upstream:
        forwarder = WireForwarder("up", base_url=upstream.base_url, api_key="proxy-own-key")
        proxy = Proxy(upstream=forwarder)
        with running(proxy) as url:
            headers = {"x-api-key": secrets["x-api-key"], "Cookie": secrets["cookie"]}
            ask(url, f"my key is {secrets['body']}", default_headers=headers)
        sent = upstream.requests[0].headers
    text = proxy.cassette.save(tmp_path / "secrets.yaml").read_text()
    for name, value in secrets.items():
        assert value not in text, name
    for header in ("authorization", "x-api-key", "cookie"):  # only content-type is kept
        assert header not in text.lower(), header
    assert sent.get("authorization") == "Bearer proxy-own-key"
    assert secrets["x-api-key"] not in str(sent) and secrets["cookie"] not in str(sent)


def test_live_from_divergence_goes_live_for_the_diverged_conversation_only(
    tmp_path: Path,
) -> None:
    with OpenAICompatibleServer(responder=echo) as upstream:
        proxy = Proxy(upstream=WireForwarder("up", base_url=upstream.base_url, api_key="k"))
        with running(proxy) as url:
            for topic in ("cats", "dogs"):
                asyncio.run(converse_alone(url, topic))
        path = proxy.cassette.save(tmp_path / "two.yaml")

    def changed(request: dict[str, Any]) -> str:
        return "live " + echo(request)

    with OpenAICompatibleServer(responder=changed) as live:
        forwarder = WireForwarder("live", base_url=live.base_url, api_key="k")
        replay = Proxy(recording=Cassette.load(path), upstream=forwarder)
        with running(replay) as url:
            said = asyncio.run(interleaved(url, ["cats", "birds"]))
        assert len(live.requests) == 2  # birds' two turns, nothing of cats'
    assert said["cats"] == ["cats: answer 1 to cats", "cats: answer 3 to more"]
    assert said["birds"] == ["birds: live answer 1 to birds", "birds: live answer 3 to more"]
    assert (replay.tally.replayed, replay.tally.forwarded, replay.tally.refused) == (2, 2, [])
    saved = Cassette.load(replay.cassette.save(tmp_path / "after.yaml"))
    assert len(saved.interactions) == 6
    assert saved.interactions[4].request["messages"][0]["content"] == "birds"


@contextlib.contextmanager
def proxy_command(
    *args: str, env: dict[str, str] | None = None
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """`agentbench proxy ARGS` as a user runs it; yields its OpenAI base URL, read from the
    line it prints, and the process (stopped with a signal by the test)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "agentbench", "proxy", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    try:
        line = process.stdout.readline() if process.stdout else ""
        assert line.startswith("agentbench proxy: listening on http://127.0.0.1:"), line + (
            process.stderr.read() if process.stderr else ""
        )
        yield line.split("OPENAI_BASE_URL=", 1)[1].split(",", 1)[0], process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_the_command_records_replays_refuses_and_says_so(tmp_path: Path) -> None:
    cassette = tmp_path / "agent.yaml"
    with OpenAICompatibleServer(responder=echo) as upstream:
        with proxy_command("--record", str(cassette), "--upstream", upstream.base_url) as (
            url,
            process,
        ):
            assert ask(url, "Capital of France?") == "answer 1 to Capital of France?"
            process.send_signal(signal.SIGINT)
            out, _ = process.communicate(timeout=30)
        assert process.returncode == 0, out
        assert f"saved 1 call(s) to {cassette}" in out
    with proxy_command("--replay", str(cassette)) as (url, process):
        assert ask(url, "Capital of France?") == "answer 1 to Capital of France?"
        with pytest.raises(openai.BadRequestError):
            ask(url, "Capital of Spain?", max_retries=0)
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    # A refusal is a divergence: exit 1, said as it happened and in the summary.
    assert process.returncode == 1, out + err
    assert "refused call 2 (chat): no recorded call matches; nearest is #1 of 1" in err
    assert "2 call(s): 1 replayed, 0 forwarded, 1 refused" in out


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ([], "needs one of --replay CASSETTE or --record CASSETTE"),
        (["--record", "x.yaml"], "--record needs --upstream URL"),
        (["--replay", "x.yaml", "--live-from-divergence"], "needs --upstream URL"),
        (["--replay", "missing.yaml"], "no such cassette file"),
    ],
)
def test_the_command_refuses_what_it_cannot_do(tmp_path: Path, args: list[str], says: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agentbench", "proxy", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert says in done.stderr, done.stderr
    assert done.returncode == 2


def test_an_upstream_error_is_recorded_and_replayed_as_the_client_got_it(tmp_path: Path) -> None:
    with OpenAICompatibleServer([HTTPFault(400, "context too long")]) as upstream:
        proxy = Proxy(upstream=WireForwarder("up", base_url=upstream.base_url, api_key="k"))
        with running(proxy) as url, pytest.raises(openai.BadRequestError) as live:
            ask(url, "a very long question", max_retries=0)
        path = proxy.cassette.save(tmp_path / "failed.yaml")
    assert proxy.tally.upstream_failures == []  # the provider refused the request: no outage
    replay = Proxy(recording=Cassette.load(path))
    with running(replay) as url, pytest.raises(openai.BadRequestError) as replayed:
        ask(url, "a very long question", max_retries=0)
    assert replayed.value.body == live.value.body
    assert "context too long" in replayed.value.message


def test_an_upstream_out_of_reach_is_a_502_and_an_infrastructure_failure() -> None:
    proxy = Proxy(upstream=WireForwarder("up", base_url="http://127.0.0.1:9/v1", api_key="k"))
    with running(proxy) as url, pytest.raises(openai.InternalServerError) as caught:
        ask(url, "anyone there?", max_retries=0)
    assert caught.value.status_code == 502
    assert "127.0.0.1:9" in proxy.tally.upstream_failures[0]
    summary = proxy.summary()
    assert summary[0] == "agentbench proxy: 1 call(s): 0 replayed, 1 forwarded, 0 refused"
    assert summary[1].startswith("  upstream failed: ")


def test_a_request_not_in_its_api_s_shape_is_told_so_in_that_api_s_error_shape() -> None:
    proxy = Proxy(recording=Cassette())
    with running(proxy) as url:
        root = url.removesuffix("/v1")
        with httpx2.Client() as http:
            responses = http.post(f"{url}/responses", json={"model": MODEL, "input": 5})
            messages = http.post(f"{root}/v1/messages", json={"model": MODEL, "messages": 5})
    assert responses.status_code == messages.status_code == 400
    assert "input: expected text or a list" in responses.json()["error"]["message"]
    assert messages.json()["type"] == "error"
    assert "messages: expected a list" in messages.json()["error"]["message"]
    assert proxy.summary()[1] == "  2 request(s) not in their API's shape (HTTP 400)"


def test_a_diverged_conversation_stays_live_even_where_a_recorded_call_would_match() -> None:
    """From its first mismatch on, a conversation's answers come from the upstream: a recorded
    answer further along would answer a question asked after an answer the recording never
    gave (here the recording holds turn 2 of the conversation but not its turn 1)."""
    turn2 = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "x"},
        {"role": "user", "content": "b"},
    ]
    recording = Cassette(
        [Interaction.of({"model": MODEL, "messages": turn2}, ChatResponse(text="recorded"))]
    )
    with OpenAICompatibleServer(["x", "live"]) as live:
        forwarder = WireForwarder("live", base_url=live.base_url, api_key="k")
        proxy = Proxy(recording=recording, upstream=forwarder)
        with running(proxy) as url, client(url) as sdk:
            first = sdk.chat.completions.create(model=MODEL, messages=turn2[:1])
            second = sdk.chat.completions.create(model=MODEL, messages=turn2)
    assert (first.choices[0].message.content, second.choices[0].message.content) == ("x", "live")
    assert (proxy.tally.replayed, proxy.tally.forwarded) == (0, 2)


def anthropic_agent(url: str, question: str, *, stream: bool) -> list[str]:
    """Anthropic's tool loop through the proxy (ANTHROPIC_BASE_URL is the server root)."""
    key = "sk-ant-api03-agentsidekey0123456789"
    with anthropic.Anthropic(
        base_url=url.removesuffix("/v1"), api_key=key, max_retries=0
    ) as client:
        return _tool_loop(client, question, stream)


def _tool_loop(client: anthropic.Anthropic, question: str, stream: bool) -> list[str]:
    messages: list[Any] = [{"role": "user", "content": question}]
    tools = [{"name": "weather", "input_schema": {"type": "object"}}]
    said = []
    for _ in range(3):
        settings = {"model": "claude-test", "max_tokens": 256, "tools": tools}
        if stream:
            with client.messages.stream(messages=messages, **settings) as events:
                answer = events.get_final_message()
        else:
            answer = client.messages.create(messages=messages, **settings)
        said.append(answer.model_dump_json())
        if answer.stop_reason != "tool_use":
            return said
        messages.append({"role": "assistant", "content": answer.content})
        results = [
            {"type": "tool_result", "tool_use_id": b.id, "content": f"18C in {b.input['city']}"}
            for b in answer.content
            if b.type == "tool_use"
        ]
        messages.append({"role": "user", "content": results})
    return said


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_an_anthropic_agent_is_recorded_and_replayed_through_the_command(
    tmp_path: Path, stream: bool
) -> None:
    cassette = tmp_path / "claude.yaml"
    parallel = [
        ToolCall(name="weather", arguments='{"city": "Paris"}', id="toolu_1"),
        ToolCall(name="weather", arguments='{"city": "Rome"}', id="toolu_2"),
    ]
    with OpenAICompatibleServer([parallel, "Paris 18C, Rome 18C."]) as upstream:
        key = {"ANTHROPIC_API_KEY": "proxy-anthropic-key"}
        recording = ("--record", str(cassette), "--upstream", upstream.base_url)
        with proxy_command(*recording, env=key) as (url, process):
            live = anthropic_agent(url, "Paris and Rome?", stream=stream)
            process.send_signal(signal.SIGINT)
            process.communicate(timeout=30)
        assert process.returncode == 0
        sent = upstream.requests[0]
    assert sent.path == "/v1/messages"
    assert sent.headers.get("x-api-key") == "proxy-anthropic-key"
    assert "agentsidekey" not in cassette.read_text()
    with proxy_command("--replay", str(cassette)) as (url, process):
        replayed = anthropic_agent(url, "Paris and Rome?", stream=stream)
        with pytest.raises(anthropic.BadRequestError) as caught:
            anthropic_agent(url, "Paris and Oslo?", stream=stream)
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=30)
    assert replayed == live  # the recorded messages, ids included
    assert len(live) == 2 and '"stop_reason":"tool_use"' in live[0]
    body = caught.value.body
    assert isinstance(body, dict) and body["type"] == "error"
    assert "nearest is #1 of 2" in body["error"]["message"], body
    assert "Oslo" in body["error"]["message"]
    assert process.returncode == 1


def test_a_call_recorded_as_json_replays_to_a_client_that_streams(tmp_path: Path) -> None:
    with OpenAICompatibleServer(responder=echo) as upstream:
        path = record(tmp_path, upstream, ["Capital of France?"])
    with running(Proxy(recording=Cassette.load(path))) as url, client(url) as sdk:
        events = sdk.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "Capital of France?"}], stream=True
        )
        text = "".join(chunk.choices[0].delta.content or "" for chunk in events if chunk.choices)
    assert text == "answer 1 to Capital of France?"


def test_the_command_goes_live_from_divergence_and_saves_to_another_file(tmp_path: Path) -> None:
    with OpenAICompatibleServer(responder=echo) as upstream:
        cassette = record(tmp_path, upstream, ["Capital of France?"])
        before = cassette.read_text()
        saved = tmp_path / "after.yaml"
        going_live = ("--live-from-divergence", "--upstream", upstream.base_url)
        with proxy_command("--replay", str(cassette), *going_live, "--save-to", str(saved)) as (
            url,
            process,
        ):
            assert ask(url, "Capital of France?") == "answer 1 to Capital of France?"
            assert ask(url, "Capital of Spain?") == "answer 1 to Capital of Spain?"
            process.send_signal(signal.SIGINT)
            out, _ = process.communicate(timeout=30)
    assert process.returncode == 0, out
    assert "2 call(s): 1 replayed, 1 forwarded, 0 refused" in out
    assert cassette.read_text() == before
    asked = [i.request["messages"][0]["content"] for i in Cassette.load(saved).interactions]
    assert asked == ["Capital of France?", "Capital of Spain?"]


def test_the_command_cannot_listen_on_a_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        done = subprocess.run(
            [*PROXY, "--record", "x.yaml", "--upstream", "http://127.0.0.1:9/v1", "--port", port],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=60,
        )
    assert done.returncode == 2, done.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr


def test_a_long_running_replay_matches_across_fresh_fingerprinters_in_bounded_memory() -> None:
    requests = [
        {"model": MODEL, "messages": [{"role": "user", "content": f"question {n}"}]}
        for n in range(2 * FRESH_FINGERPRINTER_EVERY + 100)
    ]
    cassette = Cassette([Interaction.of(r, ChatResponse(text="ok")) for r in requests])
    recorded = RecordedCalls(cassette)
    # Each request arrives as new objects, as parsed off the wire, in another order.
    taken = [recorded.take(orjson.loads(orjson.dumps(r))) for r in reversed(requests)]
    assert taken == list(reversed(range(len(requests))))
    # What the fingerprinter holds is of the requests since it was made, not of all of them.
    assert len(recorded._fingerprint._kept) <= FRESH_FINGERPRINTER_EVERY


def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    event = {
        "id": "chatcmpl-held",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + orjson.dumps(event) + b"\n\n"


def test_recording_relays_a_live_stream_as_it_arrives_and_keeps_it_whole(
    tmp_path: Path,
) -> None:
    """The upstream sends its first event and holds the rest until the agent has read that
    one: a proxy that waited for the whole stream would see it held for good (10 s here, then
    the upstream says so in the text)."""
    read_first = threading.Event()

    async def held(wire: Any, body: Any, headers: Any) -> Any:
        async def events() -> Any:
            yield chunk({"role": "assistant", "content": "Hello"})
            relayed = await asyncio.to_thread(read_first.wait, 10)
            yield chunk({"content": " world" if relayed else " (held: nothing was relayed)"})
            yield chunk({}, "stop") + b"data: [DONE]\n\n"

        return 200, "text/event-stream", events()

    with serving(held) as upstream_url:
        proxy = Proxy(upstream=WireForwarder("up", base_url=upstream_url, api_key="k"))
        with running(proxy) as url, client(url) as sdk:
            stream = sdk.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "Hi"}], stream=True
            )
            text = []
            for event in stream:
                text.append(event.choices[0].delta.content or "")
                read_first.set()
    assert "".join(text) == "Hello world"
    saved = Cassette.load(proxy.cassette.save(tmp_path / "held.yaml"))
    assert saved.interactions[0].streamed
    assert saved.interactions[0].response().text == "Hello world"


def test_a_live_stream_that_breaks_off_is_cut_for_the_agent_and_recorded_as_failed(
    tmp_path: Path,
) -> None:
    async def broken(wire: Any, body: Any, headers: Any) -> Any:
        async def events() -> Any:
            yield chunk({"role": "assistant", "content": "Hello"})
            raise ConnectionResetError("the model server went away")

        return 200, "text/event-stream", events()

    with serving(broken) as upstream_url:
        proxy = Proxy(upstream=WireForwarder("up", base_url=upstream_url, api_key="k"))
        with running(proxy) as url, client(url, max_retries=0) as sdk:
            stream = sdk.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "Hi"}], stream=True
            )
            with pytest.raises(openai.APIConnectionError):
                list(stream)
    assert "the stream broke off" in proxy.tally.upstream_failures[0]
    saved = Cassette.load(proxy.cassette.save(tmp_path / "broken.yaml"))
    failure = saved.interactions[0].failure
    assert failure is not None and "the stream broke off" in failure.message


TYPESCRIPT = Path(__file__).resolve().parent.parent / "golden" / "typescript_agent"


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node on PATH")
@pytest.mark.skipif(
    not (TYPESCRIPT / "node_modules" / "openai").is_dir(),
    reason="needs golden/typescript_agent/node_modules: run `npm ci` in golden/typescript_agent",
)
def test_a_node_agent_replays_a_golden_case_s_cassette_through_the_command() -> None:
    """The TypeScript parcel desk (the openai npm package), started by hand with
    OPENAI_BASE_URL from the proxy's line, answered from its golden case's cassette."""
    cassette = TYPESCRIPT.parent.parent / "replays" / "typescript_agent" / "track-parcel.yaml"

    def desk(url: str, question: str) -> subprocess.CompletedProcess[str]:
        turn = {"input": question, "context": {"customer": "Ada Lovelace"}, "turn": 1}
        return subprocess.run(
            ["node", "--import", "tsx", "agent.ts"],
            input=orjson.dumps({**turn, "model": "reference-typescript"}).decode(),
            capture_output=True,
            text=True,
            cwd=TYPESCRIPT,
            env={**os.environ, "OPENAI_BASE_URL": url, "OPENAI_API_KEY": "x"},
            timeout=120,
        )

    with proxy_command("--replay", str(cassette)) as (url, process):
        answered = desk(url, "Where is my parcel PX-1001?")
        refused = desk(url, "Where is my parcel PX-1002?")
        process.send_signal(signal.SIGTERM)
        out, _ = process.communicate(timeout=30)
    assert answered.returncode == 0, answered.stderr
    assert "out for delivery" in answered.stdout and "2026-07-14" in answered.stdout
    assert refused.returncode != 0
    assert "nearest is #1 of 2" in refused.stderr and "PX-1002" in refused.stderr
    assert "3 call(s): 2 replayed, 0 forwarded, 1 refused" in out
