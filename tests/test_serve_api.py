"""`agentbench serve`'s HTTP API through real clients: the openai SDK (sync, async, streaming)
and plain HTTP for the runs API, errors, auth and metrics."""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx2 as httpx
import openai
import orjson
import pytest
from serve_support import Desk, desk_agent, served, service_for

from agentbench.runtime.models import FunctionModel

QUESTION = [{"role": "user", "content": "Where is my order A17?"}]


def sdk(base_url: str, key: str = "unused") -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key=key, max_retries=0)


def test_the_openai_sdk_gets_the_agents_final_answer() -> None:
    with served(service_for(desk_agent())) as url:
        response = sdk(url).chat.completions.with_raw_response.create(
            model="desk", messages=QUESTION
        )
        answer = response.parse()
    assert answer.choices[0].message.content == "Order A17 is delivered."
    assert answer.choices[0].finish_reason == "stop"
    assert answer.model == "desk"
    assert answer.usage.prompt_tokens > 0 and answer.usage.completion_tokens > 0
    extension = answer.model_extra["agentbench"]
    assert extension["stop_reason"] == "completed"
    assert response.headers["x-agentbench-run-id"] == extension["run_id"]
    assert response.headers["x-request-id"] == extension["request_id"]


async def test_async_sdk_streams_the_same_answer_ending_with_usage() -> None:
    with served(service_for(desk_agent())) as url:
        client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
        stream = await client.chat.completions.create(
            model="desk", messages=QUESTION, stream=True, stream_options={"include_usage": True}
        )
        chunks = [chunk async for chunk in stream]
        whole = await client.chat.completions.create(model="desk", messages=QUESTION)
        await client.close()
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content == "Order A17 is delivered."
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens > 0
    assert len({c.id for c in chunks}) == 1


def test_a_streaming_model_streams_its_words_as_they_come() -> None:
    with served(service_for(desk_agent(stream=True))) as url:
        chunks = list(
            sdk(url).chat.completions.create(model="desk", messages=QUESTION, stream=True)
        )
    pieces = [c.choices[0].delta.content for c in chunks if c.choices]
    pieces = [piece for piece in pieces if piece]
    assert "".join(pieces) == "Order A17 is delivered."
    assert len(pieces) == 4  # word by word, not one final chunk


def test_runs_api_accepts_reports_and_replays_events_to_a_late_subscriber() -> None:
    with served(service_for(desk_agent())) as url, httpx.Client(base_url=url) as http:
        asked = {"input": "Where is A17?", "context": {"tier": "gold"}}
        created = http.post("/v1/runs", json=asked)
        assert created.status_code == 202
        run_id = created.json()["id"]
        assert created.headers["location"] == f"/v1/runs/{run_id}"
        frames = _events(http, run_id)
        status = http.get(f"/v1/runs/{run_id}").json()
        # Subscribing again after the end still gets every event from the first; with
        # Last-Event-ID, only those after it.
        again = _events(http, run_id)
        resumed = _events(http, run_id, last_event_id=2)
    kinds = [kind for kind, _ in frames]
    assert kinds[0] == "run_started" and kinds[-2:] == ["run_finished", "done"]
    assert "tool_finished" in kinds
    assert orjson.loads(frames[0][1])["context"]["session"] == {"tier": "gold"}
    assert again == frames
    assert resumed == frames[3:]
    assert status["status"] == "finished" and status["stop_reason"] == "completed"
    assert status["output"] == "Order A17 is delivered."


def test_delete_cancels_a_running_run_and_finished_runs_say_so() -> None:
    desk = Desk(delay_s=30)
    with served(service_for(desk_agent(desk))) as url, httpx.Client(base_url=url) as http:
        run_id = http.post("/v1/runs", json={"input": "Where is A17?"}).json()["id"]
        _wait_for(lambda: desk.calls == 1)
        cancelled = http.delete(f"/v1/runs/{run_id}")
        again = http.delete(f"/v1/runs/{run_id}")
        unknown = http.get("/v1/runs/run_doesnotexist")
    assert cancelled.status_code == 200
    assert cancelled.json()["stop_reason"] == "cancelled"
    assert again.status_code == 409
    assert unknown.status_code == 404 and "run_doesnotexist" in unknown.json()["error"]["message"]


def test_models_health_and_metrics() -> None:
    with served(service_for(desk_agent(), desk_agent(name="billing"))) as url:
        client = sdk(url)
        assert sorted(m.id for m in client.models.list()) == ["billing", "desk"]
        client.chat.completions.create(model="billing", messages=QUESTION)
        with httpx.Client(base_url=url) as http:
            health = http.get("/healthz").json()
            metrics = http.get("/metrics").text
    assert health["status"] == "ok" and health["agents"] == ["billing", "desk"]
    assert 'agentbench_runs_total{agent="billing",stop_reason="completed"} 1.0' in metrics
    assert 'agentbench_tokens_total{agent="billing",direction="input"}' in metrics
    assert "agentbench_run_duration_seconds_bucket" in metrics
    assert (
        'agentbench_http_requests_total{method="POST",route="/v1/chat/completions",status="200"}'
        in metrics
    )


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        (b'{"model": "desk", "messages": [}', 400, "not valid JSON at line 1, column 32"),
        (b'{"model": "desk"}', 422, "messages: is required"),
        (b'{"model": "desk", "messages": [{"role": "robot"}]}', 422, "messages[0].role"),
        (
            b'{"model": "desk", "messages": [{"role": "user", "content": 5}]}',
            422,
            "messages[0].content: Input should be a valid string — or — Input should be a "
            "valid list",
        ),
        (
            b'{"model": "desk", "messages": [{"role": "user", "content": "x"}],'
            b' "tools": [{"type": "function", "function": {"name": "f"}}]}',
            422,
            "tools: Value error, a served agent runs its own tools",
        ),
        (
            b'{"model": "nobody", "messages": [{"role": "user", "content": "x"}]}',
            404,
            "agent 'nobody' is not served here (served: desk)",
        ),
        (
            b'{"model": "desk", "messages": [{"role": "user", "content":'
            b' [{"type": "image_url", "image_url": {"url": "x"}}]}]}',
            422,
            "a served agent reads text parts only",
        ),
    ],
)
def test_malformed_requests_are_refused_naming_the_field(
    body: bytes, status: int, says: str
) -> None:
    with served(service_for(desk_agent())) as url, httpx.Client(base_url=url) as http:
        response = http.post(
            "/v1/chat/completions", content=body, headers={"content-type": "application/json"}
        )
    assert response.status_code == status
    assert says in response.json()["error"]["message"]


def test_bodies_over_the_limit_get_413_declared_or_chunked() -> None:
    service = service_for(desk_agent(), max_body_bytes=10_000)
    with served(service) as url, httpx.Client(base_url=url) as http:
        declared = http.post("/v1/chat/completions", content=b"x" * 20_000)
        chunked = http.post("/v1/runs", content=iter([b"x" * 6_000, b"y" * 6_000]))
        small = http.post("/v1/runs", json={"input": "hi"})
    assert declared.status_code == 413 and chunked.status_code == 413
    assert "10,000-byte limit" in declared.json()["error"]["message"]
    assert small.status_code == 202


def test_a_bearer_token_guards_everything_but_healthz() -> None:
    with served(service_for(desk_agent(), api_key="s3cret-key")) as url:
        with pytest.raises(openai.AuthenticationError, match="missing or wrong API key"):
            sdk(url, key="wrong").chat.completions.create(model="desk", messages=QUESTION)
        answer = sdk(url, key="s3cret-key").chat.completions.create(model="desk", messages=QUESTION)
        with httpx.Client(base_url=url) as http:
            assert http.get("/healthz").status_code == 200
            assert http.get("/metrics").status_code == 401
            assert http.get("/v1/models").status_code == 401
    assert answer.choices[0].message.content == "Order A17 is delivered."


def test_a_failing_agent_is_an_error_answer_not_a_traceback() -> None:
    def broken(request: dict) -> str:
        raise ValueError("the model function is broken")

    agent = desk_agent()
    agent.model = FunctionModel(broken)
    with served(service_for(agent)) as url:
        with pytest.raises(openai.APIStatusError) as caught:
            sdk(url).chat.completions.create(model="desk", messages=QUESTION)
        stream = sdk(url).chat.completions.create(model="desk", messages=QUESTION, stream=True)
        with pytest.raises(openai.APIError, match="the model function is broken"):
            list(stream)
    assert caught.value.status_code in (500, 502)
    assert "the model function is broken" in caught.value.message
    assert "Traceback" not in caught.value.message


def _events(
    http: httpx.Client, run_id: str, last_event_id: int | None = None
) -> list[tuple[str, bytes]]:
    headers = {"last-event-id": str(last_event_id)} if last_event_id is not None else {}
    frames: list[tuple[str, bytes]] = []
    kind = ""
    with http.stream("GET", f"/v1/runs/{run_id}/events", headers=headers) as stream:
        for line in stream.iter_lines():
            if line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: "):
                frames.append((kind, line[6:].encode()))
    return frames


def _wait_for(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.01)


def test_a_slow_answer_streams_keep_alives_the_sdk_reads_past(monkeypatch) -> None:
    import agentbench.serve.app as app

    monkeypatch.setattr(app, "KEEPALIVE_S", 0.05)
    with served(service_for(desk_agent(Desk(delay_s=0.3)))) as url:
        with httpx.Client(base_url=url) as http:
            raw = http.post(
                "/v1/chat/completions",
                json={"model": "desk", "messages": QUESTION, "stream": True},
            ).text
        chunks = list(
            sdk(url).chat.completions.create(model="desk", messages=QUESTION, stream=True)
        )
    assert ": keep-alive" in raw
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Order A17 is delivered."


def test_secrets_in_requests_never_reach_the_store(tmp_path) -> None:
    from agentbench.trace import TraceStore

    secret = "sk-proj-" + "Q7x9Lm2Vb8Nc4Rt6Yw1Zs3Kd5Hf0Jg"
    store = TraceStore(tmp_path / "traces.duckdb")
    with served(service_for(desk_agent(), store=store, api_key="s3rv3r-k3y-value")) as url:
        sdk(url, key="s3rv3r-k3y-value").chat.completions.create(
            model="desk",
            messages=[{"role": "user", "content": f"my key is {secret}, where is A17?"}],
        )
    store.close()
    stored = (tmp_path / "traces.duckdb").read_bytes()
    journals = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    for needle in (secret, "s3rv3r-k3y-value"):
        assert needle.encode() not in stored and needle.encode() not in journals
    assert "[REDACTED]" in TraceStore(tmp_path / "traces.duckdb").sql(
        "SELECT input FROM runs"
    ).rows[0][0]
