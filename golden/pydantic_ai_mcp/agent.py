"""A bike workshop's parts desk built with pydantic-ai whose tools are an MCP server's.

`parts_desk` is what agentbench runs (`agent: golden.pydantic_ai_mcp.agent:parts_desk`). It is
plain pydantic-ai: an `Agent` with `toolsets=[MCPToolset(url)]`, pydantic-ai's own MCP client
(FastMCP's) speaking Streamable HTTP. The one line that is agentbench's is where that URL comes
from: `target.mcp_url("stock", command=SERVER)` is the case's MCP proxy, which starts the real
server (`stock_server.py`) over stdio and records it, replays it, or injects a fault, as the
suite's and the case's `tools:` say. The model is an `OpenAIChatModel` on `target.base_url`.

How tool errors reach the model is pydantic-ai's choice, made here as its users make it:
`tool_error_behavior="failed"` hands a tool's `isError` result to the model as a failed tool
result (`ToolFailed`) rather than a retry; a JSON-RPC error is always a `ModelRetry` in
pydantic-ai, whatever that setting says. Both reach the model as a failed tool result,
`{"error": "<what failed>"}`, so the desk is told what failed and says so to the user; nothing
is raised to the caller (unless the model kept retrying past the toolset's retries).
"""

from __future__ import annotations

import sys
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from agentbench import TargetContext

SERVER = [sys.executable, "-m", "golden.pydantic_ai_mcp.stock_server"]
INSTRUCTIONS = (
    "You are the parts desk of a bike workshop. Look parts up and reserve them with the "
    "warehouse tools; when a tool fails, say what failed rather than guessing."
)


async def parts_desk(input: str | list[dict[str, Any]], target: TargetContext) -> str:
    """One turn of the parts desk."""
    prompt = input if isinstance(input, str) else str(input[-1]["content"])
    stock = MCPToolset(
        target.mcp_url("stock", command=SERVER),
        id="stock",
        tool_error_behavior="failed",
        init_timeout=20,
    )
    desk = Agent(instructions=INSTRUCTIONS, toolsets=[stock], name="parts_desk")
    provider = OpenAIProvider(base_url=target.base_url, api_key=target.api_key)
    # Entered, the model closes the HTTP client its provider made when the turn is over; the
    # agent, entered, connects to the MCP server once for the whole turn.
    async with OpenAIChatModel(target.model, provider=provider) as model, desk:
        result = await desk.run(prompt, model=model)
    return result.output
