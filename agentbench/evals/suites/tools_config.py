"""What tools do when a suite or a case replays (`tools:`): a default policy and per-tool rules.

Checked where it is written: a rule `ToolPolicies.parse` would refuse is a validation error
naming the suite or case file and the line.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from agentbench.errors import UsageError
from agentbench.replay.tool_policy import ToolPolicies, ToolPolicy, fault_problem


def _tool_rule(rule: str) -> str:
    """A per-tool policy as ToolPolicies.parse reads it, checked where it is written."""
    kind, _, argument = rule.partition(":")
    try:
        policy = ToolPolicy.parse(kind)
    except UsageError as exc:
        raise ValueError(str(exc)) from None
    if policy is ToolPolicy.FAULT and (problem := fault_problem(argument)) is not None:
        raise ValueError(problem)
    if policy in (ToolPolicy.LIVE, ToolPolicy.RECORDED) and argument:
        raise ValueError(f"{policy.value} takes no value; got {rule!r}")
    return rule


class ToolsConfig(BaseModel):
    """What tools do when the suite replays: a default policy and per-tool overrides."""

    model_config = ConfigDict(extra="forbid")

    default: ToolPolicy = Field(
        ToolPolicy.LIVE, description="live | recorded | stub | fault, for every tool."
    )
    overrides: dict[str, Annotated[str, AfterValidator(_tool_rule)]] = Field(
        default_factory=dict,
        description='Per tool: "live", "recorded", "stub:VALUE" (JSON or text), "fault", '
        '"fault:timeout"; an MCP tool served by mcp-proxy also "fault:jsonrpc", "fault:crash", '
        '"fault:slow:SECONDS".',
    )

    def over(self, base: ToolPolicies) -> ToolPolicies:
        """These policies over `base` (a case's over its suite's): the default only when
        written here, and each override on top of `base`'s."""
        mine = self.policies()
        default = mine.default if "default" in self.model_fields_set else base.default
        merged = base.overridden(mine)
        merged.default = default
        return merged

    def policies(self) -> ToolPolicies:
        """The policies the replay tool interceptor applies."""
        return ToolPolicies.parse(
            self.default.value, [f"{name}={rule}" for name, rule in self.overrides.items()]
        )
