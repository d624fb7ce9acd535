"""A parts desk built with the OpenAI Agents SDK whose tools are an MCP server's.

`parts_desk` is what agentbench runs (`agent: golden.openai_agents_mcp.agent:parts_desk`). It
is plain Agents SDK: an `Agent` with `mcp_servers=[MCPServerStdio(...)]`, the SDK's own MCP
client starting the server as a command. The one line that is agentbench's is where that
command comes from: `target.mcp_stdio("stock", command)` hands the SDK a command that reaches
the case's MCP proxy, which records the real server (`stock_server.py`), replays it, or
injects a fault, as the suite's and the case's `tools:` say. The model is the SDK's default
Responses API model on a client pointed at `target.base_url`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from agents import Agent, RunConfig, RunContextWrapper, Runner
from agents.mcp import MCPServerStdio
from agents.models.openai_responses import OpenAIResponsesModel
from openai import AsyncOpenAI

from agentbench import TargetContext

ROOT = Path(__file__).resolve().parents[2]  # where `golden.` imports from
SERVER = [sys.executable, "-m", "golden.openai_agents_mcp.stock_server"]
INSTRUCTIONS = (
    "You are the parts desk of a maintenance workshop. Look parts up and reserve them with "
    "the warehouse tools; when a tool fails, say what failed rather than guessing."
)


def _tell_the_model(ctx: RunContextWrapper[Any], error: Exception) -> str:
    # The SDK's default hides the failure from the model ("An error occurred while running
    # the tool"); this desk lets the model say what failed.
    return f"the warehouse failed: {error}"


async def parts_desk(input: str | list[dict[str, Any]], target: TargetContext) -> str:
    """One turn of the parts desk."""
    stock = MCPServerStdio(
        params=target.mcp_stdio("stock", SERVER, cwd=ROOT).params,
        name="stock",
        cache_tools_list=True,
        client_session_timeout_seconds=20,
        failure_error_function=_tell_the_model,
    )
    async with AsyncOpenAI(base_url=target.base_url, api_key=target.api_key) as client, stock:
        desk = Agent(
            name="parts_desk",
            instructions=INSTRUCTIONS,
            mcp_servers=[stock],
            model=OpenAIResponsesModel(model=target.model, openai_client=client),
        )
        result = await Runner.run(desk, input, run_config=RunConfig(tracing_disabled=True))
        return str(result.final_output)
