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
from agentbench.runtime.instructions import InstructionsTemplate
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
    state_summary: bool = True
    description: str = ""

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
        self.template = InstructionsTemplate(self.name, self.instructions)

    def tool_schemas(self) -> list[dict[str, Any]]:
        return self.registry.openai_schemas()

    def output_schema(self) -> dict[str, Any] | None:
        return None if self.output_type is None else self.output_type.model_json_schema()
