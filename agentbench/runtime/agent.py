"""The `Agent` spec: what an agent is, separate from how it runs.

An agent is data: a name, an instructions template, tools, model settings, limits and an
optional structured output type. It holds no conversation state, so one `Agent` can serve any
number of concurrent runs. Problems a definition can have (a duplicate tool, a template that
does not parse, a bad limit) are raised when the agent is built, not in the middle of a run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentbench.errors import UsageError
from agentbench.runtime.handoffs import decision_type_for, handoff_tool
from agentbench.runtime.instructions import InstructionsTemplate
from agentbench.runtime.memory import MemoryPolicy
from agentbench.runtime.models import ChatModel
from agentbench.runtime.tools import Tool, ToolRegistry


class ModelSettings(BaseModel):
    """Request parameters sent with every model call of an agent."""

    model_config = ConfigDict(extra="forbid")

    model: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    stop: list[str] | None = None
    tool_choice: Literal["auto", "required", "none"] | None = None
    parallel_tool_calls: bool | None = None
    stream: bool = False
    # "prompt" describes output_type in the instructions (works everywhere); "json_schema"
    # also sends response_format, for servers that support constrained decoding.
    output_mode: Literal["prompt", "json_schema"] = "prompt"
    extra_body: dict[str, Any] = Field(default_factory=dict)

    def request_params(self) -> dict[str, Any]:
        """Parameters for the request body; unset ones are left out, not sent as null."""
        params = self.model_dump(
            exclude_none=True, exclude={"model", "stream", "output_mode", "extra_body"}
        )
        if self.stream:
            params["stream"] = True
        params.update(self.extra_body)
        return params


class Limits(BaseModel):
    """The brakes of the loop."""

    model_config = ConfigDict(extra="forbid")

    max_iterations: int = Field(8, ge=1)
    timeout_s: float | None = Field(300.0, gt=0)
    repeat_warn_at: int = Field(2, ge=2)
    repeat_stop_at: int = Field(3, ge=2)
    token_budget: int | None = Field(None, ge=1)
    max_handoffs: int = Field(8, ge=0)
    # How often a conversation may bounce back to the agent that just handed it over
    # (A→B→A is one bounce); one more is a ping-pong and stops the run.
    max_bounces: int = Field(1, ge=0)

    @model_validator(mode="after")
    def _ordered(self) -> Limits:
        if self.repeat_stop_at < self.repeat_warn_at:
            raise ValueError("repeat_stop_at must be >= repeat_warn_at")
        return self


@dataclass
class Agent:
    """An agent definition. Build once, run many times."""

    name: str
    instructions: str = "You are a helpful assistant."
    tools: Sequence[Tool | Callable[..., Any]] = ()
    model: ChatModel | None = None
    model_settings: ModelSettings = field(default_factory=ModelSettings)
    limits: Limits = field(default_factory=Limits)
    output_type: type[BaseModel] | None = None
    # True appends a "## State so far" section (a line per tool result) to the instructions.
    # Off by default: without memory it repeats what the tool messages already say, and it
    # changes the system message every step (prompt caches miss; a changed tool result drifts
    # twice in replay). For agents whose memory compacts away results the model still needs.
    state_summary: bool = False
    description: str = ""
    memory: MemoryPolicy | None = None
    # Session-variable namespaces this agent may read besides its own ("billing", ...).
    reads: Sequence[str] = ()
    handoffs: Sequence[Agent] = ()
    # "tool": a transfer_to_<agent> tool per target; "structured": the final answer is a
    # decision object with `handoff_to` and `context_updates` (seed 001).
    handoff_style: Literal["tool", "structured"] = "tool"

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("_", "").replace("-", "").isalnum():
            raise UsageError(
                f"agent name {self.name!r} must be non-empty letters, digits, '_' or '-'"
            )
        if isinstance(self.model_settings, dict):
            self.model_settings = ModelSettings(**self.model_settings)
        if isinstance(self.limits, dict):
            self.limits = Limits(**self.limits)
        if self.output_type is not None and not (
            isinstance(self.output_type, type) and issubclass(self.output_type, BaseModel)
        ):
            raise UsageError(f"agent {self.name!r}: output_type must be a pydantic model class")
        self.registry = ToolRegistry(self.tools)
        self.decision_type: type[BaseModel] | None = None
        if self.handoffs:
            self._add_handoffs()
        self.template = InstructionsTemplate(self.name, self.instructions)

    def _add_handoffs(self) -> None:
        names = [target.name for target in self.handoffs]
        if len(set(names)) != len(names):
            raise UsageError(f"agent {self.name!r}: handoffs name the same agent twice: {names}")
        if self.handoff_style == "tool":
            for target in self.handoffs:
                self.registry.add(handoff_tool(target))
        elif self.output_type is not None:
            raise UsageError(
                f"agent {self.name!r}: handoff_style='structured' makes the final answer a "
                "handoff decision, so it cannot also have an output_type"
            )
        else:
            self.decision_type = decision_type_for(self.name, self.handoffs)

    def add_handoff(self, target: Agent) -> None:
        """Allow a handoff to `target` after construction (for agents that name each other)."""
        self.handoffs = [*self.handoffs, target]
        self.registry = ToolRegistry(self.tools)
        self._add_handoffs()

    def handoff_target(self, name: str) -> Agent | None:
        return next((t for t in self.handoffs if t.name == name), None)

    def sticky_target(self, text: str, variables: dict[str, Any]) -> Agent | None:
        """An agent to continue with, without asking the model (routers override this)."""
        return None

    def tool_schemas(self) -> list[dict[str, Any]]:
        return self.registry.openai_schemas()

    @property
    def final_type(self) -> type[BaseModel] | None:
        """What the final answer is validated against: output_type or the handoff decision."""
        return self.output_type or self.decision_type

    def output_schema(self) -> dict[str, Any] | None:
        final = self.final_type
        return None if final is None else final.model_json_schema()
