"""`agentbench serve` under load: the concurrency limit, the queue bound and 429s, timeouts,
clients that go away, clients too slow to send a request — every run accounted for in the
store, no socket held by a client that does not keep time."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time

import httpx2 as httpx
import openai
import pytest
from sdk_clients import closed_after_test
from serve_support import Desk, desk_agent, served, service_for

from agentbench.serve import Caller
from agentbench.trace import TraceStore

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

QUESTION = [{"role": "user", "content": "Where is my order A17?"}]


async def _ask_all(url: str, count: int) -> list[object]:
    client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
    client_http = client.with_raw_response

    async def one(index: int) -> object:
        try:
            return await client_http.chat.completions.create(
                model="desk",
                messages=QUESTION,
                extra_headers={"x-conversation-id": f"conv-{index}"},
            )
        except openai.APIStatusError as error:
            return error

    try:
        return list(await asyncio.gather(*(one(i) for i in range(count))))
    finally:
        await client.close()


def _stored(store: TraceStore) -> dict[str, str]:
    rows = store.sql("SELECT run_id, stop_reason FROM runs WHERE parent_run_id IS NULL").rows
    return dict(rows)


async def test_200_concurrent_requests_run_8_at_a_time_and_are_all_stored(tmp_path) -> None:
    desk = Desk(delay_s=0.02)
    store = TraceStore(tmp_path / "traces.duckdb")
    service = service_for(desk_agent(desk), store=store, concurrency=8, queue=500)
    with served(service) as url:
        answers = await _ask_all(url, 200)
    store.close()
    ok = [a for a in answers if not isinstance(a, Exception)]
    assert len(ok) == 200, [a for a in answers if isinstance(a, Exception)][:3]
    assert desk.most_in_flight <= 8
    assert desk.most_in_flight >= 2  # they did run at once
    run_ids = {a.headers["x-agentbench-run-id"] for a in ok}
    stored = TraceStore(tmp_path / "traces.duckdb")
    assert _stored(stored) == {run_id: "completed" for run_id in run_ids}


async def test_past_the_queue_bound_requests_get_429_with_retry_after(tmp_path) -> None:
    desk = Desk(delay_s=0.3)
    store = TraceStore(tmp_path / "traces.duckdb")
    service = service_for(desk_agent(desk), store=store, concurrency=8, queue=16)
    with served(service) as url:
        answers = await _ask_all(url, 200)
    store.close()
    ok = [a for a in answers if not isinstance(a, Exception)]
    refused = [a for a in answers if isinstance(a, Exception)]
    assert {a.status_code for a in refused} == {429}
    assert all(int(a.response.headers["retry-after"]) >= 1 for a in refused)
    assert "server busy" in refused[0].message
    # All 200 arrive at once: 8 run and 16 wait; the rest are refused, none fail otherwise.
    assert len(ok) >= 24 and len(ok) + len(refused) == 200
    stored = TraceStore(tmp_path / "traces.duckdb")
    assert set(_stored(stored)) == {a.headers["x-agentbench-run-id"] for a in ok}


def test_a_request_over_its_time_limit_gets_504(tmp_path) -> None:
    store = TraceStore(tmp_path / "traces.duckdb")
    service = service_for(desk_agent(Desk(delay_s=30)), store=store, timeout_s=0.3)
    with served(service) as url:
        client = closed_after_test(
            openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
        )
        with pytest.raises(openai.APIStatusError) as caught:
            client.chat.completions.with_raw_response.create(model="desk", messages=QUESTION)
    store.close()
    assert caught.value.status_code == 504
    assert "ran out of its 0.3 s budget (the server's --timeout)" in caught.value.message
    run_id = caught.value.response.headers["x-agentbench-run-id"]
    assert _stored(TraceStore(tmp_path / "traces.duckdb")) == {run_id: "timeout"}


def test_a_client_that_disconnects_mid_stream_cancels_its_run(tmp_path) -> None:
    desk = Desk(delay_s=30)
    store = TraceStore(tmp_path / "traces.duckdb")
    service = service_for(desk_agent(desk), store=store)
    with served(service) as url:
        with (
            httpx.Client(base_url=url) as http,
            http.stream(
                "POST",
                "/v1/chat/completions",
                json={"model": "desk", "messages": QUESTION, "stream": True},
            ) as stream,
        ):
            run_id = stream.headers["x-agentbench-run-id"]
            first = next(stream.iter_lines())
            assert first.startswith("data: ")
            _wait_for(lambda: desk.calls == 1)
        # The stream is closed: the server notices and cancels the run.
        _wait_for(lambda: service.runs.get(run_id, Caller("local")).done)
        assert service.runs.get(run_id, Caller("local")).stop_reason == "cancelled"
    store.close()
    assert _stored(TraceStore(tmp_path / "traces.duckdb")) == {run_id: "cancelled"}


def test_a_client_that_disconnects_while_waiting_cancels_its_run(tmp_path) -> None:
    desk = Desk(delay_s=30)
    store = TraceStore(tmp_path / "traces.duckdb")
    service = service_for(desk_agent(desk), store=store)
    with served(service) as url:
        host, port = url.removeprefix("http://").split(":")
        body = b'{"model": "desk", "messages": [{"role": "user", "content": "hi"}]}'
        with socket.create_connection((host, int(port))) as conn:
            conn.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: "
                b"application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
            )
            _wait_for(lambda: desk.calls == 1)
        _wait_for(lambda: not service.runs.active)
        (run,) = service.runs._runs.values()
        assert run.stop_reason == "cancelled"
    store.close()
    assert _stored(TraceStore(tmp_path / "traces.duckdb")) == {run.id: "cancelled"}


def _wait_for(condition, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.01)


def _closed_by_server(conn: socket.socket) -> bytes:
    """What the server sent before closing `conn` (a server that holds it open fails the
    test at the socket's timeout: the slow client would have kept its socket)."""
    received = b""
    while True:
        chunk = conn.recv(4096)
        if not chunk:
            return received
        received += chunk


def test_slow_clients_hold_no_socket_past_the_read_deadlines() -> None:
    """300 slowloris sockets (headers never finished), a socket that says nothing, a body
    that trickles: each is closed at its deadline, late bodies answered 408, while a client
    that keeps time is served."""
    service = service_for(desk_agent(), header_timeout_s=0.5, body_timeout_s=0.5)
    with served(service) as url:
        host, port = url.removeprefix("http://").split(":")
        slow = [socket.create_connection((host, int(port)), timeout=30) for _ in range(300)]
        for conn in slow:
            conn.sendall(b"POST /v1/runs HTTP/1.1\r\nhost: 127.0.0.1\r\nx-slow: 1")
        silent = socket.create_connection((host, int(port)), timeout=30)
        trickle = socket.create_connection((host, int(port)), timeout=30)
        trickle.sendall(
            b"POST /v1/runs HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
            b'content-length: 40\r\n\r\n{"input": '
        )
        kept = [_closed_by_server(conn) for conn in slow]
        said_nothing = _closed_by_server(silent)
        late_body = _closed_by_server(trickle)
        with httpx.Client(base_url=url) as http:
            served_meanwhile = http.post("/v1/runs", json={"input": "Where is A17?"})
        for conn in (*slow, silent, trickle):
            conn.close()
    assert {answer.split(b"\r\n")[0] for answer in kept} == {b"HTTP/1.1 408 Request Timeout"}
    assert said_nothing == b""
    assert late_body.startswith(b"HTTP/1.1 408 Request Timeout")
    assert b"connection: close" in late_body.lower()
    assert served_meanwhile.status_code == 202


def test_a_request_head_past_the_bound_is_refused_and_its_connection_closed() -> None:
    """A head sent in pieces, never ending, within the header deadline: refused (400) once it
    is past 16 KB, the next client served."""
    service = service_for(desk_agent(), header_timeout_s=30, body_timeout_s=30)
    with served(service) as url:
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=30) as conn:
            conn.sendall(b"POST /v1/runs HTTP/1.1\r\nhost: 127.0.0.1\r\n")
            with contextlib.suppress(ConnectionError):
                for index in range(64):  # 64 KB of headers at most, 1 KB a piece
                    conn.sendall(b"x-filler-%d: %s\r\n" % (index, b"a" * 1000))
                    time.sleep(0.002)
            answer = _closed_by_server(conn)
        with httpx.Client(base_url=url) as http:
            served_after = http.post("/v1/runs", json={"input": "Where is A17?"})
    assert answer.startswith(b"HTTP/1.1 400 "), answer[:200]
    assert served_after.status_code == 202
