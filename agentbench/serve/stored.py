"""Runs this server no longer holds in memory, answered from its store."""

from __future__ import annotations

from typing import Any

import orjson

from agentbench.replay.stored_events import events_of
from agentbench.trace.errors import RunNotFoundError
from agentbench.trace.store import TraceStore


def _trace(store: TraceStore, run_id: str) -> Any:
    if not run_id.startswith("run_") and len(run_id) < 8:
        return None  # a short prefix would match by accident; ids here are whole
    try:
        return store.run(run_id)
    except RunNotFoundError:
        return None


def _conversation(store: TraceStore, trace: Any) -> list[Any]:
    """The run and every run it led to (handoffs, their handoffs), in the order they started."""
    traces = [trace]
    for child in trace.children:
        traces.extend(_conversation(store, store.run(child.run_id)))
    return sorted(traces, key=lambda t: t.run.started_at)


def stored_run(store: TraceStore, run_id: str) -> dict[str, Any] | None:
    """`GET /v1/runs/{id}`'s body for a stored run (None: not stored)."""
    trace = _trace(store, run_id)
    if trace is None:
        return None
    runs = _conversation(store, trace)
    run = trace.run.decoded()
    last = runs[-1].run.decoded()
    error = last.get("error")
    return {
        "id": run["run_id"],
        "object": "agent.run",
        "agent": run["agent"],
        "status": "finished" if run["status"] != "incomplete" else "incomplete",
        "stop_reason": last.get("stop_reason"),
        "output": last.get("output"),
        "error": {"type": error.get("type"), "message": error.get("message")} if error else None,
        "usage": {
            "input_tokens": sum((t.run.input_tokens or 0) for t in runs),
            "output_tokens": sum((t.run.output_tokens or 0) for t in runs),
        },
        "request_id": run.get("request_id"),
        "conversation_id": run.get("conversation_id"),
        "created_at": run["started_at"],
        "started_at": run["started_at"],
        "finished_at": last.get("finished_at"),
        "events": f"/v1/runs/{run['run_id']}/events",
    }


def stored_events(store: TraceStore, run_id: str) -> list[tuple[str, bytes]] | None:
    """The stored run's events (and its children's, in order) as (kind, JSON) pairs."""
    trace = _trace(store, run_id)
    if trace is None:
        return None
    events = [event for run in _conversation(store, trace) for event in events_of(run)]
    return [(event.kind, orjson.dumps(event.model_dump(mode="json"))) for event in events]
