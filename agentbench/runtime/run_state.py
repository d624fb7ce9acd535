"""The mutable state of one run, and the `RunResult` it becomes.

The runner's loop reads as a sequence of decisions; everything it remembers between them
(the conversation, usage, the deadline, repeat counts, the facts for "state so far", the stop
decision) lives here, so each run is isolated from every other by construction.
"""

from __future__ import annotations

import asyncio
import copy
import time
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import CoroutineType
from typing import Any, TypeVar

from agentbench.errors import RecordingError, RunTimeoutError
from agentbench.runtime.agent import Agent
from agentbench.runtime.context import Context, RunContext
from agentbench.runtime.deadlines import call_after_pending
from agentbench.runtime.eager import resume
from agentbench.runtime.event_log import EventLog
from agentbench.runtime.events import (
    ContextChanged,
    ErrorInfo,
    GuardTriggered,
    ModelRequest,
    ModelResponse,
    RunFinished,
    StopReason,
    TextDelta,
    ToolCallRejected,
    ToolFinished,
    ToolStarted,
)
from agentbench.runtime.memory import Memory
from agentbench.runtime.models import ChatModel, Usage
from agentbench.runtime.orchestration import HandoffRequest
from agentbench.runtime.tokens import estimate_tokens
from agentbench.runtime.tools import ToolInterceptor

_MAX_STATE_LINES = 20
_STATE_LINE_CHARS = 240
_STATE_TOKEN_BUDGET = 400
T = TypeVar("T")
# The events of every step, made from values the loop built itself: not validated (see
# `records.built`), and packed as they are made (`EventLog.make`). The rest (a run's input,
# context values, memory's decisions) are validated, then packed.
_BUILT_BY_THE_LOOP = frozenset(
    {
        ModelRequest,
        ModelResponse,
        TextDelta,
        ToolStarted,
        ToolFinished,
        ToolCallRejected,
        GuardTriggered,
    }
)


def new_run_id() -> str:
    return f"run_{uuid.uuid4().hex}"


@dataclass
class RunResult:
    """What a finished run produced. `events` holds every event, `RunFinished` last."""

    run_id: str
    agent: str
    output: Any
    stop_reason: StopReason
    messages: list[dict[str, Any]]
    usage: Usage
    # Left out of the repr: it is every event of the run, and Python 3.11's `asyncio.run`
    # builds the repr of what a run returns, which took seconds on a long run. A run's own
    # result holds its `EventLog` (packed; events made again when read).
    events: Sequence[Any] = field(repr=False)
    iterations: int
    duration_ms: float
    error: ErrorInfo | None = None
    parent_run_id: str | None = None
    hook_errors: list[str] = field(default_factory=list)
    context: Context = field(default_factory=Context)
    # Every run of the conversation, first to last (handoffs, chains); this one is the last.
    runs: list[RunResult] = field(default_factory=list, repr=False)

    @property
    def completed(self) -> bool:
        return self.stop_reason is StopReason.COMPLETED

    @property
    def all_events(self) -> list[Any]:
        """The events of every run of the conversation, in order."""
        return [event for run in self.runs or [self] for event in run.events]


@dataclass(frozen=True)
class Deadline:
    """A wall-clock budget for a whole conversation (every run it leads to), set by its caller
    — `agentbench serve`'s per-request timeout — on top of each agent's own `timeout_s`."""

    seconds: float
    set_by: str
    at: float  # time.monotonic() when it runs out

    @classmethod
    def after(cls, seconds: float, set_by: str) -> Deadline:
        return cls(seconds, set_by, time.monotonic() + seconds)


@dataclass(slots=True)
class _Guard:
    """One await under the run's deadline: its task, and that task's cancel count before."""

    task: asyncio.Task[Any]
    cancelling: int
    fired: bool = False


@dataclass
class Stop:
    reason: StopReason
    output: Any = None
    error: ErrorInfo | None = None


class RunState:
    """Everything one run remembers between the loop's decisions."""

    def __init__(
        self,
        agent: Agent,
        input: str | list[dict[str, Any]],
        model: ChatModel,
        *,
        context: Context | Mapping[str, Any] | None,
        run_id: str | None,
        parent_run_id: str | None,
        path: Sequence[str] = (),
        handoff_note: str | None = None,
        then: Sequence[Agent] = (),
        tool_interceptor: ToolInterceptor | None = None,
        deadline: Deadline | None = None,
    ) -> None:
        self.agent = agent
        self.model = model
        self.input = input
        self.run_id = run_id or new_run_id()
        self.parent_run_id = parent_run_id
        self.context = RunContext(self.run_id, agent.name, Context.of(context))
        self.memory = Memory(agent.memory) if agent.memory is not None else None
        self.messages = self._initial_messages(input)
        self.path = [*path, agent.name]  # agents of this conversation so far, this one last
        self.handoff_note = handoff_note
        self.handoff: HandoffRequest | None = None
        self.child_run_id: str | None = None
        self.then = list(then)  # the rest of a chain, run after this agent completes
        self.tool_interceptor = tool_interceptor
        self.system_message: dict[str, Any] | None = None
        self.system_key: tuple[Any, ...] | None = None  # what the system message was rendered from
        self.usage = Usage()
        self.iteration = 0
        self.call_counts: Counter[tuple[str, str]] = Counter()
        self.state_lines: list[str] = []
        self.state_version = 0  # bumped with every line remembered
        # Whether the instructions show the state lines: a summary, or a template reading them.
        self.shows_state = agent.state_summary or agent.template.mentions_state
        self._state_tokens: list[int] = []
        self.output_corrections = 0
        self.stop: Stop | None = None
        self.hook_errors: list[str] = []
        self.unkept: list[RecordingError] = []  # the store could not keep this run's record
        self.events = EventLog(self.run_id, agent.name)
        # The session variables this run removed, in the order of its ContextChanged events:
        # what the conversation merges back, without reading every event again.
        self.session_removals: list[str] = []
        self._seq = 0
        self.started = time.perf_counter()
        limit = agent.limits.timeout_s
        self.deadline = None if limit is None else time.monotonic() + limit
        # The caller's budget for the whole conversation, when it ends first.
        self.outer: Deadline | None = None
        if deadline is not None and (self.deadline is None or deadline.at < self.deadline):
            self.deadline, self.outer = deadline.at, deadline
        self._alarm: asyncio.TimerHandle | None = None  # fires once, at the deadline
        self._guards: list[_Guard] = []  # the awaits the deadline would interrupt now
        self.tool_schemas = agent.tool_schemas()
        # The model settings, their values and the request parameters last dumped from
        # them: the loop dumps again only when a setting changed (`loop._request_params`).
        self.request_params: tuple[Any, tuple[Any, ...], dict[str, Any]] | None = None

    def _initial_messages(self, input: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
        if isinstance(input, str):
            messages = [{"role": "user", "content": input}]
        else:
            messages = copy.deepcopy(list(input))
        pins = [m for m in messages if m.pop("pinned", False)]  # never sent to the API
        first_user = next((m for m in messages if m.get("role") == "user"), None)
        if self.memory is not None:
            for message in [*pins, *([first_user] if first_user else [])]:
                self.memory.pin(message)
        return messages

    def event(self, cls: type[T], **fields: Any) -> T:
        """Stamp and remember a new event of this run."""
        fields["run_id"], fields["seq"], fields["agent"] = self.run_id, self._seq, self.agent.name
        if cls in _BUILT_BY_THE_LOOP:
            made = self.events.make(cls, fields)
        else:
            made = cls(**fields)  # type: ignore[assignment]
            self.events.append(made)
        self._seq += 1
        return made

    def context_events(self) -> list[ContextChanged]:
        """ContextChanged events for every variable written since the last call."""
        if not self.context.changes:  # most steps write none: nothing to drain
            return []
        events = [
            self.event(
                ContextChanged,
                step=self.iteration,
                scope=change.scope.value,
                key=change.key,
                op=change.op,
                old=change.old,
                new=change.new,
            )
            for change in self.context.drain_changes()
        ]
        self.session_removals += [
            e.key for e in events if e.op == "remove" and e.scope == "session"
        ]
        return events

    def finish(
        self, reason: StopReason, output: Any = None, error: ErrorInfo | None = None
    ) -> None:
        if self.stop is None:
            self.stop = Stop(reason, output, error)

    @property
    def duration_ms(self) -> float:
        return (time.perf_counter() - self.started) * 1000

    def remaining_s(self) -> float | None:
        if self.deadline is None:
            return None
        return self.deadline - time.monotonic()

    async def within_deadline(self, awaitable: Any) -> Any:
        """Await under the run's wall-clock budget; raise RunTimeoutError when it runs out.

        One timer per run, not an `asyncio.timeout` per await: the timer cancels whatever the
        run is awaiting under the deadline when it fires, with asyncio.timeout's accounting
        (a cancellation from elsewhere stays a cancellation). A coroutine is first run up to
        its first suspension (`eager`): the timer can only interrupt a suspended await, and
        most of a replayed step's awaits never suspend, so they need no guard.
        """
        if self.deadline is None:
            return await awaitable
        if time.monotonic() >= self.deadline:
            if asyncio.iscoroutine(awaitable):
                awaitable.close()
            raise RunTimeoutError(self._timeout_message())
        if type(awaitable) is CoroutineType:
            try:  # `eager.first_step`, written out: twice a step
                yielded = awaitable.send(None)
            except StopIteration as finished:
                return finished.value
            except TimeoutError:
                raise RunTimeoutError(self._timeout_message()) from None
            awaitable = resume(awaitable, yielded)
        return await self._guarded(awaitable)

    async def _guarded(self, awaitable: Any) -> Any:
        """Await under the deadline's timer (set once, at the first await that needs it)."""
        task = asyncio.current_task()
        assert task is not None, "within_deadline awaits inside a task"
        assert self.deadline is not None
        if self._alarm is None:
            loop = asyncio.get_running_loop()
            # Behind whatever the loop already queued when it gets there: an await whose
            # answer arrived in time is woken before the deadline cancels it (`deadlines`).
            self._alarm = call_after_pending(
                loop, loop.time() + (self.deadline - time.monotonic()), self._on_deadline
            )
        guard = _Guard(task, task.cancelling())
        self._guards.append(guard)
        try:
            return await awaitable
        except asyncio.CancelledError:
            if guard.fired and task.uncancel() <= guard.cancelling:
                guard.fired = False
                raise RunTimeoutError(self._timeout_message()) from None
            guard.fired = False
            raise
        except TimeoutError:
            # As under asyncio.timeout: a TimeoutError out of a guarded await ends the run.
            raise RunTimeoutError(self._timeout_message()) from None
        finally:
            self._guards.remove(guard)
            if guard.fired:  # cancelled by the deadline, but the await ended some other way
                task.uncancel()

    def _on_deadline(self) -> None:
        for guard in self._guards:
            guard.fired = True
            guard.task.cancel()

    def release_deadline(self) -> None:
        """Drop the run's timer (the run is over); a later await raises if past the deadline."""
        if self._alarm is not None:
            self._alarm.cancel()
            self._alarm = None

    def _timeout_message(self) -> str:
        if self.outer is not None:
            return (
                f"the conversation ran out of its {self.outer.seconds:g} s budget "
                f"({self.outer.set_by}) in agent {self.agent.name!r} at step {self.iteration}"
            )
        return (
            f"agent {self.agent.name!r} ran out of its {self.agent.limits.timeout_s:g} s budget "
            f"at step {self.iteration}"
        )

    def remember(self, tool: str, arguments: str, kind: str, observation: str) -> None:
        """Add one line to the "state so far" the instructions show (if they show it: no
        line is kept, and no re-render caused, for instructions that never show one)."""
        if not self.shows_state:
            return
        summary = observation.replace("\n", " ")
        if len(summary) > _STATE_LINE_CHARS:
            summary = summary[: _STATE_LINE_CHARS - 1] + "…"
        line = f"{tool}({arguments}) → {kind}: {summary}"
        self.state_version += 1
        self.state_lines.append(line)
        self._state_tokens.append(estimate_tokens(line))
        # Bounded in tokens, not just lines: 20 lines of Chinese would cost thousands.
        while len(self.state_lines) > 1 and (
            len(self.state_lines) > _MAX_STATE_LINES
            or sum(self._state_tokens) > _STATE_TOKEN_BUDGET
        ):
            del self.state_lines[0]
            del self._state_tokens[0]

    def close_open_calls(self) -> None:
        """Answer every tool call left without a result, so the conversation stays valid.

        A run stopped mid-turn (loop detected, timeout, error) would otherwise leave an
        assistant `tool_calls` message whose calls have no tool messages, which the OpenAI API
        rejects if the conversation is ever continued.
        """
        answered = {m.get("tool_call_id") for m in self.messages if m.get("role") == "tool"}
        reason = self.stop.reason.value if self.stop else "stopped"
        for index in range(len(self.messages) - 1, -1, -1):
            message = self.messages[index]
            if message.get("role") == "assistant" and message.get("tool_calls"):
                missing = [c["id"] for c in message["tool_calls"] if c["id"] not in answered]
                self.messages.extend(
                    {
                        "role": "tool",
                        "tool_call_id": call_id,
                        "content": f"Not executed: the run stopped ({reason}).",
                    }
                    for call_id in missing
                )
                break

    def finished_event(self) -> RunFinished:
        stop = self.stop or Stop(StopReason.ERROR, error=ErrorInfo(type="Internal", message="?"))
        return self.event(
            RunFinished,
            stop_reason=stop.reason,
            output=stop.output,
            error=stop.error,
            usage=self.usage,
            iterations=self.iteration,
            duration_ms=self.duration_ms,
        )

    def result(self) -> RunResult:
        stop = self.stop or Stop(StopReason.ERROR)
        messages = ([self.system_message] if self.system_message else []) + self.messages
        return RunResult(
            run_id=self.run_id,
            agent=self.agent.name,
            output=stop.output,
            stop_reason=stop.reason,
            messages=messages,
            usage=self.usage,
            events=self.events,
            iterations=self.iteration,
            duration_ms=self.duration_ms,
            error=stop.error,
            parent_run_id=self.parent_run_id,
            hook_errors=self.hook_errors,
            context=self.context.snapshot(),
        )
