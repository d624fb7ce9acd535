"""One live session per MCP server, owned by a background event loop the process shares.

The `mcp` SDK is anyio-based: a session's transport and task group belong to the task that
entered them. agentbench runs agents on whatever loop the caller has (and `Runner.run_sync`
makes a new one per call), so no run's loop may own a session. Instead one daemon thread runs
an event loop for every MCP connection of the process; each connection is a task on it that
enters the transport and the session, and holds them until it is told to stop. Tool calls from
any loop or thread are submitted to that loop.

A server starts on first use (listing its tools or calling one), serves every run of the
process, and is stopped at interpreter exit. When its process dies (the connection closes),
the next call starts a new one; the call that saw it die is repeated once on the new process
if the tool is safe to repeat (read-only or idempotent), and otherwise fails with a system
error that says it was not repeated. A server's stderr is kept in memory (its last lines go
into error messages), never on the caller's terminal and never on disk.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import concurrent.futures
import contextlib
import logging
import os
import threading
from collections.abc import Coroutine
from typing import IO, Any, TypeVar

from agentbench._version import __version__
from agentbench.errors import AgentbenchError, UsageError, one_line
from agentbench.runtime.mcp.servers import HttpServer, McpServer, StdioServer

log = logging.getLogger("agentbench.mcp")
T = TypeVar("T")

INSTALL_HINT = "pip install 'agentbench[mcp]'"
_STDERR_LINES = 40
_CLOSE_TIMEOUT_S = 5.0


class McpServerError(AgentbenchError):
    """An MCP server could not be started or reached, or broke the protocol."""


class ServerDied(McpServerError):  # noqa: N818 - a fact, reported as a tool's system error
    """The server's connection closed during a call."""


def require_sdk() -> None:
    """Fail with the install command when the `mcp` extra is missing."""
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise UsageError(
            f"MCP servers need the official `mcp` SDK, which is not installed: {INSTALL_HINT}"
        ) from None


class _StderrTail:
    """A pipe the server writes its stderr to, read by a daemon thread into the last lines."""

    def __init__(self, label: str) -> None:
        read_fd, write_fd = os.pipe()
        self.file: IO[str] = os.fdopen(write_fd, "w")
        self.lines: collections.deque[str] = collections.deque(maxlen=_STDERR_LINES)
        self._label = label
        threading.Thread(target=self._drain, args=(read_fd,), daemon=True).start()

    def _drain(self, read_fd: int) -> None:
        with os.fdopen(read_fd, encoding="utf-8", errors="replace") as pipe:
            for line in pipe:
                self.lines.append(line.rstrip())
                log.debug("%s stderr: %s", self._label, line.rstrip())

    def tail(self, lines: int = 6) -> str:
        kept = [" ".join(line.split()) for line in self.lines if line.strip()][-lines:]
        return "" if not kept else "; its stderr ended with: " + " | ".join(kept)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.file.close()


def _flat(exc: BaseException) -> BaseException:
    """The first leaf of an exception group (anyio's task groups wrap what they raise)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


class Connection:
    """The session of one server. Every coroutine here runs on the background loop."""

    def __init__(self, server: McpServer) -> None:
        self.server = server
        self.starts = 0  # processes (or HTTP sessions) started, for tests and messages
        self._session: Any = None
        self._stop: asyncio.Event | None = None
        self._owner: asyncio.Task[None] | None = None
        self._lock: asyncio.Lock | None = None
        self._stderr: _StderrTail | None = None

    @property
    def where(self) -> str:
        return f"MCP server ({self.server.describe()})"

    def stderr_tail(self) -> str:
        return self._stderr.tail() if self._stderr is not None else ""

    async def session(self) -> Any:
        """The live session, started (or restarted) if there is none."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._session is None:
                await self._start()
            return self._session

    async def list_tools(self) -> list[dict[str, Any]]:
        """Every tool of the server (all pages), as the JSON the server sent."""
        session = await self.session()
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            params = None
            if cursor is not None:
                from mcp import types

                params = types.PaginatedRequestParams(cursor=cursor)
            page = await session.list_tools(params=params)
            tools.extend(
                t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in page.tools
            )
            cursor = page.next_cursor
            if cursor is None:
                return tools

    async def call(self, name: str, arguments: dict[str, Any], *, repeatable: bool) -> Any:
        """`tools/call`; a closed connection restarts the server, and a repeatable call is
        made once more on the new one."""
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED

        for attempt in (1, 2):
            session = await self.session()
            try:
                return await session.call_tool(name, arguments)
            except MCPError as exc:
                if exc.code != CONNECTION_CLOSED:
                    raise
            await self._drop(session)
            if not repeatable:
                raise ServerDied(
                    f"{self.where} closed the connection during the call{self.stderr_tail()}; "
                    f"the server is restarted for the next call, but this call was not "
                    f"repeated: {name!r} is neither read-only nor idempotent"
                )
            if attempt == 2:
                raise ServerDied(
                    f"{self.where} closed the connection during the call, again after a "
                    f"restart{self.stderr_tail()}"
                )
            log.warning(
                "%s closed the connection; restarting it and calling %r once more", self.where, name
            )
        raise AssertionError("unreachable")

    async def close(self) -> None:
        if self._session is not None:
            await self._drop(self._session)
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    # -- the owner task ------------------------------------------------------------------------
    async def _start(self) -> None:
        if self._stderr is None:
            self._stderr = _StderrTail(self.where)
        self.starts += 1
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[Any] = loop.create_future()
        self._stop = asyncio.Event()
        self._owner = asyncio.create_task(self._own(ready, self._stop))
        timeout = self.server.startup_timeout_s
        try:
            self._session = await asyncio.wait_for(asyncio.shield(ready), timeout)
        except TimeoutError:
            # The owner is stuck in the handshake, not waiting for `stop`: cancelling it
            # leaves the transport, which stops the process.
            self._owner.cancel()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(self._owner, _CLOSE_TIMEOUT_S)
            raise McpServerError(
                f"{self.where} did not finish the MCP handshake within {timeout:g} s "
                f"(startup_timeout_s){self.stderr_tail()}"
            ) from None
        except Exception as exc:
            raise McpServerError(self._start_failure(_flat(exc))) from None

    def _start_failure(self, exc: BaseException) -> str:
        if isinstance(exc, FileNotFoundError | PermissionError) and isinstance(
            self.server, StdioServer
        ):
            return f"{self.where} could not be started: {exc.strerror}: {self.server.command[0]!r}"
        what = "could not be reached" if isinstance(self.server, HttpServer) else "failed to start"
        return (
            f"{self.where} {what}: {type(exc).__name__}: {one_line(exc, 300)}{self.stderr_tail()}"
        )

    async def _own(self, ready: asyncio.Future[Any], stop: asyncio.Event) -> None:
        """Enter the transport and the session, hand the session over, hold it until `stop`."""
        from mcp import ClientSession
        from mcp.types import Implementation

        try:
            async with contextlib.AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport(stack))
                session = await stack.enter_async_context(
                    ClientSession(
                        read,
                        write,
                        client_info=Implementation(name="agentbench", version=__version__),
                    )
                )
                await session.initialize()
                ready.set_result(session)
                await stop.wait()
        except asyncio.CancelledError:
            ready.cancel()  # no-op once the session was handed over
            raise
        except BaseException as exc:  # reported to whoever waits for the start
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else McpServerError(str(exc)))
            else:
                log.debug("%s: session ended: %r", self.where, exc)

    def _transport(self, stack: contextlib.AsyncExitStack) -> Any:
        server = self.server
        if isinstance(server, StdioServer):
            from mcp import StdioServerParameters
            from mcp.client.stdio import stdio_client

            assert self._stderr is not None
            params = StdioServerParameters(
                command=server.command[0],
                args=list(server.command[1:]),
                env=dict(server.env) if server.env is not None else None,
                cwd=server.cwd,
            )
            return stdio_client(params, errlog=self._stderr.file)
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        client = create_mcp_http_client(headers=dict(server.headers or ()))
        stack.push_async_callback(client.aclose)
        return streamable_http_client(server.url, http_client=client)

    async def _drop(self, session: Any) -> None:
        """Stop the owner of `session` (the process with it) if it is still the current one."""
        if session is not self._session:
            return
        self._session = None
        stop, owner = self._stop, self._owner
        if stop is not None:
            stop.set()
        if owner is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(owner, _CLOSE_TIMEOUT_S)


class _Background:
    """The daemon thread and event loop every MCP connection of the process lives on."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(
            target=self.loop.run_forever, name="agentbench-mcp", daemon=True
        )
        self.thread.start()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)


_lock = threading.Lock()
_background: _Background | None = None
_connections: dict[McpServer, Connection] = {}


def connection(server: McpServer) -> Connection:
    """The process's one connection to `server` (not started until it is used)."""
    global _background
    with _lock:
        if _background is None:
            _background = _Background()
            atexit.register(close_all)
        found = _connections.get(server)
        if found is None:
            found = _connections[server] = Connection(server)
        return found


def submit(coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
    """Run `coro` on the background loop (started by `connection`)."""
    assert _background is not None, "connection() first"
    return _background.submit(coro)


async def run(coro: Coroutine[Any, Any, T]) -> T:
    """Await `coro` on the background loop from any other loop; cancelling the caller
    cancels it there too (a tool's timeout reaches the MCP request)."""
    return await asyncio.wrap_future(submit(coro))


def run_blocking(coro: Coroutine[Any, Any, T]) -> T:
    """Wait for `coro` on the background loop from synchronous code (defining an agent)."""
    return submit(coro).result()


def close_all() -> None:
    """Stop every server this process started (registered to run at exit)."""
    with _lock:
        connections = list(_connections.values())
        _connections.clear()
    if _background is None or not connections:
        return

    async def close() -> None:
        await asyncio.gather(*(c.close() for c in connections), return_exceptions=True)

    with contextlib.suppress(Exception):
        submit(close()).result(_CLOSE_TIMEOUT_S * 2)
