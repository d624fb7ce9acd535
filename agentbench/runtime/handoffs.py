"""How an agent offers its handoffs to the model: a `transfer_to_<agent>` tool per target
(`handoff_style="tool"`), or a structured final answer that names one (`"structured"`).

`Agent` builds these from its `handoffs`; `orchestration` carries a handoff out once the model
asks for one. Only a target's name and description are read here, so this module needs
nothing of `Agent` itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, create_model

from agentbench.runtime.tools import Effect, Tool

HANDOFF_PREFIX = "transfer_to_"


class HandoffTarget(Protocol):
    """An agent as a handoff names it (an `Agent`)."""

    name: str
    description: str


def handoff_tool(target: HandoffTarget) -> Tool:
    """The `transfer_to_<target>` tool an agent with `handoffs=[target]` offers the model."""

    def transfer(reason: str, summary: str, context_updates: dict[str, Any] | None = None) -> str:
        return f"Transferring the conversation to {target.name}."

    what = f": {target.description}" if target.description else ""
    made = Tool(
        transfer,
        name=f"{HANDOFF_PREFIX}{target.name}",
        description=(
            f"Hand the conversation over to the {target.name} agent{what}. It continues from "
            "here with your summary; you stop."
        ),
        effect=Effect.READ_ONLY,
        idempotent=True,
        blocking=False,  # returns a constant: no thread needed
        timeout_s=None,  # nor a watchdog
    )
    made.parameters["properties"]["reason"]["description"] = "Why this agent should take over."
    made.parameters["properties"]["summary"]["description"] = (
        "The pending problem and what is already known, for the next agent."
    )
    made.parameters["properties"]["context_updates"]["description"] = (
        "Variables to save for the next agent (e.g. an order id)."
    )
    made.handoff_target = target  # type: ignore[attr-defined]
    return made


def decision_type_for(agent: str, targets: Sequence[HandoffTarget]) -> type[BaseModel]:
    """The structured final answer of an agent with handoff_style='structured'."""
    names = tuple(t.name for t in targets)
    return create_model(
        f"{agent.title().replace('_', '').replace('-', '')}Decision",
        __config__=ConfigDict(extra="forbid"),
        __doc__=(
            "Either answer the user (`answer`) or hand over (`handoff_to` one of "
            f"{', '.join(names)}, with `reason`, `summary` and any `context_updates`)."
        ),
        answer=(str | None, Field(None, description="The final answer, when you answer yourself.")),
        handoff_to=(Literal[names] | None, Field(None, description="The agent to hand over to.")),  # type: ignore[valid-type]
        reason=(str, Field("", description="Why you hand over.")),
        summary=(str, Field("", description="The pending problem, for the next agent.")),
        context_updates=(
            dict[str, Any],
            Field(default_factory=dict, description="Variables to save for the next agent."),
        ),
    )
