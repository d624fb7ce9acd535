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
error that says it was not repeated. A call that runs out of its time, or is cancelled, is
followed by a ping: a server that does not answer that either has stopped answering, and is
stopped (its whole process group) so that the next call starts it again; the timed-out
call's error says so. Restarts are bounded: after `max_restarts` in a row with no call
answered between them, the server is not started again in this process. A server's stderr
is kept in memory (its last lines go into error messages), never on the caller's terminal
and never on disk.
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
from typing import IO, TYPE_CHECKING, Any, TypeVar

from agentbench._version import __version__
from agentbench.errors import AgentbenchError, UsageError, one_line
from agentbench.runtime.mcp.servers import HttpServer, McpServer, StdioServer

if TYPE_CHECKING:  # both import the SDK's dependencies (anyio, httpx2): only when used
    from agentbench.runtime.mcp.http import HttpClient
    from agentbench.runtime.mcp.stdio import StdioTransport

log = logging.getLogger("agentbench.mcp")
T = TypeVar("T")

INSTALL_HINT = "pip install 'agentbench[mcp]'"
_STDERR_LINES = 40
_CLOSE_TIMEOUT_S = 5.0
PING_TIMEOUT_S = 5.0  # how long a server whose call was abandoned has to answer a ping


class McpServerError(AgentbenchError):
    """An MCP server could not be started or reached, or broke the protocol."""


class ServerDied(McpServerError):  # noqa: N818 - a fact, reported as a tool's system error
    """The server's connection closed during a call."""


class CallTimedOut(McpServerError):  # noqa: N818 - a fact, reported as a tool's system error
    """A call had no answer within its timeout; the message says what became of the server."""


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


def _retrieved(task: asyncio.Task[Any]) -> None:
    """Take a given-up call's outcome, so asyncio does not report it as never retrieved."""
    if not task.cancelled():
        task.exception()


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
        self.restarts_in_a_row = 0  # starts since the last call the server answered
        # The server's own tool list, asked once a start when its tools came from a schema=
        # snapshot (`tools.snapshot_and_live`): what the snapshot is compared with.
        self.live_tools: list[dict[str, Any]] | None = None
        self.live_tools_start = 0
        self._session: Any = None
        self._stop: asyncio.Event | None = None
        self._owner: asyncio.Task[None] | None = None
        self._lock: asyncio.Lock | None = None
        self._stderr: _StderrTail | None = None
        self._process: StdioTransport | None = None  # the current stdio server
        self._client: HttpClient | None = None  # the current HTTP session's client
        self._checking: asyncio.Task[str] | None = None  # a ping after a call was abandoned

    @property
    def where(self) -> str:
        return f"MCP server ({self.server.describe()})"

    def stderr_tail(self) -> str:
        return self._stderr.tail() if self._stderr is not None else ""

    @property
    def protocol_version(self) -> str | None:
        """The MCP version the live session agreed on (None without a session)."""
        return getattr(self._session, "protocol_version", None)

    @property
    def session_id(self) -> str | None:
        """The live HTTP session's `Mcp-Session-Id` (None over stdio, or without one)."""
        if self._session is None or self._client is None:
            return None
        return self._client.session_id

    async def session(self) -> Any:
        """The live session, started (or restarted) if there is none."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._checking is not None:
                # A call was abandoned: whether this session still answers is being found.
                await asyncio.wait({self._checking})
            if self._session is None:
                self._count_restart()
                await self._start()
            return self._session

    def _count_restart(self) -> None:
        if self.starts == 0:
            return
        limit = self.server.max_restarts
        if self.restarts_in_a_row >= limit:
            raise McpServerError(
                f"{self.where} is not started again: it was restarted {limit} times in a row "
                f"without answering a call in between (max_restarts={limit}){self.stderr_tail()}"
            )
        self.restarts_in_a_row += 1

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
                self.restarts_in_a_row = 0
                return tools

    async def call(
        self, name: str, arguments: dict[str, Any], *, repeatable: bool, timeout_s: float | None
    ) -> Any:
        """`tools/call` within `timeout_s`. A closed connection restarts the server, and a
        repeatable call is made once more on the new one; a call without an answer in time
        is followed by a ping, and a server that does not answer it is stopped."""
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED

        for attempt in (1, 2):
            session = await self.session()
            # Its own task: on a timeout the server is pinged before the call is given up
            # (the SDK's cancel notice, sent then, waits behind a stuck server for 5 s).
            asked = asyncio.create_task(session.call_tool(name, arguments))
            asked.add_done_callback(_retrieved)
            try:
                result = await asyncio.wait_for(asyncio.shield(asked), timeout_s)
            except TimeoutError:
                said = f"{self.where} did not answer {name!r} in time"
                verdict = await asyncio.shield(self._check_soon(session))
                asked.cancel()
                raise CallTimedOut(said + verdict) from None
            except asyncio.CancelledError:
                asked.cancel()
                self._check_soon(session)  # the next call waits for the verdict
                raise
            except MCPError as exc:
                if exc.code != CONNECTION_CLOSED:
                    self.restarts_in_a_row = 0  # it answered, with an error
                    raise
            else:
                self.restarts_in_a_row = 0
                return result
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
        if self._checking is not None:
            self._checking.cancel()
        if self._session is not None:
            await self._drop(self._session)
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    # -- a server that may have stopped answering ----------------------------------------------
    def _check_soon(self, session: Any) -> asyncio.Task[str]:
        """The ping that follows an abandoned call (one at a time)."""
        if self._checking is None or self._checking.done():
            self._checking = asyncio.create_task(self._check(session))
        return self._checking

    async def _check(self, session: Any) -> str:
        """Ping the server; one that does not answer is stopped, for the next call to start
        again. What became of it, as the end of a sentence about the call."""
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED

        if session is not self._session:
            return "; the server had been restarted already"
        note = ""
        if self._process is not None and self._process.dropped:  # perhaps this call's answer
            note, self._process.dropped = f"; {self._process.dropped}", None
        try:
            async with asyncio.timeout(PING_TIMEOUT_S):
                await session.send_ping()
        except TimeoutError:
            why = f"it did not answer a ping within {PING_TIMEOUT_S:g} s either"
        except MCPError as exc:
            if exc.code != CONNECTION_CLOSED:
                return f"{note}; it still answers a ping, so it keeps running"
            why = "its connection closed"
        except Exception as exc:  # the ping could not be sent: the session is broken
            why = f"a ping failed ({type(exc).__name__})"
        else:
            return f"{note}; it still answers a ping, so it keeps running"
        if session is not self._session:  # closed meanwhile (the process is exiting)
            return f"{note}; the server was closed meanwhile"
        return f"{note}; {why}: {await self._stop_stuck(session)}"

    async def _stop_stuck(self, session: Any) -> str:
        """Stop a server that stopped answering: its whole process group, or its HTTP client."""
        stdio = isinstance(self.server, StdioServer)
        if stdio and self._process is not None:
            self._process.kill()
        elif self._client is not None:
            self._client.stuck = True
        # Cancelled, not asked to stop: what the session waits for, it would wait for in vain.
        await self._drop(session, cancel=True)
        limit = self.server.max_restarts
        what = "it was stopped" if stdio else "its session was closed"
        log.warning("%s stopped answering; %s", self.where, what)
        if self.restarts_in_a_row >= limit:
            return (
                f"{what}, and is not started again: it was restarted {limit} times in a row "
                f"without answering a call in between (max_restarts={limit})"
            )
        again = "starts it again" if stdio else "opens a new one"
        return (
            f"{what}, and the next call {again} (restart {self.restarts_in_a_row + 1} of at "
            f"most {limit} in a row){self.stderr_tail()}"
        )

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
            what = exc.filename or self.server.command[0]
            return f"{self.where} could not be started: {exc.strerror}: {what!r}"
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
            from agentbench.runtime.mcp.stdio import StdioTransport

            assert self._stderr is not None
            self._process = StdioTransport(server, self._stderr.file)
            return self._process
        from mcp.client.streamable_http import streamable_http_client

        from agentbench.runtime.mcp.http import HttpClient

        headers = dict(server.headers or ())
        self._client = HttpClient(server.url, headers, server.max_message_bytes, self.where)
        stack.push_async_callback(self._client.aclose)
        stack.push_async_callback(self._client.end_session)  # after the transport, before aclose
        # The bound is the client's (every response passes through it), not the SDK's event
        # limit, which would fail an event over it as a closed connection.
        return streamable_http_client(
            server.url,
            http_client=self._client.client,
            terminate_on_close=False,
            max_sse_event_size=None,
        )

    async def _drop(self, session: Any, *, cancel: bool = False) -> None:
        """Stop the owner of `session` (the process with it) if it is still the current one;
        `cancel` for a server that stopped answering (nothing is waited for on the way out)."""
        if session is not self._session:
            return
        self._session = None
        stop, owner = self._stop, self._owner
        if cancel and owner is not None:
            owner.cancel()
        elif stop is not None:
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


def find(server: McpServer) -> Connection | None:
    """The process's connection to `server` if it has one (none is made)."""
    with _lock:
        return _connections.get(server)


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
