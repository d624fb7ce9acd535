"""Runs this server no longer holds in memory, answered from its store.

Only served runs are answered — runs stamped with the caller that started them — and only to
that caller (or an admin key): whatever else the store holds (evaluations, replays, runs
another program recorded) is not this server's to show. Ids match exactly, never by prefix,
so no id can be guessed a piece at a time. What is shown is redacted again with the server's
rules (the store redacted it when it was written, perhaps under other rules).
"""

from __future__ import annotations

from typing import Any

import orjson

from agentbench.replay.stored_events import events_of
from agentbench.serve.callers import Caller
from agentbench.serve.redaction import dumps, well_formed
from agentbench.trace.redaction.redactor import Redactor
from agentbench.trace.schema import RunTrace
from agentbench.trace.storage import queries
from agentbench.trace.store import TraceStore


def _conversation(store: TraceStore, run_id: str, caller: Caller) -> list[RunTrace] | None:
    """The run and every run it led to (handoffs, their handoffs) in the order they started;
    None when there is no such run that `caller` may see."""
    with store.reading() as conn:
        row = conn.execute("SELECT caller FROM runs WHERE run_id = ?", [run_id]).fetchone()
        if row is None or not caller.may_see(row[0]):
            return None
        traces: list[RunTrace] = []
        waiting = [run_id]
        while waiting:
            trace = queries.load_run(conn, waiting.pop(), store.path)
            traces.append(trace)
            waiting.extend(child.run_id for child in trace.children)
    return sorted(traces, key=lambda t: t.run.started_at)


def stored_run(
    store: TraceStore, run_id: str, caller: Caller, redactor: Redactor
) -> dict[str, Any] | None:
    """`GET /v1/runs/{id}`'s body for a stored run (None: not one `caller` may see)."""
    runs = _conversation(store, run_id, caller)
    if runs is None:
        return None
    root = next(t for t in runs if t.run.run_id == run_id)
    run = root.run.decoded()
    last = runs[-1].run.decoded()
    error = last.get("error")
    body = {
        "id": run["run_id"],
        "object": "agent.run",
        "agent": run["agent"],
        "status": "finished" if run["status"] != "incomplete" else "incomplete",
        "stop_reason": last.get("stop_reason"),
        "stop_detail": _brake_message(runs[-1]),
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
    return well_formed(redactor.value(body))  # type: ignore[no-any-return]


def stored_own_run(store: TraceStore, run_id: str, caller: Caller) -> dict[str, Any] | None:
    """Status and stop reason of a stored run `caller` itself started — what `DELETE` may
    speak of (an admin key reads others' runs, but cancels only its own); None otherwise."""
    runs = _conversation(store, run_id, Caller(caller.name))
    if runs is None:
        return None
    root = next(t for t in runs if t.run.run_id == run_id)
    return {"status": root.run.status, "stop_reason": runs[-1].run.stop_reason}


def stored_events(
    store: TraceStore, run_id: str, caller: Caller, redactor: Redactor
) -> list[tuple[str, bytes]] | None:
    """The stored run's events (and its children's, in order) as (kind, redacted JSON)."""
    runs = _conversation(store, run_id, caller)
    if runs is None:
        return None
    events = [event for run in runs for event in events_of(run)]
    return [(event.kind, dumps(redactor.value(event.model_dump(mode="json")))) for event in events]


def _brake_message(trace: RunTrace) -> str | None:
    """What the guard that stopped the run said, if one did (as `ServedRun.stop_detail`)."""
    for record in reversed(trace.events):
        if record.kind == "guard_triggered":
            payload = orjson.loads(record.payload)
            if payload.get("action") == "stop":
                return str(payload.get("message"))
    return None
