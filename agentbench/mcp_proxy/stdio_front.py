"""The proxy as a stdio MCP server: what `agentbench mcp-proxy` is to a client that starts it.

Each line on stdin is one JSON-RPC message (up to the message limit; a longer one is read on
and answered with an error, never held), handled in a task of its own so a slow call holds up
no other; answers, and whatever the real server sends the client (notifications, its own
requests such as sampling), go to stdout one line each. When stdin ends the answers still on
their way are written and the session ends; an injected crash ends it at once, output closed,
as a crashed server's is.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
from typing import Any

import orjson

from agentbench.mcp_proxy.proxy import McpProxy, ServerCrash
from agentbench.mcp_proxy.upstream import MAX_MESSAGE_BYTES, Message
from agentbench.runtime.mcp.limits import Discarded, too_large_error

DRAIN_S = 30.0  # how long answers still on their way may take once the client's input ends


class _FileFeed:
    """Feeds a reader from a file a pipe transport cannot take (a redirected regular file)."""

    def __init__(self, source: Any, reader: asyncio.StreamReader, loop: Any) -> None:
        self._thread = threading.Thread(target=self._run, args=(source, reader, loop), daemon=True)
        self._thread.start()

    @staticmethod
    def _run(source: Any, reader: asyncio.StreamReader, loop: Any) -> None:
        try:
            while (
                chunk := source.read1(1 << 16) if hasattr(source, "read1") else source.read(1 << 16)
            ):
                loop.call_soon_threadsafe(reader.feed_data, chunk)
        except (OSError, ValueError):
            pass
        finally:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is reading
                loop.call_soon_threadsafe(reader.feed_eof)

    def close(self) -> None:
        """Nothing to close: the thread ends with the file."""


async def serve_stdio(proxy: McpProxy, stdin: Any = None, stdout: Any = None) -> bool:
    """Serve `proxy` on the process's stdin and stdout until stdin ends; False when an
    injected crash ended it."""
    from agentbench.runtime.mcp.stdio import read_lines

    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 16)
    source = stdin or sys.__stdin__.buffer
    try:
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), source
        )
    except ValueError:  # a regular file (`< session.jsonl`): read it in a thread
        transport = _FileFeed(source, reader, loop)
    # The process's own streams, not whatever wraps sys.stdout for people: this one is the
    # protocol's.
    out = stdout or sys.__stdout__.buffer
    lock = asyncio.Lock()
    tasks: set[asyncio.Task[None]] = set()
    crashed = asyncio.Event()

    async def write(message: Message) -> None:
        async with lock:
            out.write(orjson.dumps(message) + b"\n")
            out.flush()

    proxy.on_server_message = write

    async def answer(message: Any) -> None:
        try:
            reply = await proxy.handle(message)
        except ServerCrash:
            crashed.set()
            return
        if reply is not None and not crashed.is_set():
            await write(reply)

    async def deliver(line: bytes) -> None:
        try:
            message = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            problem = f"agentbench mcp-proxy: a line that is not JSON ({exc})"
            await write(
                {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": problem}}
            )
            return
        task = asyncio.create_task(answer(message))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    async def refuse(discarded: Discarded) -> None:
        request_id = discarded.response_id()  # a request's id sits where an answer's does
        if request_id is not None:
            await write(too_large_error(request_id, discarded.size, MAX_MESSAGE_BYTES))

    reading = asyncio.create_task(read_lines(reader, MAX_MESSAGE_BYTES, deliver, refuse))
    crash = asyncio.create_task(crashed.wait())
    try:
        await asyncio.wait({reading, crash}, return_when=asyncio.FIRST_COMPLETED)
        if not crashed.is_set() and tasks:
            await asyncio.wait(set(tasks), timeout=DRAIN_S)
    finally:
        for task in (reading, crash, *tasks):
            task.cancel()
        await asyncio.gather(reading, crash, *tasks, return_exceptions=True)
        transport.close()
        with contextlib.suppress(OSError, ValueError):
            out.flush()
    return not crashed.is_set()
