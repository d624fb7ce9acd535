"""Parts desk agent: the tools of a stub MCP server (`parts_server.py`) called live.

Unlike `golden/mcp_time`, whose MCP results are replayed, these tools really run: the first
call of a run starts the stub server over stdio (`python -m golden.mcp_live.parts_server`,
from the repository root) and every call goes through agentbench's MCP adapter, so the
adapter's result handling (structured content, an `isError` answer, text beside structured
content) is what each case checks. The tool list is checked in (`parts_tools.json`), so
defining the agent starts nothing.
"""

from __future__ import annotations

import sys
from pathlib import Path

from agentbench import Agent
from agentbench.runtime.mcp import StdioServer, mcp_tools

HERE = Path(__file__).resolve().parent
# From the repository root, so the server is this checkout's (a copy's own, in a copy).
PARTS_SERVER = StdioServer(
    [sys.executable, "-m", "golden.mcp_live.parts_server"], cwd=HERE.parent.parent
)

parts_desk = Agent(
    name="parts_desk",
    instructions=(
        "You help maintenance engineers with spare parts. Use the warehouse tools to look "
        "parts up, reserve them and read their history; report a refusal as it is, without "
        "trying again. Be brief."
    ),
    tools=mcp_tools(PARTS_SERVER, prefix="warehouse", schema=HERE / "parts_tools.json"),
)
