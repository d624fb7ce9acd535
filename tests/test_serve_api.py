"""`agentbench serve`'s HTTP API through real clients: the openai SDK (sync, async, streaming)
and plain HTTP for the runs API, errors, auth and metrics."""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx2 as httpx
import openai
import orjson
import pytest
from sdk_clients import closed_after_test
from serve_support import Desk, desk_agent, keyring, served, service_for

from agentbench import Agent, ModelSettings, ToolCall, tool
from agentbench.runtime.models import FunctionModel
from agentbench.serve.service import Service
from agentbench.trace import TraceStore

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

QUESTION = [{"role": "user", "content": "Where is my order A17?"}]


def sdk(base_url: str, key: str = "unused") -> openai.OpenAI:
    return closed_after_test(openai.OpenAI(base_url=f"{base_url}/v1", api_key=key, max_retries=0))


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
    keys = keyring({"alice": "s3cret-key-of-alice"})
    with served(service_for(desk_agent(), keys=keys)) as url:
        with pytest.raises(openai.AuthenticationError, match="missing or wrong API key"):
            sdk(url, key="wrong").chat.completions.create(model="desk", messages=QUESTION)
        answer = sdk(url, key="s3cret-key-of-alice").chat.completions.create(
            model="desk", messages=QUESTION
        )
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
    import agentbench.serve.streams as streams

    monkeypatch.setattr(streams, "KEEPALIVE_S", 0.05)
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
    secret = "sk-proj-" + "Q7x9Lm2Vb8Nc4Rt6Yw1Zs3Kd5Hf0Jg"
    store = TraceStore(tmp_path / "traces.duckdb")
    keys = keyring({"alice": "s3rv3r-k3y-value"})
    with served(service_for(desk_agent(), store=store, keys=keys)) as url:
        sdk(url, key="s3rv3r-k3y-value").chat.completions.create(
            model="desk",
            messages=[{"role": "user", "content": f"my key is {secret}, where is A17?"}],
        )
    store.close()
    stored = (tmp_path / "traces.duckdb").read_bytes()
    journals = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    for needle in (secret, "s3rv3r-k3y-value"):
        assert needle.encode() not in stored and needle.encode() not in journals
    assert (
        "[REDACTED]"
        in TraceStore(tmp_path / "traces.duckdb").sql("SELECT input FROM runs").rows[0][0]
    )


TOKEN, DB_PASSWORD = "tok3nValue12345678abcd", "hunter2-correct-horse-battery"


def _leaky(request: dict) -> str:
    """A model that repeats what it should not: a bearer token and the server's password."""
    return f"Connect with Bearer {TOKEN} and password {DB_PASSWORD}.\nThen retry."


def _raw_events(http: httpx.Client, run_id: str) -> bytes:
    with http.stream("GET", f"/v1/runs/{run_id}/events") as stream:
        return stream.read()


def test_no_answer_shows_a_secret_in_clear(tmp_path, monkeypatch) -> None:
    """The answer, its stream (a token split across chunks), `GET /v1/runs/{id}`, the events
    and their `done` frame, an error's message: each passes the store's redaction, the
    secrets of the server's own environment included."""
    monkeypatch.setenv("SERVE_DB_PASSWORD", DB_PASSWORD)
    plain, streaming, failing = (
        desk_agent(name="plain"),
        desk_agent(name="streaming", stream=True),
        desk_agent(name="failing"),
    )
    plain.model = streaming.model = FunctionModel(_leaky)

    def broken(request: dict) -> str:
        raise ValueError(f"cannot log in with {DB_PASSWORD}")

    failing.model = FunctionModel(broken)
    store = TraceStore(tmp_path / "traces.duckdb")
    with served(service_for(plain, streaming, failing, store=store)) as url:
        client = sdk(url)
        answer = client.chat.completions.create(model="plain", messages=QUESTION)
        chunks = list(
            client.chat.completions.create(model="streaming", messages=QUESTION, stream=True)
        )
        with pytest.raises(openai.APIStatusError) as failed:
            client.chat.completions.create(model="failing", messages=QUESTION)
        with httpx.Client(base_url=url) as http:
            run_ids = [
                answer.model_extra["agentbench"]["run_id"],
                chunks[-1].model_extra["agentbench"]["run_id"],
                failed.value.response.headers["x-agentbench-run-id"],
            ]
            shown = b"".join(
                http.get(f"/v1/runs/{run_id}").content + _raw_events(http, run_id)
                for run_id in run_ids
            )
    store.close()
    text = answer.choices[0].message.content
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Connect with Bearer [REDACTED] and password [REDACTED].\nThen retry."
    assert streamed == text  # the stream adds up to the same redacted answer
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) > 3
    assert "[REDACTED]" in failed.value.message
    for secret in (TOKEN, DB_PASSWORD):
        assert secret not in failed.value.message
        assert secret.encode() not in shown
        assert secret.encode() not in (tmp_path / "traces.duckdb").read_bytes()
    assert shown.count(b"event: done") == 3 and b"Then retry." in shown


def _stubborn(request: dict) -> object:
    """A model that never answers: it looks another order up every time."""
    return ToolCall("order_status", {"order_id": f"A{len(request['messages'])}"})


def test_a_run_a_brake_stopped_says_so_and_why() -> None:
    agent = desk_agent(name="stubborn")
    agent.model = FunctionModel(_stubborn)
    agent.limits = agent.limits.model_copy(update={"max_iterations": 2})
    with served(service_for(agent)) as url:
        client = sdk(url)
        answer = client.chat.completions.create(model="stubborn", messages=QUESTION)
        chunks = list(
            client.chat.completions.create(model="stubborn", messages=QUESTION, stream=True)
        )
        with httpx.Client(base_url=url) as http:
            status = http.get(f"/v1/runs/{answer.model_extra['agentbench']['run_id']}").json()
    why = "reached max_iterations=2 without a final answer"
    choice = answer.choices[0]
    assert (choice.finish_reason, choice.message.content) == ("max_iterations", None)
    assert answer.model_extra["agentbench"]["stop_reason"] == "max_iterations"
    assert answer.model_extra["agentbench"]["stop_detail"] == why
    last = [c for c in chunks if c.choices][-1]
    assert last.choices[0].finish_reason == "max_iterations"
    assert last.model_extra["agentbench"]["stop_detail"] == why
    assert (status["stop_reason"], status["stop_detail"]) == ("max_iterations", why)


def _greeter() -> Agent:
    def greet(request: dict) -> str:
        return request["messages"][0]["content"]  # the instructions, as written for this run

    return Agent(
        name="greeter", instructions="Greet {{ user }} by name.", model=FunctionModel(greet)
    )


def test_only_instructions_with_variables_are_rendered_to_look_for_a_missing_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Plain-text instructions cannot lack a variable: no render a request for them."""
    plain = Agent(name="plain", instructions="Greet the user.")
    templated = _greeter()
    rendered: list[str] = []
    for agent in (plain, templated):
        render = agent.template.render
        monkeypatch.setattr(
            agent.template,
            "render",
            lambda v, _r=render, _a=agent: rendered.append(_a.name) or _r(v),
        )
    assert Service.missing_variable(plain, {}) is None
    missing = Service.missing_variable(templated, {})
    assert missing is not None and missing.variable == "user"
    assert Service.missing_variable(templated, {"user": "Ada"}) is None
    assert rendered == ["greeter", "greeter"]


def test_context_passes_through_chat_completions_and_a_missing_one_is_a_400(tmp_path) -> None:
    store = TraceStore(tmp_path / "traces.duckdb")
    with served(service_for(_greeter(), store=store)) as url:
        retrying = closed_after_test(openai.OpenAI(base_url=f"{url}/v1", api_key="unused"))
        greeted = retrying.chat.completions.create(
            model="greeter",
            messages=QUESTION,
            extra_body={"agentbench": {"context": {"user": "Ada"}}},
        )
        with pytest.raises(openai.BadRequestError) as missing:
            retrying.chat.completions.create(model="greeter", messages=QUESTION)
        with httpx.Client(base_url=url) as http:
            background = http.post("/v1/runs", json={"agent": "greeter", "input": "hi"})
            unknown_field = http.post(
                "/v1/chat/completions",
                json={"model": "greeter", "messages": QUESTION, "agentbench": {"ctx": {}}},
            )
    store.close()
    assert greeted.choices[0].message.content == "Greet Ada by name."
    assert missing.value.status_code == 400
    assert "variable 'user' is not defined" in missing.value.message
    assert missing.value.body["param"] == "agentbench.context.user"
    assert background.status_code == 400 and "'user'" in background.json()["error"]["message"]
    assert unknown_field.status_code == 422
    assert "agentbench.ctx: Extra inputs are not permitted" in unknown_field.text
    stored = TraceStore(tmp_path / "traces.duckdb").sql("SELECT stop_reason FROM runs").rows
    assert stored == [("completed",)]  # the refused requests started no run


@pytest.mark.parametrize(
    ("path", "body", "where"),
    [
        (
            "/v1/chat/completions",
            b'{"model": "desk", "messages": [{"role": "user", "content": "half \\ud83d"}]}',
            "messages[0].content (\\ud83d at character 5)",
        ),
        (
            "/v1/chat/completions",
            b'{"model": "desk", "messages": [{"role": "user", "content": "x"}],'
            b' "agentbench": {"context": {"name": "\\udc00"}}}',
            "agentbench.context.name",
        ),
        ("/v1/runs", b'{"input": "x", "context": {"k\\ud800": 1}}', "a key in context"),
        ("/v1/runs", b'{"input": [{"role": "user", "content": "\\ud800"}]}', "input[0].content"),
    ],
)
def test_a_lone_surrogate_is_a_400_naming_where_with_nothing_lost(
    tmp_path, caplog, path: str, body: bytes, where: str
) -> None:
    store = TraceStore(tmp_path / "traces.duckdb")
    with served(service_for(desk_agent(), store=store)) as url, httpx.Client(base_url=url) as http:
        refused = http.post(path, content=body, headers={"content-type": "application/json"})
        answered = http.post("/v1/runs", json={"input": "Where is A17?"})
    store.close()
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == "invalid_unicode"
    assert f"{where}" in refused.json()["error"]["message"]
    assert "Traceback" not in caplog.text
    assert answered.status_code == 202  # the server is none the worse
    rows = TraceStore(tmp_path / "traces.duckdb").sql("SELECT input FROM runs").rows
    assert rows == [('"Where is A17?"',)]


def test_half_an_emoji_from_a_tool_is_answered_as_the_replacement_character(caplog) -> None:
    def half(request: dict) -> str:
        return "Your parcel \ud83d is on its way."

    agent = desk_agent()
    agent.model = FunctionModel(half)
    with served(service_for(agent)) as url:
        answer = sdk(url).chat.completions.create(model="desk", messages=QUESTION)
        chunks = list(
            sdk(url).chat.completions.create(model="desk", messages=QUESTION, stream=True)
        )
    assert answer.choices[0].message.content == "Your parcel \ufffd is on its way."
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == (
        "Your parcel \ufffd is on its way."
    )
    assert "Traceback" not in caplog.text


def test_a_secret_seen_in_a_tool_call_is_masked_in_the_answer() -> None:
    """A password the model passed to a tool (masked there by its argument's name) is masked
    wherever it comes again: the answer, its stream, the run's status and events."""
    password = "Winter-Is-Coming-2024"

    @tool(effect="read_only")
    def log_in(user: str, password: str) -> str:
        """Log a user in."""
        return "logged in"

    def careless(request: dict) -> object:
        if request["messages"][-1]["role"] == "tool":
            return f"Logged ada in with {password}, as you asked."
        return ToolCall("log_in", {"user": "ada", "password": password})

    agents = [
        Agent(
            name=name,
            tools=[log_in],
            model=FunctionModel(careless),
            model_settings=ModelSettings(stream=name == "streaming"),
        )
        for name in ("plain", "streaming")
    ]
    with served(service_for(*agents)) as url:
        client = sdk(url)
        answer = client.chat.completions.create(model="plain", messages=QUESTION)
        chunks = list(
            client.chat.completions.create(model="streaming", messages=QUESTION, stream=True)
        )
        with httpx.Client(base_url=url) as http:
            run_id = answer.model_extra["agentbench"]["run_id"]
            shown = http.get(f"/v1/runs/{run_id}").content + _raw_events(http, run_id)
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert answer.choices[0].message.content == "Logged ada in with [REDACTED], as you asked."
    assert streamed == answer.choices[0].message.content
    assert password.encode() not in shown and b'"password":"[REDACTED]"' in shown
