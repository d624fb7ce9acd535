"""Typed events: every fact of a run, as one pydantic discriminated union.

The runner yields these and nothing else; the trace recorder, console output and user hooks
are all subscribers. Each event carries the run id, a per-run sequence number and a UTC
timestamp. `RunFinished` is always the last event of a run, also when the run fails.
"""

from __future__ import annotations

import enum
import functools
import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, Field, TypeAdapter

from agentbench.errors import RecordingError
from agentbench.runtime.models import ChatResponse, Usage
from agentbench.runtime.records import SharesFieldNames
from agentbench.runtime.tools import ToolResult

log = logging.getLogger("agentbench.events")


class StopReason(enum.StrEnum):
    """Why a run ended: a closed set, the same in every run, stored trace and report.

    `completed`: the model gave its final answer. `max_iterations`, `timeout`, `loop_detected`
    and `token_budget`: a brake of the agent's `Limits` stopped it. `handoff`: it handed the
    conversation to another agent, whose run continues it. `business_stop`: a tool raised
    `BusinessFailure` with `stop=True`. `error`: the model or the runtime failed. `cancelled`:
    the caller cancelled it (or stopped reading its events).
    """

    COMPLETED = "completed"
    MAX_ITERATIONS = "max_iterations"
    TIMEOUT = "timeout"
    LOOP_DETECTED = "loop_detected"
    TOKEN_BUDGET = "token_budget"
    HANDOFF = "handoff"
    BUSINESS_STOP = "business_stop"
    ERROR = "error"
    CANCELLED = "cancelled"


class ErrorInfo(BaseModel):
    """An error that ended a run, in a form that can be stored and shown."""

    type: str
    message: str
    step: int | None = None


# The time an event is made at: a partial, not a lambda, so making one runs no Python code
# (four events a step). The loop's own events get it from `packed.event_maker` instead.
utc_now = functools.partial(datetime.now, UTC)


class _EventBase(SharesFieldNames):  # the runtime builds its events (`records.built`)
    run_id: str
    seq: int
    ts: datetime = Field(default_factory=utc_now)
    agent: str


class RunStarted(_EventBase):
    kind: Literal["run_started"] = "run_started"
    input: str | list[dict[str, Any]]
    model: str
    parent_run_id: str | None = None
    context: dict[str, Any] = Field(default_factory=dict)


# "agent": the agent's own turn; "memory": a summarizer call made by the memory policy.
Purpose: TypeAlias = Literal["agent", "memory"]


class ModelRequest(_EventBase):
    kind: Literal["model_request"] = "model_request"
    step: int
    request: dict[str, Any]
    purpose: Purpose = "agent"


class ModelResponse(_EventBase):
    kind: Literal["model_response"] = "model_response"
    step: int
    response: ChatResponse
    purpose: Purpose = "agent"

    @property
    def usage(self) -> Usage:
        return self.response.usage

    @property
    def latency_ms(self) -> float:
        return self.response.latency_ms

    @property
    def fallback(self) -> dict[str, Any] | None:
        """Which model of a `FallbackModel` answered and why those before it did not
        (`answered_by`, `chain`, `failed`); None when the first model answered. Read from the
        response body, where the trace store and cassettes keep it (runtime/fallback.py)."""
        from agentbench.runtime.fallback import fallback_of

        return fallback_of(self.response)


class TextDelta(_EventBase):
    kind: Literal["text_delta"] = "text_delta"
    step: int
    text: str


class ToolStarted(_EventBase):
    kind: Literal["tool_started"] = "tool_started"
    step: int
    call_id: str
    tool: str
    arguments: dict[str, Any]


class ToolFinished(_EventBase):
    kind: Literal["tool_finished"] = "tool_finished"
    step: int
    call_id: str
    tool: str
    arguments: dict[str, Any]
    result: ToolResult
    effect: str


class ToolCallRejected(_EventBase):
    """The model's tool call could not run: unknown tool, unparseable or invalid arguments.

    It goes back to the model as an observation (self-correction); the run continues.
    """

    kind: Literal["tool_call_rejected"] = "tool_call_rejected"
    step: int
    call_id: str
    tool: str
    raw_arguments: str
    reason: Literal["unknown_tool", "invalid_json", "invalid_arguments"]
    message: str


class ContextChanged(_EventBase):
    """A context variable was added, changed or removed."""

    kind: Literal["context_changed"] = "context_changed"
    step: int
    scope: Literal["request", "session", "global"]
    key: str
    op: Literal["add", "change", "remove"]
    old: Any = None
    new: Any = None


class MemoryDecision(_EventBase):
    """The memory policy changed what the model will see: so a trace shows what it did not."""

    kind: Literal["memory_decision"] = "memory_decision"
    step: int
    action: Literal["dropped", "summarized", "truncated"]
    reason: str
    messages: int  # how many messages the action touched
    tokens_before: int
    tokens_after: int
    summary: str | None = None
    detail: dict[str, Any] = Field(default_factory=dict)


class Handoff(_EventBase):
    """Control passed from this agent to another; the target runs as a child run."""

    kind: Literal["handoff"] = "handoff"
    step: int
    mode: Literal["tool", "structured", "router", "chain"]
    from_agent: str
    to_agent: str
    reason: str = ""
    child_run_id: str | None = None


GuardName: TypeAlias = Literal[
    "max_iterations",
    "timeout",
    "repeated_call",
    "loop_detected",
    "token_budget",
    "output_validation",
    "ping_pong",
    "max_handoffs",
]


class GuardTriggered(_EventBase):
    kind: Literal["guard_triggered"] = "guard_triggered"
    step: int
    guard: GuardName
    action: Literal["warn", "retry", "stop"]
    message: str


class RunFinished(_EventBase):
    kind: Literal["run_finished"] = "run_finished"
    stop_reason: StopReason
    output: Any = None
    error: ErrorInfo | None = None
    usage: Usage = Field(default_factory=Usage)
    iterations: int = 0
    duration_ms: float = 0.0


Event = Annotated[
    RunStarted
    | ModelRequest
    | ModelResponse
    | TextDelta
    | ToolStarted
    | ToolFinished
    | ToolCallRejected
    | ContextChanged
    | MemoryDecision
    | Handoff
    | GuardTriggered
    | RunFinished,
    Field(discriminator="kind"),
]
"""One event of a run, told apart by its `kind`: what `Runner.stream` yields and a run records."""

EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)

Hook: TypeAlias = Callable[[Any], "Awaitable[None] | None"]


async def notify(
    hooks: Sequence[Hook],
    event: Any,
    failures: list[str],
    unkept: list[RecordingError] | None = None,
) -> None:
    """Deliver `event` to every hook; a hook that raises is logged and recorded, never fatal.

    A `RecordingError` (the run's store could not keep it) goes to `unkept` instead, for the
    runner to raise once the run has ended: the run must not be handed back as finished."""
    if not hooks:
        return
    for hook in hooks:
        try:
            outcome = hook(event)
            if inspect.isawaitable(outcome):
                await outcome
        except RecordingError as exc:
            if unkept is None:
                raise
            unkept.append(exc)
        except Exception as exc:
            name = getattr(hook, "__qualname__", repr(hook))
            failures.append(f"hook {name} failed on {event.kind} #{event.seq}: {exc!r}")
            log.warning("hook %s raised on %s; the run continues", name, event.kind, exc_info=True)
