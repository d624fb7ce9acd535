"""The HTTP client of a streamable-HTTP MCP server, its answers bounded by `max_message_bytes`.

The SDK reads a JSON answer whole, however large, and fails a whole event stream (as a closed
connection) on an event over its own fixed limit. Here every response's body passes through a
bound before the SDK reads it: a JSON body, or one server-sent event, over the limit is read on
and thrown away (`limits.Discarded`), and in its place the SDK reads the JSON-RPC error that
answers the request it belonged to with the size and the limit. The session, and the HTTP
connection, carry on. Responses are asked for uncompressed: the bound counts the bytes that
arrive, so a compressed body is bounded as it arrives, and refused whole past the limit.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import orjson

from agentbench.runtime.mcp.limits import Discarded, too_large_error

log = logging.getLogger("agentbench.mcp")

# The SDK's own (mcp.shared._httpx_utils): 30 s to connect or send, 300 s between reads of a
# stream the server may hold open. A call's own timeout is shorter, and is what holds.
_CONNECT_S = 30.0
_READ_S = 300.0
_END_S = 2.0  # for the DELETE that ends a session


class ResponseTooLarge(httpx2.StreamError):
    """A compressed response passed the limit (it cannot be replaced by an answer)."""


class HttpClient:
    """The HTTP client of one session with the server, every response bounded to `limit` bytes
    a message; and the end of that session, which is ours to send (`end_session`)."""

    def __init__(self, url: str, headers: dict[str, str], limit: int, where: str) -> None:
        self.url = url
        self.limit = limit
        self.where = where  # the server as messages name it (no credentials)
        self.stuck = False  # the server stopped answering: nothing more is sent to it
        self._session_headers: dict[str, str] = {}
        self.client = httpx2.AsyncClient(
            headers={"Accept-Encoding": "identity", **headers},
            timeout=httpx2.Timeout(_CONNECT_S, read=_READ_S),
            event_hooks={"request": [self._note_session], "response": [self._bound]},
        )

    async def end_session(self) -> None:
        """DELETE the session, as the SDK would on close (told not to: it would wait on a
        stuck server, and a failure is logged on the caller's terminal). Quiet, bounded."""
        if self.stuck or "mcp-session-id" not in self._session_headers:
            return
        with contextlib.suppress(httpx2.HTTPError):
            await self.client.delete(self.url, headers=self._session_headers, timeout=_END_S)

    async def aclose(self) -> None:
        await self.client.aclose()

    @property
    def session_id(self) -> str | None:
        """The id the server gave the session (`Mcp-Session-Id`), once requests carry it."""
        return self._session_headers.get("mcp-session-id")

    async def _note_session(self, request: httpx2.Request) -> None:
        for name in ("mcp-session-id", "mcp-protocol-version"):
            if name in request.headers:
                self._session_headers[name] = request.headers[name]

    async def _bound(self, response: httpx2.Response) -> None:
        request_id = _request_id(response.request)
        kind = response.headers.get("content-type", "").lower()
        encoded = response.headers.get("content-encoding", "identity").lower() != "identity"
        source = response.stream
        assert isinstance(source, httpx2.AsyncByteStream)
        if encoded:
            response.stream = _Capped(source, self.limit)
        elif kind.startswith("text/event-stream"):
            response.stream = _Events(source, self.limit, request_id, self.where)
        else:
            response.stream = _Body(source, self.limit, request_id)
        # The body may now be another length; nothing downstream needs it.
        with contextlib.suppress(KeyError):
            del response.headers["content-length"]


def _request_id(request: httpx2.Request) -> int | str | None:
    """The JSON-RPC id of the request this HTTP request carries, if it carries one."""
    if request.method != "POST":
        return None
    try:
        body = orjson.loads(request.content)
    except (orjson.JSONDecodeError, httpx2.RequestNotRead):
        return None
    if isinstance(body, dict) and "method" in body:
        found = body.get("id")
        if isinstance(found, int | str) and not isinstance(found, bool):
            return found
    return None


def _answer(request_id: int | str, discarded: Discarded, limit: int) -> bytes:
    return orjson.dumps(too_large_error(request_id, discarded.size, limit))


class _Body(httpx2.AsyncByteStream):
    """A body that is one JSON-RPC message: passed on whole, or replaced when over the limit."""

    def __init__(self, source: httpx2.AsyncByteStream, limit: int, request_id: Any) -> None:
        self._source, self._limit, self._request_id = source, limit, request_id

    async def __aiter__(self) -> AsyncIterator[bytes]:
        kept = bytearray()
        discarded: Discarded | None = None
        async for chunk in self._source:
            if discarded is not None:
                discarded.feed(chunk)
                continue
            kept += chunk
            if len(kept) > self._limit:
                discarded, kept = Discarded(kept), bytearray()
        if discarded is None:
            yield bytes(kept)
        elif self._request_id is None or discarded.is_request():
            raise ResponseTooLarge(
                f"a response of {discarded.size:,} bytes (limit {self._limit:,})"
            )
        else:
            yield _answer(self._request_id, discarded, self._limit)

    async def aclose(self) -> None:
        await self._source.aclose()


class _Capped(httpx2.AsyncByteStream):
    """A compressed body, refused once the bytes that arrive pass the limit."""

    def __init__(self, source: httpx2.AsyncByteStream, limit: int) -> None:
        self._source, self._limit = source, limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self._source:
            seen += len(chunk)
            if seen > self._limit:
                raise ResponseTooLarge(
                    f"a compressed response of more than {self._limit:,} bytes (max_message_bytes)"
                )
            yield chunk

    async def aclose(self) -> None:
        await self._source.aclose()


class _Events(httpx2.AsyncByteStream):
    """An event stream passed on an event at a time; an event over the limit is thrown away,
    and one that answered this POST's request is replaced by the error that says so.

    Lines may end in CRLF, LF or CR (the SSE rule); they are passed on ending in LF.
    """

    def __init__(
        self, source: httpx2.AsyncByteStream, limit: int, request_id: Any, where: str
    ) -> None:
        self._source, self._limit, self._request_id = source, limit, request_id
        self._where = where
        self._event = bytearray()  # the current event's complete lines
        self._line = bytearray()  # the current line so far
        self._discarded: Discarded | None = None
        self._size = 0  # while discarding: the event's bytes so far
        self._line_empty = True  # while discarding: nothing yet on the current line
        self._after_cr = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._source:
            ready = self._feed(chunk)
            if ready:
                yield ready
        if self._discarded is None and (self._event or self._line):
            yield bytes(self._event + self._line)  # an unfinished event, as it came

    async def aclose(self) -> None:
        await self._source.aclose()

    def _feed(self, chunk: bytes) -> bytes:
        if self._after_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        self._after_cr = chunk.endswith(b"\r")
        chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        ready = bytearray()
        at = 0
        while at < len(chunk):
            end = chunk.find(b"\n", at)
            piece = chunk[at:] if end < 0 else chunk[at:end]
            at = len(chunk) if end < 0 else end + 1
            if self._discarded is not None:
                ready += self._discard(piece, ended=end >= 0)
            elif end < 0:
                self._line += piece
                self._check_size()
            else:
                ready += self._line_ended(piece)
        return bytes(ready)

    def _line_ended(self, piece: bytes) -> bytes:
        line, self._line = bytes(self._line + piece), bytearray()
        if not line:  # a blank line ends the event
            event, self._event = bytes(self._event) + b"\n", bytearray()
            return event
        self._event += line + b"\n"
        self._check_size()
        return b""

    def _check_size(self) -> None:
        size = len(self._event) + len(self._line)
        if size <= self._limit:
            return
        self._discarded = Discarded(_data_of(bytes(self._event + self._line)))
        self._size = size
        self._line_empty = not self._line
        self._event, self._line = bytearray(), bytearray()

    def _discard(self, piece: bytes, *, ended: bool) -> bytes:
        discarded = self._discarded
        assert discarded is not None
        self._size += len(piece) + ended
        if piece:
            discarded.feed(_data_of(piece) if self._line_empty else piece)
            self._line_empty = False
        if not ended:
            return b""
        if not self._line_empty:
            self._line_empty = True
            return b""
        self._discarded = None  # the blank line: the event is over
        discarded.size = self._size
        if self._request_id is None or discarded.is_request():
            log.warning(
                "%s sent an event of %s bytes, over the limit of %s bytes (max_message_bytes), "
                "that answers no call; it was dropped",
                self._where,
                f"{discarded.size:,}",
                f"{self._limit:,}",
            )
            return b""
        return (
            b"event: message\ndata: " + _answer(self._request_id, discarded, self._limit) + b"\n\n"
        )


def _data_of(lines: bytes) -> bytes:
    """The data fields of an event's lines, which is where its JSON-RPC message is."""
    return b"".join(
        line.removeprefix(b"data:").removeprefix(b" ")
        for line in lines.split(b"\n")
        if line.startswith(b"data:")
    )
