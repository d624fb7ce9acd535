"""The loopback server a boundary target talks to: every request it cannot read gets an
answer in OpenAI's error shape, and nothing it is sent is read past its bounds."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from agentbench.boundary.server import MAX_HEAD, BoundaryServer


async def _answer(wire, body, headers):  # type: ignore[no-untyped-def]
    return 200, "application/json", orjson.dumps({"wire": wire.name, "body": body})


async def _exchange(data: bytes) -> tuple[int, dict]:
    async with BoundaryServer(_answer, model="m") as server:
        port = int(server.base_url.rsplit(":", 1)[1].split("/")[0])
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(data)
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 10)
        writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), orjson.loads(body)


CLOSE = b"Connection: close\r\n"


@pytest.mark.parametrize(
    ("data", "status", "says"),
    [
        (b"GET /v1/models HTTP/1.1\r\n" + CLOSE + b"\r\n", 200, None),
        (b"POST /v1/nope HTTP/1.1\r\nContent-Length: 2\r\n" + CLOSE + b"\r\n{}", 404, "not POST"),
        (b"garbage\r\n\r\n", 400, "not an HTTP/1.1 request line"),
        (
            b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 5\r\n" + CLOSE + b"\r\nnotjs",
            400,
            "not JSON",
        ),
        (
            b"POST /v1/responses HTTP/1.1\r\nContent-Length: 2\r\n" + CLOSE + b"\r\n[]",
            400,
            "not a JSON object",
        ),
        (b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: abc\r\n\r\n", 400, "not a number"),
        (b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n", 413, "over"),
        (b"POST /v1/x HTTP/1.1\r\nX: " + b"a" * (MAX_HEAD + 10) + b"\r\n\r\n", 431, "head"),
        (
            b"POST /v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            400,
            "hexadecimal",
        ),
    ],
)
def test_what_the_server_cannot_read_is_answered_in_openai_s_error_shape(
    data: bytes, status: int, says: str | None
) -> None:
    got, body = asyncio.run(_exchange(data))
    assert got == status, body
    if says is not None:
        assert says in body["error"]["message"]


def test_a_chunked_body_reaches_the_model_api() -> None:
    data = (
        b"POST /v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
        + CLOSE
        + b'\r\n7\r\n{"a": 1\r\n1\r\n}\r\n0\r\n\r\n'
    )
    status, body = asyncio.run(_exchange(data))
    assert status == 200
    assert body == {"wire": "chat", "body": {"a": 1}}


def test_an_event_stream_is_sent_chunked_one_http_chunk_per_event() -> None:
    events = [b'data: {"n":1}\n\n', b'event: x\ndata: {"n":2}\n\n', b"data: [DONE]\n\n"]

    async def stream(wire, body, headers):  # type: ignore[no-untyped-def]
        return 200, "text/event-stream", b"".join(events)

    async def exchange() -> bytes:
        async with BoundaryServer(stream, model="m") as server:
            port = int(server.base_url.rsplit(":", 1)[1].split("/")[0])
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 2\r\n" + CLOSE)
            writer.write(b"\r\n{}")
            await writer.drain()
            answer = await asyncio.wait_for(reader.read(), 10)
            writer.close()
            return answer

    head, _, body = asyncio.run(exchange()).partition(b"\r\n\r\n")
    assert b"Transfer-Encoding: chunked" in head
    assert b"Content-Length" not in head
    chunks = []
    while True:
        size_line, _, body = body.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            break
        chunks.append(body[:size])
        assert body[size : size + 2] == b"\r\n"
        body = body[size + 2 :]
    assert chunks == events
