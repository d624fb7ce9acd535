"""Every tool an agent can reach: its own, then those of each agent it can hand over to or
route to (each agent once, in the order a reader meets them)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from agentbench.runtime.agent import Agent
from agentbench.runtime.tools import Tool


def reachable_tools(root: Agent) -> Iterator[tuple[Agent, Tool]]:
    """(agent, tool) for the agent's tools, then every agent it can reach."""
    queue, seen = [root], {id(root)}
    while queue:
        agent = queue.pop(0)
        for item in agent.registry:
            yield agent, item
            for reached in _reached(item):
                if id(reached) not in seen:
                    seen.add(id(reached))
                    queue.append(reached)


def _reached(item: Tool) -> Iterable[Agent]:
    target = getattr(item, "handoff_target", None)
    if isinstance(target, Agent):
        yield target
    routes = getattr(item, "routes", None)
    if routes is not None:
        yield from (routes.get(agent_id) for agent_id in routes.ids)
