"""The stdio transport: a server started under a keeper, its messages read up to a size limit.

In place of the SDK's `stdio_client`, for two reasons. Its reader keeps no limit (and joins a
long line's pieces one by one, so a 50 MB answer took it minutes while every later answer
waited behind it); here a line is read up to the server's `max_message_bytes`, and one past it
is read on and thrown away in bounded memory (`limits.Discarded`), its call answered with an
error that says the size and the limit. And the SDK stops the server's process group only when
the server outstays its grace, while a child it started stays behind, as it does when this
process dies without closing it: here the server runs under `_keeper.py`, which ends the whole
group when the server exits or when this process goes, however it goes.

Messages go in and out as the SDK's own (`SessionMessage`, newline-delimited JSON), so the
SDK's `ClientSession` runs on these streams unchanged.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import IO, Any

import anyio

from agentbench.runtime.mcp.limits import Discarded, too_large_error
from agentbench.runtime.mcp.servers import StdioServer

log = logging.getLogger("agentbench.mcp")

KEEPER = Path(__file__).with_name("_keeper.py")
GRACE_S = 2.0  # the server's time to exit once its input ends, and again after SIGTERM
_CLOSE_WAIT_S = 2 * GRACE_S + 1.0
_CHUNK = 1 << 16
_POLL_S = 0.01


class StdioTransport:
    """One server process under its keeper; entered, it gives the session's two streams."""

    def __init__(self, server: StdioServer, errlog: IO[str]) -> None:
        self.server = server
        self.dropped: str | None = None  # the last message too large that answered no call
        self._errlog = errlog
        self._keeper: asyncio.subprocess.Process | None = None
        self._lifeline: int | None = None
        self._pending: set[int | str] = set()  # requests sent and not yet answered
        self._tasks: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> tuple[Any, Any]:
        from mcp.shared.message import SessionMessage

        try:
            keeper = await self._start()
        except BaseException:
            await self.close()  # the lifeline, and a keeper that outlived a cancelled start
            raise
        to_session, from_server = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        to_server, from_session = anyio.create_memory_object_stream[SessionMessage](0)
        assert keeper.stdout is not None and keeper.stdin is not None
        self._tasks = [
            asyncio.create_task(self._read(keeper.stdout, to_session)),
            asyncio.create_task(self._write(from_session, keeper.stdin, to_session)),
        ]
        return from_server, to_server

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def kill(self) -> None:
        """End the server's whole process group at once (a server that stopped answering)."""
        kill_kept(self._keeper)

    async def close(self) -> None:
        """End the server's input and the keeper's lifeline: the keeper gives the server its
        grace and then ends the group. Waits for that, boundedly; kills what is left."""
        lifeline, self._lifeline = self._lifeline, None
        await stop_kept(self._keeper, lifeline)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # -- starting ------------------------------------------------------------------------------
    async def _start(self) -> asyncio.subprocess.Process:
        from mcp.client.stdio import get_default_environment

        server = self.server
        env = get_default_environment() | dict(server.env or ())
        keeper, self._lifeline = await start_kept(
            list(server.command), server.cwd, env, self._errlog
        )
        self._keeper = keeper
        return keeper

    # -- the two directions --------------------------------------------------------------------
    async def _read(self, stdout: asyncio.StreamReader, to_session: Any) -> None:
        """Newline-delimited messages from the server, each up to the limit, until its output
        ends (then the session's stream ends: a call still waiting learns the server is gone)."""
        async with to_session:
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                await self._read_messages(stdout, to_session)

    async def _read_messages(self, stdout: asyncio.StreamReader, to_session: Any) -> None:
        async def deliver(line: bytes) -> None:
            await self._deliver(line, to_session)

        async def refuse(discarded: Discarded) -> None:
            await self._refuse(discarded, to_session)

        await read_lines(stdout, self.server.max_message_bytes, deliver, refuse)

    async def _deliver(self, line: bytes, to_session: Any) -> None:
        from mcp.shared.message import SessionMessage
        from mcp_types import JSONRPCError, JSONRPCResponse, jsonrpc_message_adapter

        try:
            message = jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError as exc:  # not JSON-RPC: the session reports it, as the SDK's does
            await to_session.send(exc)
            return
        if isinstance(message, JSONRPCResponse | JSONRPCError):
            self._pending.discard(message.id)
        await to_session.send(SessionMessage(message))

    async def _refuse(self, discarded: Discarded, to_session: Any) -> None:
        from mcp.shared.message import SessionMessage
        from mcp_types import jsonrpc_message_adapter

        limit = self.server.max_message_bytes
        request_id = discarded.response_id()
        if request_id is not None and request_id in self._pending:
            self._pending.discard(request_id)
            answer = too_large_error(request_id, discarded.size, limit)
            await to_session.send(SessionMessage(jsonrpc_message_adapter.validate_python(answer)))
            return
        self.dropped = (
            f"it sent a message of {discarded.size:,} bytes, over the limit of {limit:,} bytes "
            "(max_message_bytes), that names no call waiting for an answer; it was dropped"
        )
        log.warning("MCP server (%s): %s", self.server.describe(), self.dropped)

    async def _write(self, from_session: Any, stdin: asyncio.StreamWriter, to_session: Any) -> None:
        from mcp_types import JSONRPCRequest

        try:
            async with from_session:
                async for session_message in from_session:
                    message = session_message.message
                    if isinstance(message, JSONRPCRequest):
                        self._pending.add(message.id)
                    data = message.model_dump_json(by_alias=True, exclude_unset=True)
                    stdin.write(data.encode() + b"\n")
                    await stdin.drain()
        except (OSError, ValueError):
            # The server stopped reading (or a message could not be written): end the
            # session's stream, so no call waits for an answer that cannot come.
            await to_session.aclose()


# -- a process under its keeper, and its lines: shared with `agentbench mcp-proxy` -------------


async def start_kept(
    command: list[str], cwd: str | None, env: dict[str, str], errlog: Any
) -> tuple[asyncio.subprocess.Process, int]:
    """Start `command` in a process group of its own under the keeper; the keeper process
    (whose stdin and stdout are the command's) and the write end of its lifeline."""
    lifeline_in, lifeline_out = os.pipe()
    report_in, report_out = os.pipe()
    settings = {
        "command": command,
        "cwd": cwd,
        "lifeline": lifeline_in,
        "report": report_out,
        "grace_s": GRACE_S,
    }
    try:
        keeper = await asyncio.create_subprocess_exec(
            sys.executable,
            "-I",
            str(KEEPER),
            json.dumps(settings),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errlog,
            env=env,
            pass_fds=(lifeline_in, report_out),
            # Its own session: a Ctrl-C at the terminal is this process's to handle, and
            # one killpg reaches the server and everything it started.
            start_new_session=True,
        )
    except BaseException:
        os.close(lifeline_out)
        os.close(report_in)
        raise
    finally:
        os.close(lifeline_in)
        os.close(report_out)
    try:
        report = await _read_report(report_in)
    except BaseException:
        await stop_kept(keeper, lifeline_out)
        raise
    if "pid" not in report:
        os.close(lifeline_out)
        await _exited_within(keeper, GRACE_S)
        raise OSError(report.get("errno"), report.get("strerror"), report.get("filename"))
    log.debug("MCP server (%s) started: pid %s", " ".join(command), report["pid"])
    return keeper, lifeline_out


def kill_kept(keeper: asyncio.subprocess.Process | None) -> None:
    """End a kept process's whole group at once."""
    if keeper is not None and keeper.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(keeper.pid, signal.SIGKILL)


async def stop_kept(keeper: asyncio.subprocess.Process | None, lifeline: int | None) -> None:
    """End the command's input and the keeper's lifeline; wait for the group to end,
    boundedly, and kill what is left."""
    if keeper is not None and keeper.stdin is not None:
        keeper.stdin.close()
    if lifeline is not None:
        os.close(lifeline)
    if keeper is not None and not await _exited_within(keeper, _CLOSE_WAIT_S):
        kill_kept(keeper)
        await _exited_within(keeper, GRACE_S)


async def read_lines(
    stdout: asyncio.StreamReader,
    limit: int,
    deliver: Callable[[bytes], Awaitable[None]],
    refuse: Callable[[Discarded], Awaitable[None]],
) -> None:
    """Newline-delimited messages, each up to `limit` bytes, until the output ends; a longer
    one is read on in bounded memory and handed to `refuse`."""
    line = bytearray()
    discarded: Discarded | None = None
    while chunk := await stdout.read(_CHUNK):
        while chunk:
            end = chunk.find(b"\n")
            piece, chunk = (chunk, b"") if end < 0 else (chunk[:end], chunk[end + 1 :])
            if discarded is not None:
                discarded.feed(piece)
            elif len(line) + len(piece) > limit:
                discarded, line = Discarded(line), bytearray()
                discarded.feed(piece)
            else:
                line += piece
            if end < 0:
                continue
            if discarded is not None:
                await refuse(discarded)
                discarded = None
            elif line.strip():
                await deliver(bytes(line))
            line = bytearray()


async def _read_report(fd: int) -> dict[str, Any]:
    """The keeper's one line: the server's pid, or why it could not be started."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", buffering=0)
    )
    try:
        line = await reader.readline()
    finally:
        transport.close()
    try:
        report = json.loads(line)
    except ValueError:
        report = None
    if not isinstance(report, dict):
        return {"errno": None, "strerror": "its keeper process ended before starting it"}
    return report


async def _exited_within(process: asyncio.subprocess.Process, seconds: float) -> bool:
    """Whether `process` exited within `seconds`. Not `process.wait()`: that also waits for
    its pipes to close, which a child that escaped the group may hold open."""
    deadline = asyncio.get_running_loop().time() + seconds
    while process.returncode is None:
        if asyncio.get_running_loop().time() >= deadline:
            return False
        await asyncio.sleep(_POLL_S)
    return True
