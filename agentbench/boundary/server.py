"""The loopback server a boundary target's model client talks to: one per case.

A small HTTP/1.1 server on asyncio, bound to 127.0.0.1 on a port the OS picks, running on the
harness's own event loop: a sync target calls it from its worker thread, an async one from
the loop itself, and neither can reach another case's server. Requests are bounded (head 64
KiB, body 64 MiB by default); keep-alive is honoured, so a client's connection pool works as
against a real provider. Each POST to a model API (`wire.wire_for`) goes to `answer`, which
returns the status, content type and body; anything else gets an OpenAI-shaped error. An event
stream (`text/event-stream`) is sent as a provider sends it: chunked, one HTTP chunk per event
in the body's order, so a client reads a recorded stream with its recorded chunking. A body
may also be an async iterator of events (a live stream relayed as it arrives): each is sent
as it comes; one that fails part-way leaves the stream cut, as a provider's dropped stream is.
"""

from __future__ import annotations

import asyncio
import contextlib
import http
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import orjson

from agentbench.boundary.chat_api import error_body
from agentbench.boundary.wire import Wire, wire_for

MAX_HEAD = 64 * 1024
MAX_BODY = 64 * 1024 * 1024

# A body, or an event stream's events as they arrive.
Payload = bytes | AsyncIterator[bytes]
Answer = Callable[[Wire, dict[str, Any], dict[str, str]], Awaitable[tuple[int, str, Payload]]]
# What answers `/mcp/...`: method, path, headers and body in; status, content type, body out
# (`mcp_proxy.http_front.McpRoutes`). It may raise ConnectionError to drop the connection.
McpAnswer = Callable[[str, str, dict[str, str], bytes], Awaitable[tuple[int, str, bytes]]]


class BadRequestError(Exception):
    """A request this server cannot read: answered with `status`, then the connection closes."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class BoundaryServer:
    """Serves `answer` on 127.0.0.1 until closed; `base_url` ends in `/v1`."""

    def __init__(
        self,
        answer: Answer,
        *,
        model: str = "",
        max_body: int = MAX_BODY,
        port: int = 0,
        mcp: McpAnswer | None = None,
    ) -> None:
        self._answer = answer
        self._mcp = mcp
        self._model = model
        self._max_body = max_body
        self._port = port  # 0: the OS picks a free one
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.base_url = ""

    async def start(self) -> BoundaryServer:
        self._server = await asyncio.start_server(
            self._connection, "127.0.0.1", self._port, limit=MAX_HEAD
        )
        port = self._server.sockets[0].getsockname()[1]
        self.base_url = f"http://127.0.0.1:{port}/v1"
        return self

    @property
    def root_url(self) -> str:
        """The server's address with no path: `http://127.0.0.1:PORT`."""
        return self.base_url.removesuffix("/v1")

    async def close(self) -> None:
        if self._server is None:
            return
        self._server.close()
        writers = list(self._writers)
        for writer in writers:  # idle keep-alive connections end with the case
            writer.close()
        for writer in writers:  # closed before the loop that owns them ends
            with contextlib.suppress(Exception):
                await writer.wait_closed()
        with contextlib.suppress(Exception):
            await self._server.wait_closed()
        self._server = None

    async def __aenter__(self) -> BoundaryServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while True:
                try:
                    request = await _read_request(reader, writer, self._max_body)
                except BadRequestError as exc:
                    await _send(writer, exc.status, "application/json", error_body(str(exc)), False)
                    return
                if request is None:
                    return
                method, path, headers, body = request
                keep = headers.get("connection", "").lower() != "close"
                status, content_type, payload = await self._route(method, path, headers, body)
                if isinstance(payload, bytes):
                    await _send(writer, status, content_type, payload, keep)
                elif not await _relay(writer, status, content_type, payload, keep):
                    return  # the stream was cut: so is the connection
                if not keep:
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return  # the client went away: nothing to answer
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _route(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, str, Payload]:
        if self._mcp is not None and (path == "/mcp" or path.startswith(("/mcp/", "/mcp?"))):
            return await self._mcp(method, path, headers, body)
        if method == "GET" and path.split("?", 1)[0].rstrip("/").endswith("/models"):
            listing = {"object": "list", "data": [{"id": self._model, "object": "model"}]}
            return 200, "application/json", orjson.dumps(listing)
        wire = wire_for(path)
        if method != "POST" or wire is None:
            message = (
                f"agentbench's boundary server answers the Chat Completions, Responses and "
                f"Anthropic Messages APIs (POST …/chat/completions, POST …/responses, POST "
                f"…/v1/messages), not {method} {path}"
            )
            return 404, "application/json", error_body(message, code="unknown_url")
        try:
            parsed = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            problem = f"the request body is not JSON: {exc}"
            return 400, "application/json", wire.error(problem, "invalid_request_error", None)
        if not isinstance(parsed, dict):
            problem = "the request body is not a JSON object"
            return 400, "application/json", wire.error(problem, "invalid_request_error", None)
        return await self._answer(wire, parsed, headers)


async def _read_request(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, max_body: int
) -> tuple[str, str, dict[str, str], bytes] | None:
    """One request off the connection, or None when the client closed it between requests."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial.strip():
            return None
        raise BadRequestError(400, "the connection closed in the middle of a request") from None
    except asyncio.LimitOverrunError:
        raise BadRequestError(431, f"the request head is over {MAX_HEAD} bytes") from None
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise BadRequestError(400, f"not an HTTP/1.1 request line: {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    if headers.get("expect", "").lower() == "100-continue":
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = await _chunked(reader, max_body)
    else:
        try:
            length = int(headers.get("content-length") or 0)
        except ValueError:
            raise BadRequestError(400, "Content-Length is not a number") from None
        if length < 0 or length > max_body:
            raise BadRequestError(413, f"the request body is over {max_body} bytes")
        body = await reader.readexactly(length) if length else b""
    return parts[0].upper(), parts[1], headers, body


async def _chunked(reader: asyncio.StreamReader, max_body: int) -> bytes:
    body = bytearray()
    while True:
        size_line = await reader.readuntil(b"\r\n")
        try:
            size = int(size_line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise BadRequestError(400, "a chunk size is not hexadecimal") from None
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers, if any
                pass
            return bytes(body)
        if len(body) + size > max_body:
            raise BadRequestError(413, f"the request body is over {max_body} bytes")
        body += await reader.readexactly(size)
        await reader.readexactly(2)


async def _send(
    writer: asyncio.StreamWriter, status: int, content_type: str, body: bytes, keep: bool
) -> None:
    try:
        reason = http.HTTPStatus(status).phrase
    except ValueError:
        reason = "Status"
    connection = "keep-alive" if keep else "close"
    if content_type.startswith("text/event-stream"):
        # One write: a replayed stream has no timing to keep, only its events' framing.
        frames = [b"%x\r\n%b\r\n" % (len(event), event) for event in sse_events(body)]
        writer.write(b"".join([_chunked_head(status, content_type, keep), *frames, b"0\r\n\r\n"]))
        await writer.drain()
        return
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: {connection}\r\n\r\n"
    )
    writer.write(head.encode("latin-1") + body)
    await writer.drain()


async def _relay(
    writer: asyncio.StreamWriter,
    status: int,
    content_type: str,
    events: AsyncIterator[bytes],
    keep: bool,
) -> bool:
    """Send `events` chunked as each arrives; False when they failed part-way (the stream is
    left without its last chunk, so the client sees it cut)."""
    writer.write(_chunked_head(status, content_type, keep))
    async with contextlib.aclosing(events):  # a client gone: the source is closed too
        try:
            async for event in events:
                writer.write(b"%x\r\n%b\r\n" % (len(event), event))
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            raise  # the client went away
        except Exception:  # the source failed (a live stream dropped): cut, as it was
            await writer.drain()
            return False
    writer.write(b"0\r\n\r\n")
    await writer.drain()
    return True


def _chunked_head(status: int, content_type: str, keep: bool) -> bytes:
    try:
        reason = http.HTTPStatus(status).phrase
    except ValueError:
        reason = "Status"
    return (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\n"
        "Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n"
        f"Connection: {'keep-alive' if keep else 'close'}\r\n\r\n"
    ).encode("latin-1")


def sse_events(body: bytes) -> list[bytes]:
    """An event-stream body cut into its events, each with the blank line that ends it (the
    JSON in a `data:` line holds no raw newline, so a blank line only ever ends an event)."""
    events = [event + b"\n\n" for event in body.split(b"\n\n") if event.strip(b"\r\n")]
    if body and not body.endswith(b"\n\n") and events:  # a body cut short: as it was
        events[-1] = events[-1][:-2]
    return events
