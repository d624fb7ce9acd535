"""Deadlines for reading a request: a client gets `header_timeout_s` to send its headers and
then `body_timeout_s` to send its body, or its connection is closed.

uvicorn has none of its own: its keep-alive timer runs only between requests and stops at the
first byte of the next one, so a client that sends a header a byte at a time (slowloris), or
never sends anything, holds its socket for as long as it likes. The guard lives in the HTTP
protocol (uvicorn's, subclassed), where a connection's bytes arrive: once a request has
started — the connection opened, or the first byte after the previous answer — its headers
must be complete within the header deadline; a body must then be complete within the body
deadline. Each deadline is set once, never pushed back by a trickle of bytes. A late body is
answered `408 Request Timeout` when no answer has started; late headers close the connection
(with a 408 when some of them came).

uvicorn's httptools protocol (its C parser, installed with the `serve` extra) is guarded when
it is there, h11's otherwise: h11 costs ~0.12 ms of CPU a request more
(`benchmarks/serve_cpu.py`). With httptools the request head is also bounded here — h11
bounds it itself (`h11_max_incomplete_event_size`, answered 400) — and a head past
`MAX_HEAD_BYTES` is answered `431` and the connection closed.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

try:  # httptools comes with the `serve` extra
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:
    HttpToolsProtocol = None

# The most a request's line and headers may take.
MAX_HEAD_BYTES = 16 * 1024
_LATE = b"request timeout: the request did not arrive in time\n"
_LATE_ANSWER = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(_LATE), _LATE)
)
_TOO_LARGE = b"request header fields too large: over %d bytes\n" % MAX_HEAD_BYTES
_TOO_LARGE_ANSWER = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain; charset=utf-8"
    b"\r\nconnection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(_TOO_LARGE), _TOO_LARGE)
)


def guarded_protocol(
    header_timeout_s: float, body_timeout_s: float, *, parser: str | None = None
) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol with these deadlines (pass it as `uvicorn.Config(http=...)`):
    httptools' when it is installed, else h11's; `parser` ("httptools", "h11") picks one."""
    if parser is None:
        parser = "h11" if HttpToolsProtocol is None else "httptools"
    base: type[Any] = _GuardedH11 if parser == "h11" else _GuardedHttpTools

    class Guarded(base):  # type: ignore[valid-type,misc]
        header_deadline_s = header_timeout_s
        body_deadline_s = body_timeout_s

    return Guarded


class _Deadlines:
    """The deadline itself: one timer a connection, for the headers or for the body."""

    header_deadline_s: float
    body_deadline_s: float
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    cycle: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._phase: str | None = None  # "headers" or "body": what the deadline is for
        self._bytes_seen = False  # of the request being waited for

    def connection_made(self, transport: asyncio.Transport) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        self._watch("headers", self.header_deadline_s)

    def connection_lost(self, exc: Exception | None) -> None:
        self._unwatch()
        super().connection_lost(exc)  # type: ignore[misc]

    def _watch(self, phase: str, seconds: float) -> None:
        self._unwatch()
        self._phase = phase
        self._deadline = self.loop.call_later(seconds, self._late)

    def _unwatch(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline = None
        self._phase = None

    def _late(self) -> None:
        phase, self._deadline, self._phase = self._phase, None, None
        if self.transport.is_closing():
            return
        cycle = self.cycle
        if phase == "body" and cycle is not None and not cycle.response_started:
            # The app is waiting for the body: it hears the client went away, and the client
            # hears why (a server may answer before the request is whole).
            cycle.disconnected = True
            cycle.message_event.set()
            self._answer_late_body()
        elif phase == "headers" and self._bytes_seen:
            # No parser answers a request it has not parsed: the answer is written directly.
            self.transport.write(_LATE_ANSWER)
        self.transport.close()

    def _answer_late_body(self) -> None:
        self.transport.write(_LATE_ANSWER)


class _GuardedH11(_Deadlines, H11Protocol):
    def data_received(self, data: bytes) -> None:
        if self._phase is None and self.conn.their_state is h11.IDLE:
            self._watch("headers", self.header_deadline_s)  # the next request on this connection
        self._bytes_seen = True
        super().data_received(data)
        self._follow()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow()

    def _follow(self) -> None:
        """Move the deadline on as the request arrives: headers done, then the body."""
        state = self.conn.their_state
        if self._phase == "headers" and state is not h11.IDLE:
            self._unwatch()
            if state is h11.SEND_BODY:
                self._watch("body", self.body_deadline_s)
        elif self._phase == "body" and state is not h11.SEND_BODY:
            self._unwatch()
        if self._phase is None and state is h11.IDLE:
            self._bytes_seen = False  # between requests: uvicorn's keep-alive timer guards

    def _answer_late_body(self) -> None:
        # Through h11, which keeps the connection's state; where it will not answer in that
        # state (a response already begun), the close that follows is the whole answer.
        headers = [
            (b"content-type", b"text/plain; charset=utf-8"),
            (b"connection", b"close"),
            (b"content-length", str(len(_LATE)).encode()),
        ]
        with contextlib.suppress(h11.LocalProtocolError):
            for event in (
                h11.Response(status_code=408, headers=headers, reason=b"Request Timeout"),
                h11.Data(data=_LATE),
                h11.EndOfMessage(),
            ):
                self.transport.write(self.conn.send(event))


if HttpToolsProtocol is not None:  # else h11's is the one guarded

    class _GuardedHttpTools(_Deadlines, HttpToolsProtocol):  # type: ignore[misc]
        """The parser calls back as the request arrives: its first byte, the end of its
        head, the end of its body."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._in_head = False  # a request's head has begun and not ended
            self._head_began = False  # ... within the bytes being parsed now
            self._head_bytes = 0

        def data_received(self, data: bytes) -> None:
            self._head_began = False
            super().data_received(data)
            if not self._in_head or self.transport.is_closing():
                return
            # The head's bytes so far: whole chunks parsed while it went on (the chunk it
            # began in may hold an earlier request's end, and is bounded by the read size).
            if not self._head_began:
                self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES:
                self._unwatch()
                self.transport.write(_TOO_LARGE_ANSWER)
                self.transport.close()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._bytes_seen = self._in_head = self._head_began = True
            self._head_bytes = 0
            if self._phase is None:  # a later request on this connection
                self._watch("headers", self.header_deadline_s)

        def on_headers_complete(self) -> None:
            self._in_head = False
            self._unwatch()
            super().on_headers_complete()
            # Cancelled at once (by `on_message_complete`, in the same parse) when there is
            # no body.
            self._watch("body", self.body_deadline_s)

        def on_message_complete(self) -> None:
            if self._phase == "body":
                self._unwatch()
            self._bytes_seen = False
            super().on_message_complete()
