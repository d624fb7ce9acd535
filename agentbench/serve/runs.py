"""Served runs: each request's agent conversation as a task the HTTP side can wait on,
stream, cancel or look up later.

A `ServedRun` keeps the events its conversation emitted so any number of subscribers — the
chat stream of the request that started it, `GET /v1/runs/{id}/events` arriving late — see
every event from the first, then the new ones as they happen, each redacted once (see
`redaction`). The store records the same events through its own hook, so what a client saw
is what `agentbench traces show` shows. A run belongs to the caller that started it (by its
key's name), which alone may see or cancel it, an admin key aside. Finished runs are kept
for a bounded number of lookups; after that `GET /v1/runs/{id}` answers from the store.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from agentbench.evals.scorers.text import output_text
from agentbench.runtime.agent import Agent
from agentbench.runtime.models import ChatModel, Usage
from agentbench.runtime.run_state import Deadline
from agentbench.runtime.runner import Runner
from agentbench.serve.admission import Ticket
from agentbench.serve.callers import Caller
from agentbench.serve.redaction import RunRedaction
from agentbench.serve.store_health import told_to_clients
from agentbench.trace.errors import StorageFaultError
from agentbench.trace.redaction.redactor import Redactor
from agentbench.trace.redaction.rules import RedactionRules

log = logging.getLogger("agentbench")


@dataclass
class ServedRun:
    """One served conversation: its root run id, its progress, then its outcome."""

    id: str
    agent: str
    request_id: str
    conversation_id: str | None
    caller: str  # the name of the key that started it
    redaction: RunRedaction = field(repr=False)
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    status: str = "queued"  # queued → running → finished
    stop_reason: str | None = None
    output: Any = None
    error: dict[str, Any] | None = None
    usage: Usage = field(default_factory=Usage)
    started_at: datetime | None = None
    finished_at: datetime | None = None
    run_seconds: float | None = None
    # Why a brake stopped the run (its guard's message), for a client that got no answer.
    stop_detail: str | None = None
    # The store refused the run's record (full, read-only): it ran, but it is not kept.
    unkept: StorageFaultError | None = field(default=None, repr=False)
    # The conversation's events as emitted; redacted as JSON once each, when a subscriber
    # asks or when the run finishes (its answer is shown only after all of them).
    events: list[Any] = field(default_factory=list, repr=False)
    task: asyncio.Task[None] | None = field(default=None, repr=False)
    _changed: asyncio.Event = field(default_factory=asyncio.Event, repr=False)

    @property
    def done(self) -> bool:
        return self.status == "finished"

    @property
    def model_failed(self) -> bool:
        """Whether the run ended inside a model call: after a request the model never
        answered (or in the middle of its streamed text). Then the model or its provider
        failed — a 502 — rather than the agent's own code."""
        for event in reversed(self.events):
            if event.kind != "run_finished":
                return event.kind in ("model_request", "text_delta")
        return False

    @property
    def text(self) -> str:
        """The answer's text, redacted (the run must be finished)."""
        return output_text(self.output)

    def add(self, event: Any) -> None:
        self.events.append(event)
        self._wake()

    def frame(self, index: int) -> bytes:
        """Event `index` as redacted JSON (what `GET /v1/runs/{id}/events` sends)."""
        return self.redaction.frame(self.events, index)

    def streamed_text(self, index: int) -> str:
        """What the text delta at `index` releases of the answer, redacted."""
        return self.redaction.text(self.events, index)

    def finish(self) -> None:
        """Finished: output, error and why it stopped are replaced by what clients see."""
        try:
            self.redaction.settle(self.events)
            self.output = self.redaction.shown(self.output)
            self.error = self.redaction.shown(self.error)
            self.stop_detail = self.redaction.shown(self.stop_detail)
        except Exception as exc:  # a bug in redaction: withhold the answer, never hang
            log.exception("run %s: its answer could not be redacted", self.id)
            self.output = self.stop_detail = None
            self.error = {
                "type": type(exc).__name__,
                "message": "the run's answer could not be redacted, so it is withheld",
            }
        self.status = "finished"
        self.finished_at = datetime.now(UTC)
        self._wake()

    def _wake(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def events_from(self, index: int = 0) -> Any:
        """(index, event) for every event from `index` on, waiting for new ones until the
        run is finished."""
        while True:
            changed = self._changed
            while index < self.redaction.ready(self.events, self.done):
                yield index, self.events[index]
                index += 1
            if self.done:
                return
            await changed.wait()

    async def wait(self) -> None:
        """Until the run is finished (without cancelling it if the waiter is cancelled)."""
        while not self.done:
            await self._changed.wait()

    def cancel(self) -> bool:
        """Cancel the run if it has not finished; its store still records it, `cancelled`."""
        if self.done or self.task is None:
            return False
        return self.task.cancel()

    def as_json(self) -> dict[str, Any]:
        """`GET /v1/runs/{id}`'s body (output and error redacted once finished)."""
        return {
            "id": self.id,
            "object": "agent.run",
            "agent": self.agent,
            "status": self.status,
            "stop_reason": self.stop_reason,
            "stop_detail": self.stop_detail,
            "output": self.output if self.done else None,
            "error": self.error,
            "usage": {
                "input_tokens": self.usage.input_tokens,
                "output_tokens": self.usage.output_tokens,
            },
            "request_id": self.request_id,
            "conversation_id": self.conversation_id,
            "created_at": self.created_at.isoformat(),
            "started_at": self.started_at.isoformat() if self.started_at else None,
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
            "events": f"/v1/runs/{self.id}/events",
        }


@dataclass
class Launch:
    """What a run needs besides its agent: the model to use, where to store it, the rules
    that redact what its caller is shown."""

    model: ChatModel | None
    store: Any  # a RunStore (a labelled TraceStore), or None
    deadline: Deadline | None  # from the request's arrival: the wait for a slot counts
    redaction: RedactionRules = field(default_factory=RedactionRules)


class RunRegistry:
    """The served runs of this process: running ones always, the last `keep` finished ones."""

    def __init__(self, keep: int = 1000) -> None:
        self.keep = keep
        self._runs: dict[str, ServedRun] = {}
        self._done: deque[str] = deque()  # finished run ids, oldest first
        self.finished_callbacks: list[Any] = []

    def get(self, run_id: str, caller: Caller) -> ServedRun | None:
        """The run with exactly this id, if `caller` may see it."""
        run = self._runs.get(run_id)
        return run if run is not None and caller.may_see(run.caller) else None

    def own(self, run_id: str, caller: Caller) -> ServedRun | None:
        """The run with exactly this id, if `caller` started it (what it may cancel)."""
        run = self._runs.get(run_id)
        return run if run is not None and run.caller == caller.name else None

    @property
    def active(self) -> list[ServedRun]:
        return [run for run in self._runs.values() if not run.done]

    def start(
        self,
        agent: Agent,
        conversation: str | list[dict[str, Any]],
        *,
        ticket: Ticket,
        launch: Launch,
        caller: Caller,
        context: dict[str, Any] | None = None,
        request_id: str | None = None,
        conversation_id: str | None = None,
    ) -> ServedRun:
        run = ServedRun(
            id=f"run_{uuid.uuid4().hex}",
            agent=agent.name,
            request_id=request_id or f"req_{uuid.uuid4().hex[:16]}",
            conversation_id=conversation_id,
            caller=caller.name,
            redaction=RunRedaction(Redactor(launch.redaction)),
        )
        self._runs[run.id] = run
        run.task = asyncio.create_task(
            self._drive(run, agent, conversation, context or {}, ticket, launch),
            name=f"agentbench-serve-{run.id}",
        )
        return run

    async def _drive(
        self,
        run: ServedRun,
        agent: Agent,
        conversation: str | list[dict[str, Any]],
        context: dict[str, Any],
        ticket: Ticket,
        launch: Launch,
    ) -> None:
        started = 0.0
        try:
            async with ticket:
                run.status = "running"
                run.started_at = datetime.now(UTC)
                started = time.perf_counter()
                result = await Runner.run(
                    agent,
                    conversation,
                    model=launch.model,
                    context=context,
                    hooks=[lambda event: self._observe(run, event)],
                    store=launch.store,
                    run_id=run.id,
                    timeout_s=launch.deadline,
                )
            run.stop_reason = result.stop_reason.value
            run.stop_detail = _brake_message(run.events)
            run.output = result.output
            run.usage = sum((r.usage for r in result.runs or [result]), Usage())
            if result.error is not None:
                run.error = {"type": result.error.type, "message": result.error.message}
        except asyncio.CancelledError:
            ticket.abandon()
            run.stop_reason = "cancelled"
            run.error = {"type": "cancelled", "message": "the run was cancelled"}
        except StorageFaultError as fault:  # it ran, but its record could not be kept
            log.error("run %s is not kept: %s", run.id, fault)
            run.unkept = fault
            run.stop_reason = "error"
            run.error = {
                "type": type(fault).__name__,
                "message": f"{told_to_clients(fault)}: the run was not kept",
            }
        except Exception as exc:  # a bug in the agent's code or ours: reported, never lost
            run.stop_reason = "error"
            run.error = {"type": type(exc).__name__, "message": str(exc)}
        finally:
            ticket.abandon()
            if started:
                run.run_seconds = time.perf_counter() - started
            run.finish()
            self._finished(run)
            for callback in self.finished_callbacks:
                callback(run)

    def _observe(self, run: ServedRun, event: Any) -> None:
        run.add(event)

    def _finished(self, run: ServedRun) -> None:
        """Keep the last `keep` finished runs; older ones are answered from the store."""
        self._done.append(run.id)
        while len(self._done) > self.keep:
            self._runs.pop(self._done.popleft(), None)

    async def settled(self) -> None:
        """Until every active run has finished (and been recorded)."""
        tasks = [run.task for run in self.active if run.task is not None]
        if tasks:
            await asyncio.wait(tasks)


def _brake_message(events: list[Any]) -> str | None:
    """What the guard that stopped the run said, if one did."""
    for event in reversed(events):
        if event.kind == "guard_triggered" and event.action == "stop":
            return str(event.message)
    return None
