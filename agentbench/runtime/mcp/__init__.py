"""MCP servers' tools as agent tools (the `mcp` extra: `pip install 'agentbench[mcp]'`).

    from agentbench.runtime.mcp import StdioServer, mcp_tools

    time_tools = mcp_tools(StdioServer(["python", "-m", "mcp_server_time"]), prefix="time")
    agent = Agent(name="clock", tools=[*time_tools, my_python_tool])

The `mcp` SDK is imported only when a server is used, so importing this package (and an agent
defined from a tool snapshot, `schema=`) works without it.
"""

from agentbench.runtime.mcp.connection import McpServerError, close_all
from agentbench.runtime.mcp.servers import HttpServer, McpServer, StdioServer
from agentbench.runtime.mcp.tools import McpTool, effect_of, mcp_tools

__all__ = [
    "HttpServer",
    "McpServer",
    "McpServerError",
    "McpTool",
    "StdioServer",
    "close_all",
    "effect_of",
    "mcp_tools",
]
