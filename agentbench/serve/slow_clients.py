"""Deadlines for reading a request: a client gets `header_timeout_s` to send its headers and
then `body_timeout_s` to send its body, or its connection is closed.

uvicorn has none of its own: its keep-alive timer runs only between requests and stops at the
first byte of the next one, so a client that sends a header a byte at a time (slowloris), or
never sends anything, holds its socket for as long as it likes. The guard lives in the HTTP
protocol (uvicorn's h11 protocol, subclassed), where a connection's bytes arrive: once a
request has started — the connection opened, or the first byte after the previous answer —
its headers must be complete within the header deadline; a body must then be complete within
the body deadline. Each deadline is set once, never pushed back by a trickle of bytes. A late
body is answered `408 Request Timeout` when no answer has started; late headers close the
connection (with a 408 when some of them came).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

_LATE = b"request timeout: the request did not arrive in time\n"


def guarded_protocol(header_timeout_s: float, body_timeout_s: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol with these deadlines (pass it as `uvicorn.Config(http=...)`)."""

    class Guarded(_Guarded):
        header_deadline_s = header_timeout_s
        body_deadline_s = body_timeout_s

    return Guarded


class _Guarded(H11Protocol):
    header_deadline_s: float
    body_deadline_s: float

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._phase: str | None = None  # "headers" or "body": what the deadline is for
        self._bytes_seen = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._watch("headers", self.header_deadline_s)

    def connection_lost(self, exc: Exception | None) -> None:
        self._unwatch()
        super().connection_lost(exc)

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
            # hears why, through h11 (a server may answer before the request is whole).
            cycle.disconnected = True
            cycle.message_event.set()
            self._answer_late(self.conn.send)
        elif phase == "headers" and self._bytes_seen:
            # h11 cannot answer a request it has not parsed: the answer is written directly.
            self.transport.write(
                b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
                b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(_LATE), _LATE)
            )
        self.transport.close()

    def _answer_late(self, send: Any) -> None:
        headers = [
            (b"content-type", b"text/plain; charset=utf-8"),
            (b"connection", b"close"),
            (b"content-length", str(len(_LATE)).encode()),
        ]
        # Where h11 will not answer in the connection's state (a response already begun), the
        # close that follows is the whole answer.
        with contextlib.suppress(h11.LocalProtocolError):
            for event in (
                h11.Response(status_code=408, headers=headers, reason=b"Request Timeout"),
                h11.Data(data=_LATE),
                h11.EndOfMessage(),
            ):
                self.transport.write(send(event))
