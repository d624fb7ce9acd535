"""ASGI middleware around the routes: request ids, callers and their keys, the body limit,
metrics.

Pure ASGI (not `BaseHTTPMiddleware`) so streamed answers pass through untouched and a
client's disconnect still reaches the route.
"""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentbench.serve.callers import LOCAL, Caller, Keyring, is_loopback
from agentbench.serve.metrics import ServeMetrics

# Routes as metric labels: ids folded so the series stay few.
_RUN_PATH = re.compile(r"^/v1/runs/[^/]+")
_OPEN_PATHS = frozenset({"/healthz"})


def route_label(path: str) -> str:
    return _RUN_PATH.sub("/v1/runs/{id}", path)


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value.decode("latin-1")
    return None


async def _send_error(send: Send, status: int, message: str, headers: list[Any] = ()) -> None:
    body = orjson.dumps(
        {
            "error": {
                "message": message,
                "type": "invalid_request_error",
                "param": None,
                "code": None,
            }
        }
    )
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class RequestIds:
    """Every request gets an id (the client's `X-Request-Id`, else a new one), kept in the
    scope for the routes and echoed on the response; requests are counted and timed."""

    def __init__(self, app: ASGIApp, metrics: ServeMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = (_header(scope, b"x-request-id") or "")[:128] or f"req_{uuid.uuid4().hex}"
        scope.setdefault("state", {})["request_id"] = request_id
        started = time.perf_counter()
        status = 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [
                    *message.get("headers", ()),
                    (b"x-request-id", request_id.encode("latin-1")),
                ]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            route = route_label(scope["path"])
            self.metrics.requests.labels(route, scope["method"], str(status)).inc()
            self.metrics.request_seconds.labels(route).observe(time.perf_counter() - started)


class Callers:
    """Who is asking, kept in the scope for the routes (`state["caller"]`).

    With keys, every route but /healthz needs `Authorization: Bearer <key>`, and the key names
    the caller (401 otherwise). Without keys the server is one user's, bound to loopback (the
    CLI refuses any other address), and a request is served only if it is addressed to a
    loopback name (`Host`) and comes from no web page elsewhere (`Origin`): so a page the user
    opens cannot reach the server through their browser, by a cross-site request or by DNS
    rebinding (a hostile name resolving to 127.0.0.1).
    """

    def __init__(self, app: ASGIApp, keys: Keyring, metrics: ServeMetrics) -> None:
        self.app = app
        self.keys = keys
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = scope.setdefault("state", {})
        if not self.keys:
            refused = _not_local(scope)
            if refused is not None:
                self.metrics.rejected.labels("not_local").inc()
                await _send_error(send, 403, refused)
                return
            state["caller"] = Caller(LOCAL)
        elif scope["path"] not in _OPEN_PATHS:
            scheme, _, token = (_header(scope, b"authorization") or "").partition(" ")
            caller = self.keys.identify(token.strip()) if scheme.lower() == "bearer" else None
            if caller is None:
                self.metrics.rejected.labels("unauthorized").inc()
                await _send_error(
                    send,
                    401,
                    "missing or wrong API key: send 'Authorization: Bearer <key>' with a key "
                    "the server was started with",
                    [(b"www-authenticate", b"Bearer")],
                )
                return
            state["caller"] = caller
        await self.app(scope, receive, send)


def _not_local(scope: Scope) -> str | None:
    """Why a request may not reach a keyless server, or None when it may."""
    host = _header(scope, b"host")
    if host is not None and not is_loopback(_host_name(host)):
        return (
            f"this server has no keys and answers only requests to a loopback address (Host "
            f"{host[:100]!r}); start it with --keys FILE to serve other names"
        )
    origin = _header(scope, b"origin")
    if origin is not None and not is_loopback(_host_name(origin.partition("://")[2] or origin)):
        return (
            f"this server has no keys and answers no web page but a local one (Origin "
            f"{origin[:100]!r}); start it with --keys FILE to serve browsers elsewhere"
        )
    return None


def _host_name(authority: str) -> str:
    """`[::1]:8000` → `::1`; `localhost:8000` → `localhost`."""
    authority = authority.rstrip("/").lower()
    if authority.startswith("["):
        return authority[1:].partition("]")[0]
    return authority.rpartition(":")[0] if authority.count(":") == 1 else authority


class BodyLimit:
    """Bodies over `limit` bytes get 413, whether or not they declare their length."""

    def __init__(self, app: ASGIApp, limit: int, metrics: ServeMetrics) -> None:
        self.app = app
        self.limit = limit
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "DELETE"):
            await self.app(scope, receive, send)
            return
        declared = _header(scope, b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await self._refuse(send)
            return
        # Read the body here (up to the limit), then hand it on: a chunked body that turns
        # out too large is refused before any route has started on it.
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await self._refuse(send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: the client's disconnect, when it comes

        await self.app(scope, replay, send)

    async def _refuse(self, send: Send) -> None:
        self.metrics.rejected.labels("too_large").inc()
        await _send_error(send, 413, f"the request body is over the {self.limit:,}-byte limit")
