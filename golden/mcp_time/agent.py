"""World clock agent: the time tools of a real MCP server (`mcp-server-time`) beside a Python
tool, in one agent.

The server's tool list is checked in (`time_tools.json`), so defining the agent needs neither
the server nor the `mcp` package: `agentbench run golden/` replays the time tools' recorded
results (the suite's `tools:` policy). With `--tool time_convert_time=live` (and the `mcp`
extra installed) the server is started on the first call and answers for real.
"""

from __future__ import annotations

import sys
from pathlib import Path

from agentbench import Agent, BusinessFailure, tool
from agentbench.runtime.mcp import StdioServer, mcp_tools

# UTC as the server's local zone: its tool descriptions name it, and the model sees them.
TIME_SERVER = StdioServer([sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"])

OFFICES: dict[str, str] = {
    "priya": "Asia/Kolkata",
    "lars": "Europe/Oslo",
    "maria": "America/Sao_Paulo",
    "kenji": "Asia/Tokyo",
}


@tool(effect="read_only", idempotent=True, timeout_s=5, blocking=False)
def office_timezone(person: str) -> str:
    """The IANA time zone of a colleague's office.

    Args:
        person: The colleague's first name, e.g. "Priya".
    """
    zone = OFFICES.get(person.strip().lower())
    if zone is None:
        raise BusinessFailure(f"no office on file for {person!r}", data={"known": sorted(OFFICES)})
    return zone


time_tools = mcp_tools(
    TIME_SERVER, prefix="time", schema=Path(__file__).with_name("time_tools.json")
)

clock_agent = Agent(
    name="world_clock",
    instructions=(
        "You answer questions about times across time zones. Use the time tools for the "
        "current time and for conversions, and office_timezone to find where a colleague "
        "works. Give times as HH:MM with the zone."
    ),
    tools=[*time_tools, office_timezone],
)
