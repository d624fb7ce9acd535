"""MCP tool lists the model was shown from a `schema=` snapshot, against the live server's.

An agent that keeps its MCP tool list in a snapshot file (`mcp_tools(server, schema=PATH)`)
shows the model the snapshot's tools, descriptions and schemas, whatever the server has now.
When a tool of it ran live in a session, the server was asked for its own list as it started
(`runtime.mcp.tools.snapshot_and_live`); where the two differ, the model was shown
descriptions the server no longer has: request drift of the session's first model call (the
first to carry the tools), named by server, tool and field, as the MCP proxy names it.
`agentbench mcp-proxy --update PATH -- SERVER` refreshes the snapshot deliberately.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agentbench.mcp_proxy.matching import tool_list_changes
from agentbench.replay.drift import Change
from agentbench.replay.drifted_calls import Drift
from agentbench.replay.fallback_paths import fallback_drifts, with_fallback_drifts
from agentbench.replay.tool_policy import ToolPolicies, ToolPolicy
from agentbench.runtime.agent import Agent
from agentbench.runtime.agent_tree import reachable_tools
from agentbench.runtime.mcp.tools import snapshot_and_live


def snapshot_drifts(agent: Any, events: Iterable[Any], policies: ToolPolicies) -> list[Drift]:
    """Drift of model call #1 for each snapshot whose live server now differs."""
    if not isinstance(agent, Agent):
        return []
    ran_live = {
        e.tool
        for e in events
        if e.kind == "tool_finished" and policies.policy_for(e.tool) is ToolPolicy.LIVE
    }
    changes: list[Change] = []
    compared: set[int] = set()
    for _, tool in reachable_tools(agent):
        found = snapshot_and_live(tool) if tool.name in ran_live else None
        if found is None or id(found[0]) in compared:
            continue
        snapshot, live = found
        compared.add(id(snapshot))
        where = f"mcp {tool.server.describe()} tools/list vs {snapshot.path.name}"  # type: ignore[attr-defined]
        changes += [
            Change(f"{where}: {c.path}", c.kind, c.old, c.new)
            for c in tool_list_changes(snapshot.tools, live)
        ]
    return [Drift(0, changes)] if changes else []


def session_drifts(
    model_drifts: list[Drift], agent: Any, events: list[Any], policies: ToolPolicies
) -> list[Drift]:
    """A replayed session's drifts, one entry per model call: a changed MCP tool list first
    (the cause), then the requests' own differences and the fallback paths'."""
    own = with_fallback_drifts(model_drifts, fallback_drifts(agent, events))
    return with_fallback_drifts(snapshot_drifts(agent, events, policies), own)
