"""Streamable HTTP in front of the proxies: what a client that takes a URL talks to.

Served by `boundary.server.BoundaryServer` (one small HTTP/1.1 server on 127.0.0.1, the same
one that answers a boundary target's model calls): `POST /mcp/<server>` (or `POST /mcp` when
there is one server) carries one JSON-RPC message or a batch; requests are answered with JSON,
notifications and responses with 202. There is no standalone event stream (`GET` is 405, as
the transport allows), so a server's own requests reach an HTTP client only as the error the
proxy answers them with. An injected crash drops the connection with no answer, and every
later request to that server too: to the client, the server is gone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import orjson

from agentbench.mcp_proxy.proxy import McpProxy, ServerCrash

_JSON = "application/json"


class CrashedServerError(ConnectionAbortedError):
    """End the client's connection with no answer (an injected crash)."""


class McpRoutes:
    """Answers MCP requests for the proxies `find` names (by the path's last part)."""

    def __init__(self, find: Callable[[str], McpProxy | None]) -> None:
        self._find = find
        self._crashed: set[str] = set()

    async def __call__(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, str, bytes]:
        name = path.split("?", 1)[0].rstrip("/").removeprefix("/mcp").strip("/")
        if name in self._crashed:
            raise CrashedServerError(f"MCP server {name!r} crashed (injected fault)")
        proxy = self._find(name)
        if proxy is None:
            return 404, _JSON, _problem(f"no MCP server {name!r} here")
        if method != "POST":
            return 405, _JSON, _problem(f"{method} is not served: POST JSON-RPC messages")
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            return 400, _JSON, _jsonrpc_error(-32700, f"the body is not JSON: {exc}")
        messages = data if isinstance(data, list) else [data]
        try:
            answers = await asyncio.gather(*(proxy.handle(m) for m in messages))
        except ServerCrash as exc:
            self._crashed.add(name)
            raise CrashedServerError(str(exc)) from None
        replies = [a for a in answers if a is not None]
        if not replies:
            return 202, _JSON, b""
        return 200, _JSON, orjson.dumps(replies if isinstance(data, list) else replies[0])


def _problem(text: str) -> bytes:
    return orjson.dumps({"error": text})


def _jsonrpc_error(code: int, text: str) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": text}})
