"""The real MCP server behind the proxy: a process over stdio, or a URL over Streamable HTTP.

Both speak raw JSON-RPC (the proxy keeps messages as the server wrote them, not as an SDK
would re-model them) with ids of their own, so the proxy's own handshake and the client's
requests never collide. A message from the server that is not an answer (a notification, a
request such as sampling) goes to `on_message`. Every read is bounded (`max_message_bytes`,
as the runtime's MCP client): an answer past it is an error naming the size and the limit.
A server that cannot start, exits or stops answering is an `UpstreamError` saying so, with
the last lines it wrote to stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

import orjson

from agentbench.errors import AgentbenchError
from agentbench.runtime.mcp.limits import Discarded, too_large_error

MAX_MESSAGE_BYTES = 16 << 20
STDERR_LINES = 20
Message = dict[str, Any]
OnMessage = Callable[[Message], Awaitable[None]]


class UpstreamError(AgentbenchError):
    """The real server could not be reached, or went away."""


class Upstream(Protocol):
    on_message: OnMessage | None

    def describe(self) -> str: ...
    async def start(self) -> None: ...
    async def request(self, method: str, params: dict[str, Any], timeout_s: float) -> Message: ...
    async def notify(self, method: str, params: dict[str, Any] | None) -> None: ...
    async def send_raw(self, message: Message) -> None: ...
    async def close(self) -> None: ...


class StdioUpstream:
    """A server the proxy starts: newline-delimited JSON-RPC on its stdin and stdout, in a
    process group of its own under the runtime's keeper (gone when the proxy goes)."""

    def __init__(
        self,
        command: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
    ) -> None:
        if not command:
            raise UpstreamError("no server command to start")
        self.command = list(command)
        self.env = dict(os.environ if env is None else env)
        self.cwd = cwd
        self.max_message_bytes = max_message_bytes
        self.on_message: OnMessage | None = None
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[Message]] = {}
        self._keeper: asyncio.subprocess.Process | None = None
        self._lifeline: int | None = None
        self._reader: asyncio.Task[None] | None = None
        self._errlog = tempfile.TemporaryFile()  # noqa: SIM115 - kept open for the process
        self._gone: str | None = None

    def describe(self) -> str:
        return "stdio: " + " ".join(self.command)

    async def start(self) -> None:
        from agentbench.runtime.mcp.stdio import start_kept

        try:
            self._keeper, self._lifeline = await start_kept(
                self.command, self.cwd, self.env, self._errlog
            )
        except OSError as exc:
            raise UpstreamError(
                f"the MCP server ({self.describe()}) could not be started: {exc.strerror or exc}"
            ) from None
        assert self._keeper.stdout is not None
        self._reader = asyncio.create_task(self._read(self._keeper.stdout))

    async def _read(self, stdout: asyncio.StreamReader) -> None:
        from agentbench.runtime.mcp.stdio import read_lines

        try:
            await read_lines(stdout, self.max_message_bytes, self._deliver, self._refuse)
        finally:
            self._gone = self._gone or "it exited"
            for future in self._waiting.values():
                if not future.done():
                    future.set_exception(self._failure())
            self._waiting.clear()

    async def _deliver(self, line: bytes) -> None:
        try:
            message = orjson.loads(line)
        except orjson.JSONDecodeError:
            return  # a stray line of output (a server that prints): not a message
        if not isinstance(message, dict):
            return
        await self._arrived(message)

    async def _refuse(self, discarded: Discarded) -> None:
        request_id = discarded.response_id()
        if isinstance(request_id, int) and request_id in self._waiting:
            answer = too_large_error(request_id, discarded.size, self.max_message_bytes)
            await self._arrived(answer)

    async def _arrived(self, message: Message) -> None:
        if "method" not in message and ("result" in message or "error" in message):
            future = self._waiting.pop(message.get("id"), None)  # type: ignore[arg-type]
            if future is not None and not future.done():
                future.set_result(message)
            return
        if self.on_message is not None:
            await self.on_message(message)

    async def request(self, method: str, params: dict[str, Any], timeout_s: float) -> Message:
        number = next(self._ids)
        future: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self._waiting[number] = future
        await self._write({"jsonrpc": "2.0", "id": number, "method": method, "params": params})
        try:
            return await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            raise UpstreamError(
                f"the MCP server ({self.describe()}) did not answer {method} within {timeout_s:g} s"
            ) from None
        finally:
            self._waiting.pop(number, None)

    async def notify(self, method: str, params: dict[str, Any] | None) -> None:
        message: Message = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self._write(message)

    async def send_raw(self, message: Message) -> None:
        await self._write(message)

    async def _write(self, message: Message) -> None:
        keeper = self._keeper
        if keeper is None or keeper.stdin is None or self._gone is not None:
            raise self._failure()
        try:
            keeper.stdin.write(orjson.dumps(message) + b"\n")
            await keeper.stdin.drain()
        except (ConnectionError, OSError):
            self._gone = "it stopped reading its input"
            raise self._failure() from None

    def _failure(self) -> UpstreamError:
        code = self._keeper.returncode if self._keeper is not None else None
        status = f" (exit code {code})" if code is not None else ""
        lines = self.stderr_tail()
        said = f"; its last stderr lines: {' | '.join(lines)}" if lines else ""
        return UpstreamError(
            f"the MCP server ({self.describe()}) went away: {self._gone or 'not started'}"
            f"{status}{said}"
        )

    def stderr_tail(self) -> list[str]:
        """The last lines the server wrote to stderr."""
        try:
            self._errlog.seek(0, os.SEEK_END)
            size = self._errlog.tell()
            self._errlog.seek(max(0, size - 8192))
            text = self._errlog.read().decode("utf-8", "replace")
        except (OSError, ValueError):
            return []
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        return lines[-STDERR_LINES:][-3:]

    async def close(self) -> None:
        from agentbench.runtime.mcp.stdio import stop_kept

        self._gone = self._gone or "closed"
        lifeline, self._lifeline = self._lifeline, None
        await stop_kept(self._keeper, lifeline)
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
        with contextlib.suppress(OSError):
            self._errlog.close()


class HttpUpstream:
    """A server at a URL, over Streamable HTTP: each message one POST, answered with JSON or
    with an event stream that ends in the answer; the session id it hands out is sent back."""

    def __init__(
        self,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
    ) -> None:
        self.url = url
        self.headers = dict(headers or {})
        self.max_message_bytes = max_message_bytes
        self.on_message: OnMessage | None = None
        self._ids = itertools.count(1)
        self._client: Any = None
        self._session: str | None = None
        self._version: str | None = None

    def describe(self) -> str:
        return f"http: {self.url}"

    async def start(self) -> None:
        import httpx

        self._client = httpx.AsyncClient(timeout=httpx.Timeout(30.0, read=None))

    async def request(self, method: str, params: dict[str, Any], timeout_s: float) -> Message:
        number = next(self._ids)
        message = {"jsonrpc": "2.0", "id": number, "method": method, "params": params}
        try:
            answer = await asyncio.wait_for(self._post(message, number), timeout_s)
        except TimeoutError:
            raise UpstreamError(
                f"the MCP server ({self.describe()}) did not answer {method} within {timeout_s:g} s"
            ) from None
        if answer is None:
            raise UpstreamError(f"the MCP server ({self.describe()}) sent no answer to {method}")
        if method == "initialize" and isinstance(answer.get("result"), dict):
            version = answer["result"].get("protocolVersion")
            self._version = version if isinstance(version, str) else None
        return answer

    async def notify(self, method: str, params: dict[str, Any] | None) -> None:
        message: Message = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self._post(message, None)

    async def send_raw(self, message: Message) -> None:
        await self._post(message, None)

    async def _post(self, message: Message, number: int | None) -> Message | None:
        import httpx

        if self._client is None:
            raise UpstreamError(f"the MCP server ({self.describe()}) is not connected")
        headers = {
            **self.headers,
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
        }
        if self._session:
            headers["mcp-session-id"] = self._session
        if self._version:
            headers["mcp-protocol-version"] = self._version
        try:
            async with self._client.stream(
                "POST", self.url, content=orjson.dumps(message), headers=headers
            ) as response:
                session = response.headers.get("mcp-session-id")
                if session:
                    self._session = session
                if response.status_code == 202 or number is None:
                    return None
                if response.status_code >= 400:
                    body = (await _bounded(response, 2000) or b"")[:500].decode("utf-8", "replace")
                    raise UpstreamError(
                        f"the MCP server ({self.describe()}) answered HTTP "
                        f"{response.status_code}: {body}"
                    )
                kind = response.headers.get("content-type", "").split(";")[0].strip()
                if kind == "text/event-stream":
                    return await self._events(response, number)
                return await self._json(response, number)
        except httpx.HTTPError as exc:
            raise UpstreamError(
                f"the MCP server ({self.describe()}) could not be reached: {exc}"
            ) from None

    async def _json(self, response: Any, number: int) -> Message | None:
        body = await _bounded(response, self.max_message_bytes)
        if body is None:
            return too_large_error(number, self.max_message_bytes + 1, self.max_message_bytes)
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError:
            raise UpstreamError(
                f"the MCP server ({self.describe()}) answered with something not JSON"
            ) from None
        for item in data if isinstance(data, list) else [data]:
            if isinstance(item, dict) and item.get("id") == number and "method" not in item:
                return item
            if isinstance(item, dict) and self.on_message is not None:
                await self.on_message(item)
        return None

    async def _events(self, response: Any, number: int) -> Message | None:
        data: list[bytes] = []
        size = 0
        buffer = b""
        async for chunk in response.aiter_bytes():
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                line = line.rstrip(b"\r")
                if line.startswith(b"data:"):
                    piece = line[5:].removeprefix(b" ")
                    size += len(piece)
                    if size > self.max_message_bytes:
                        return too_large_error(number, size, self.max_message_bytes)
                    data.append(piece)
                elif not line and data:
                    answer = await self._event(b"\n".join(data), number)
                    data, size = [], 0
                    if answer is not None:
                        return answer
            if len(buffer) > self.max_message_bytes:
                return too_large_error(number, len(buffer), self.max_message_bytes)
        if data:
            return await self._event(b"\n".join(data), number)
        return None

    async def _event(self, text: bytes, number: int) -> Message | None:
        try:
            message = orjson.loads(text)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(message, dict):
            return None
        if message.get("id") == number and "method" not in message:
            return message
        if self.on_message is not None:
            await self.on_message(message)
        return None

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is None:
            return
        if self._session:  # the spec's way to end a session; a server may not allow it
            with contextlib.suppress(Exception):
                await client.delete(self.url, headers={"mcp-session-id": self._session})
        await client.aclose()


async def _bounded(response: Any, limit: int) -> bytes | None:
    """The body, or None when it runs past `limit` (read no further)."""
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > limit:
            return None
    return bytes(body)
