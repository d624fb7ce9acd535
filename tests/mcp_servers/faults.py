"""An MCP server that misbehaves on request: slow, stuck, crashing, `isError`, a malformed schema,
answers too large to read, a huge JSON-RPC error, a child process left behind.

    python -m tests.mcp_servers.faults                    # stdio
    python -m tests.mcp_servers.faults --http PORT        # answers as server-sent events
    python -m tests.mcp_servers.faults --http-json PORT   # answers as JSON bodies

`FAULTS_BAD_SCHEMA=1` makes `tools/list` describe `echo` with an input schema that is not a
JSON Schema (a property typed "strng"), as a server with a hand-written schema might.
`FAULTS_CRASH_ON_START=1` makes the process exit before it answers anything, and
`FAULTS_HANG_ON_START=1` makes it never answer the handshake. `FAULTS_STARTED=PATH` makes
`slow` and `stall` create PATH once they have begun (a test's cue, instead of a guessed delay).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp.types import ToolAnnotations

server = MCPServer("agentbench-faults", version="1")
CALLS = {"count": 0}


def _say_started() -> None:
    started = os.environ.get("FAULTS_STARTED")
    if started:
        Path(started).write_text(str(os.getpid()))


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def echo(text: str) -> str:
    """Answer with the text it was given."""
    return text


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def count() -> dict[str, int]:
    """How many calls this process has answered (a restarted server starts again at 1)."""
    CALLS["count"] += 1
    return {"count": CALLS["count"], "pid": os.getpid()}


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def slow(seconds: float) -> str:
    """Answer after `seconds`."""
    _say_started()
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def stall(seconds: float = 3600) -> str:
    """Stop answering anything for `seconds`: the server's event loop is blocked, so pings go
    unanswered too (an async tool that sleeps without awaiting, as a stuck server does)."""
    _say_started()
    time.sleep(seconds)  # noqa: ASYNC251 - blocking the loop is the fault
    return f"stalled {seconds}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def big(size: int) -> str:
    """Answer with `size` characters of text."""
    return "x" * size


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def big_error(size: int) -> str:
    """Answer with a JSON-RPC error whose message is `size` characters long."""
    raise MCPError(code=-32603, message="E" * size)


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
def spawn_child() -> dict[str, int]:
    """Start a long-lived child process (in the server's process group) and say its pid."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    return {"child": child.pid, "server": os.getpid()}


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
def crash() -> str:
    """Kill the server process in the middle of the call."""
    os._exit(3)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def crash_once(marker: str) -> str:
    """Kill the server process the first time (when `marker` does not exist yet), answer after."""
    if not os.path.exists(marker):
        with open(marker, "w") as file:
            file.write("crashed")
        os._exit(3)
    return f"answered by {os.getpid()}"


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
def refuse(account: str) -> str:
    """Always refuses: an `isError` result, the tool's own "no"."""
    raise ToolError(f"account {account} is closed")


@server.tool()
def plain(value: int) -> str:
    """A tool without annotations: its effect is unknown."""
    return str(value * 2)


async def _bad_schema(ctx: Any, call_next: Any) -> Any:
    result = await call_next(ctx)
    if ctx.method == "tools/list" and os.environ.get("FAULTS_BAD_SCHEMA") == "1":
        data = result if isinstance(result, dict) else result.model_dump(by_alias=True)
        for tool in data["tools"]:
            if tool["name"] == "echo":
                tool["inputSchema"] = {"type": "object", "properties": {"text": {"type": "strng"}}}
        return data
    return result


server.middleware.append(_bad_schema)


def main() -> None:
    if os.environ.get("FAULTS_HANG_ON_START") == "1":
        print(f"faults: hanging on start as asked, pid {os.getpid()}", file=sys.stderr, flush=True)
        time.sleep(3600)
    if os.environ.get("FAULTS_CRASH_ON_START") == "1":
        print("faults: crashing on start as asked", file=sys.stderr)
        sys.exit(7)
    if len(sys.argv) == 3 and sys.argv[1] in ("--http", "--http-json"):
        json_response = sys.argv[1] == "--http-json"
        server.run(
            "streamable-http", host="127.0.0.1", port=int(sys.argv[2]), json_response=json_response
        )
    else:
        server.run()


if __name__ == "__main__":
    main()
