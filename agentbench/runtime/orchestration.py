"""Multi-agent orchestration: handoffs, a router, a registry, and the ping-pong guard.

A handoff ends the current agent's run (stop reason `handoff`) and starts the target as a
child run (`parent_run_id`), linked by a `Handoff` event. The target receives the global
context, the session variables it may read, no request variables, the conversation's dialogue
(not the previous agent's tool exchanges), and a note with the reason and a summary of the
pending problem, so it continues mid-conversation instead of starting over.

Three ways to decide a handoff: a `transfer_to_<agent>` tool; a structured final answer with
`handoff_to` and `context_updates` (seed 001); or a `Router` whose single `dispatch_to_agent`
tool picks a registered agent and rewrites the query (seed 004) — and keeps a short follow-up
with the agent that answered last, without asking the model.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from agentbench.errors import UsageError
from agentbench.runtime.agent import Agent
from agentbench.runtime.context import RunContext
from agentbench.runtime.conversation import is_summary
from agentbench.runtime.tool_schema import strip_titles
from agentbench.runtime.tools import Effect, Tool

DISPATCH_TOOL = "dispatch_to_agent"


@dataclass(frozen=True)
class HandoffRequest:
    """A decision to pass the conversation to another agent."""

    target: Agent
    mode: Literal["tool", "structured", "router", "chain"]
    reason: str = ""
    summary: str = ""
    context_updates: dict[str, Any] = field(default_factory=dict)
    query: str | None = None  # a router's refined query replaces the last user message


def request_from_tool(tool: Tool, kwargs: dict[str, Any]) -> HandoffRequest | None:
    """The handoff a validated call of a handoff or dispatch tool asks for, if any."""
    target = getattr(tool, "handoff_target", None)
    if target is not None:
        return HandoffRequest(
            target,
            "tool",
            reason=kwargs.get("reason", ""),
            summary=kwargs.get("summary", ""),
            context_updates=dict(kwargs.get("context_updates") or {}),
        )
    routes: AgentRegistry | None = getattr(tool, "routes", None)
    if routes is not None:
        query = kwargs["refined_query"]
        return HandoffRequest(
            routes.get(kwargs["agent_id"]),
            "router",
            reason=f"router chose {kwargs['agent_id']}",
            summary=query,
            query=query,
        )
    return None


def request_from_decision(agent: Agent, decision: BaseModel) -> HandoffRequest | None:
    target_name = getattr(decision, "handoff_to", None)
    if not target_name:
        return None
    target = agent.handoff_target(target_name)
    assert target is not None  # the decision type only admits declared targets
    return HandoffRequest(
        target,
        "structured",
        reason=decision.reason,  # type: ignore[attr-defined]
        summary=decision.summary,  # type: ignore[attr-defined]
        context_updates=dict(decision.context_updates),  # type: ignore[attr-defined]
    )


def ping_pong(path: Sequence[str], target: str, max_bounces: int) -> bool:
    """Whether going to `target` after `path` bounces between two agents too often."""
    full = [*path, target]
    bounces = sum(
        1 for i in range(2, len(full)) if full[i] == full[i - 2] and full[i] != full[i - 1]
    )
    return bounces > max_bounces


def _is_dialogue(message: dict[str, Any]) -> bool:
    if message.get("role") == "user":
        return True
    return (
        message.get("role") == "assistant"
        and bool(message.get("content"))
        and not message.get("tool_calls")
        and not is_summary(message)
    )


def dialogue(messages: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The user-facing conversation: user turns and plain answers, no tool exchanges."""
    return [{"role": m["role"], "content": m["content"]} for m in messages if _is_dialogue(m)]


def child_input(messages: list[dict[str, Any]], request: HandoffRequest) -> list[dict[str, Any]]:
    """What the target agent starts from: the dialogue, with a router's refined query last."""
    turns = dialogue(messages)
    if request.query is None:
        return turns
    if turns and turns[-1]["role"] == "user":
        turns = turns[:-1]
    return [*turns, {"role": "user", "content": request.query}]


def handoff_note(source: str, request: HandoffRequest) -> str:
    lines = [f"You are taking over this conversation from the agent {source!r}."]
    if request.reason:
        lines.append(f"Reason: {request.reason}")
    if request.summary and request.mode != "router":
        lines.append(f"Pending problem: {request.summary}")
    lines.append("Continue from here; do not start over or ask again for what is already known.")
    return "\n".join(lines)


@dataclass(frozen=True)
class AgentInfo:
    """What a registry lists about an agent: metadata only, never the agent's internals."""

    id: str
    name: str
    description: str
    tools: list[str]
    handoffs: list[str]


class AgentRegistry:
    """Agents by id; ids are unique."""

    def __init__(self, agents: Iterable[Agent] = ()) -> None:
        self._agents: dict[str, Agent] = {}
        for agent in agents:
            self.register(agent)

    def register(self, agent: Agent, id: str | None = None) -> Agent:
        key = id or agent.name
        if key in self._agents:
            raise UsageError(f"agent id {key!r} is already registered; ids must be unique")
        self._agents[key] = agent
        return agent

    def get(self, id: str) -> Agent:
        try:
            return self._agents[id]
        except KeyError:
            raise UsageError(f"no agent {id!r} in the registry (known: {self.ids})") from None

    def __contains__(self, id: object) -> bool:
        return id in self._agents

    @property
    def ids(self) -> list[str]:
        return list(self._agents)

    def list(self) -> list[AgentInfo]:
        return [
            AgentInfo(
                id=key,
                name=agent.name,
                description=agent.description,
                tools=[t.name for t in agent.registry],
                handoffs=[t.name for t in agent.handoffs],
            )
            for key, agent in self._agents.items()
        ]


def dispatch_tool(router_name: str, routes: AgentRegistry) -> Tool:
    """The router's one tool: pick an agent by id and pass it a self-contained query."""
    ids = tuple(routes.ids)
    if not ids:
        raise UsageError(f"router {router_name!r} needs at least one agent")

    def dispatch_to_agent(ctx: RunContext, agent_id: str, refined_query: str) -> str:
        ctx.set("last_agent", agent_id)
        return f"Dispatched to {agent_id}."

    # The signature is generic; the schema narrows agent_id to the registered ids.
    # Sets a context variable and returns: no thread, no watchdog.
    made = Tool(
        dispatch_to_agent,
        name=DISPATCH_TOOL,
        effect=Effect.READ_ONLY,
        blocking=False,
        timeout_s=None,
    )
    model = create_model(
        "DispatchToAgentArguments",
        __config__=ConfigDict(extra="forbid"),
        agent_id=(Literal[ids], Field(description="Which agent handles the request.")),  # type: ignore[valid-type]
        refined_query=(
            str,
            Field(description="The request rewritten to stand alone, with what is known."),
        ),
    )
    made.args_model = model
    made.parameters = strip_titles(model.model_json_schema())
    made.description = "Send the request to the agent best able to handle it:\n" + "\n".join(
        f"- {info.id}: {info.description or info.name}" for info in routes.list()
    )
    made.routes = routes  # type: ignore[attr-defined]
    return made


def sticky_agent(
    router_name: str, routes: AgentRegistry, text: str, variables: dict[str, Any], max_words: int
) -> Agent | None:
    """The agent a short follow-up stays with: the one the router dispatched to last."""
    last = variables.get(f"{router_name}.last_agent")
    if last is None or last not in routes or len(text.split()) > max_words:
        return None
    return routes.get(last)


ROUTER_INSTRUCTIONS = (
    "You route each request to the agent best able to handle it. Call dispatch_to_agent with "
    "that agent's id and the request rewritten to stand on its own. Do not answer yourself."
)


@dataclass
class Router(Agent):
    """An agent whose one job is to dispatch to registered agents (seed 004's orchestrator).

    A follow-up of at most `followup_max_words` words goes straight to the agent that handled
    the previous turn, without a model call, when the conversation's context says who that was.
    """

    instructions: str = ROUTER_INSTRUCTIONS
    agents: Sequence[Agent] | AgentRegistry = ()
    followup_max_words: int = 6

    def __post_init__(self) -> None:
        self.routes = (
            self.agents if isinstance(self.agents, AgentRegistry) else AgentRegistry(self.agents)
        )
        self.tools = [*self.tools, dispatch_tool(self.name, self.routes)]
        super().__post_init__()

    def sticky_target(self, text: str, variables: dict[str, Any]) -> Agent | None:
        return sticky_agent(self.name, self.routes, text, variables, self.followup_max_words)
