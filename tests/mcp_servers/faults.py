"""An MCP server that misbehaves on request: slow, crashing, `isError`, a malformed schema.

    python -m tests.mcp_servers.faults            # stdio
    python -m tests.mcp_servers.faults --http PORT

`FAULTS_BAD_SCHEMA=1` makes `tools/list` describe `echo` with an input schema that is not a
JSON Schema (a property typed "strng"), as a server with a hand-written schema might.
`FAULTS_CRASH_ON_START=1` makes the process exit before it answers anything, and
`FAULTS_HANG_ON_START=1` makes it never answer the handshake.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

server = MCPServer("agentbench-faults", version="1")
CALLS = {"count": 0}


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
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


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
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()


if __name__ == "__main__":
    main()
