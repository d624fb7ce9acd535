"""A run's trajectory: its events reduced to the steps that say what the agent did.

Two trajectories are compared step by step, so each step has a *signature* (what makes two
steps "the same step": kind, agent, tool name, context key…) and a *detail* (what may change:
arguments, results, values, stop reason, output). Timestamps, ids, latencies and token counts
are left out: they differ between runs without the behaviour differing. Trajectories are plain
data, so they can be stored in a cassette's metadata or rebuilt from a trace store.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson
from pydantic import BaseModel


@dataclass(frozen=True)
class Step:
    # model_call | tool_call | tool_rejected | context | memory | handoff | guard | run_end;
    # a context step whose op is "start" is the context its run was handed
    kind: str
    agent: str
    step: int  # the model-call iteration of its run this step belongs to
    signature: tuple[Any, ...]
    detail: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "agent": self.agent,
            "step": self.step,
            "signature": list(self.signature),
            "detail": self.detail,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Step:
        return cls(
            data["kind"], data["agent"], data["step"], tuple(data["signature"]), data["detail"]
        )

    def label(self) -> str:
        """A short human name: `tool lookup_order`, `handoff`, `context session:x.y`."""
        if self.kind in ("tool_call", "tool_rejected"):
            return f"{self.kind.replace('_', ' ')} {self.signature[2]}"
        if self.kind == "context" and self.signature[4] == "start":
            return f"context {self.signature[2]} at run start"
        if self.kind == "context":
            return f"context {self.signature[2]}:{self.signature[3]} ({self.signature[4]})"
        if self.kind == "memory":
            return f"memory {self.signature[2]}"
        if self.kind == "guard":
            return f"guard {self.signature[2]} ({self.signature[3]})"
        return self.kind.replace("_", " ")


def canonical(value: Any) -> Any:
    """JSON-safe, key-sorted data; JSON text is parsed so formatting never counts."""
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in ("{", "["):
            try:
                return canonical(orjson.loads(stripped))
            except orjson.JSONDecodeError:
                return _python_literal(stripped, value)
        return value
    if isinstance(value, BaseModel):
        return canonical(value.model_dump(mode="json"))
    if isinstance(value, dict):
        return {str(k): canonical(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, list | tuple):
        return [canonical(v) for v in value]
    if value is None or isinstance(value, bool | int | float):
        return value
    return str(value)


# Python's repr of a dict or list, as some frameworks send a tool's result to the model (the
# OpenAI Agents SDK sends `str(result)`): read as data, so a change names its field. Bounded:
# `literal_eval` builds every value it reads.
_LITERAL_CHARS = 64 * 1024


def _python_literal(text: str, value: str) -> Any:
    """`text` read as a Python literal dict or list, canonical; else `value` as it is."""
    if len(text) > _LITERAL_CHARS:
        return value
    try:
        parsed = ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return value
    return canonical(parsed) if isinstance(parsed, dict | list) else value


def plain(value: Any) -> Any:
    """JSON-safe data in its original key order (what a tool returned, as the model saw it)."""

    def fallback(item: Any) -> Any:
        return item.model_dump(mode="json") if isinstance(item, BaseModel) else str(item)

    return orjson.loads(orjson.dumps(value, default=fallback, option=orjson.OPT_NON_STR_KEYS))


def _start_steps(event: Any) -> list[Step]:
    """The context a run starts with, one step per scope that holds anything.

    What a run is handed (by the caller, the previous turn, or a handoff) is behaviour too:
    a request-scope variable that crosses a handoff shows as an extra step of the receiving
    run, a session variable that no longer does as a missing one. A run handed nothing has no
    such step, so runs without context keep the trajectory they always had.
    """
    scopes = event.context or {}
    return [
        Step(
            "context",
            event.agent,
            0,
            ("context", event.agent, scope, "", "start"),
            {"new": canonical(scopes[scope])},
        )
        for scope in ("global", "session", "request")
        if scopes.get(scope)
    ]


def _model_path(record: dict[str, Any]) -> dict[str, Any]:
    """A FallbackModel's record without its messages, which name endpoints (a port changes
    from run to run): the model that answered, and each that failed, with error and status."""
    failed = [
        {k: f.get(k) for k in ("model", "error", "status_code", "attempts") if k in f}
        for f in record.get("failed") or ()
        if isinstance(f, dict)
    ]
    return {"answered_by": record.get("answered_by"), "failed": failed}


def _step(event: Any) -> Step | None:
    kind, agent = event.kind, event.agent
    number = getattr(event, "step", 0)
    if kind == "model_response":
        response = event.response
        calls = [[c.name, canonical(c.arguments)] for c in response.tool_calls]
        detail = {"text": response.text, "tool_calls": calls}
        detail["finish_reason"] = response.finish_reason
        path = event.fallback
        if path is not None:  # which model answered, after which failed and how
            detail["fallback"] = _model_path(path)
        return Step("model_call", agent, number, ("model_call", agent, event.purpose), detail)
    if kind == "tool_finished":
        result = event.result
        value = result.data if result.kind == "ok" else result.error
        detail = {
            "arguments": canonical(event.arguments),
            "result_kind": str(result.kind),
            "result": canonical(value),
        }
        if result.kind != "ok" and result.data is not None:
            # A failure can carry data the model is shown too (a program's output before its
            # exception): a change there is a changed result, not only a drifted request.
            detail["data"] = canonical(result.data)
        elif result.kind == "ok" and result.error:
            # A `fallback(...)` tool's path: which backend answered, after which failed and why.
            detail["fallback"] = result.error
        return Step("tool_call", agent, number, ("tool_call", agent, event.tool), detail)
    if kind == "tool_call_rejected":
        return Step(
            "tool_rejected",
            agent,
            number,
            ("tool_rejected", agent, event.tool),
            {"reason": event.reason, "arguments": event.raw_arguments},
        )
    if kind == "context_changed":
        return Step(
            "context",
            agent,
            number,
            ("context", agent, event.scope, event.key, event.op),
            {"new": canonical(event.new)},
        )
    if kind == "memory_decision":
        return Step(
            "memory",
            agent,
            number,
            ("memory", agent, event.action),
            {
                "reason": event.reason,
                "messages": event.messages,
                "summary": event.summary,
                # which messages: dropping the newest instead of the oldest is a change too
                **({"detail": canonical(event.detail)} if event.detail else {}),
            },
        )
    if kind == "handoff":
        return Step(
            "handoff", agent, number, ("handoff", agent), {"to": event.to_agent, "mode": event.mode}
        )
    if kind == "guard_triggered":
        return Step("guard", agent, number, ("guard", agent, event.guard, event.action), {})
    if kind == "run_finished":
        return Step(
            "run_end",
            agent,
            event.iterations,
            ("run_end", agent),
            {"stop_reason": str(event.stop_reason), "output": canonical(event.output)},
        )
    return None


def trajectory(events: Iterable[Any]) -> list[Step]:
    """The steps of a run (or of a whole conversation's runs), in order."""
    steps: list[Step] = []
    for event in events:
        if event.kind == "run_started":
            steps.extend(_start_steps(event))
        elif (step := _step(event)) is not None:
            steps.append(step)
    return steps


def model_call_position(steps: list[Step], call: int) -> int:
    """Where the `call`-th model call of a session (1-based, every run and turn counted in
    order, as drift is numbered) is in its trajectory; the end if it has fewer."""
    seen = 0
    for index, step in enumerate(steps):
        if step.kind == "model_call":
            seen += 1
            if seen == call:
                return index
    return len(steps)
