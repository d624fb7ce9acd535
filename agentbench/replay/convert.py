"""Converters between stored traces and cassettes.

A stored run (with the runs it handed off to) becomes a cassette: its rebuilt requests and
recorded responses as interactions, its input, context, tool results and trajectory as
metadata — so a production trace can be replayed against changed code, or promoted to a
golden case. A run imported from a trace (`traces import-otel`) says what its spans recorded
of each request, and its cassette keeps that (`imported_trace`), so replay compares only what
the trace knew (`replay.drift.TraceSource`). The trajectory is rebuilt from the stored rows
as typed events, then reduced by the same `trajectory()` a live run uses, so both sides of a
comparison are made alike. A cassette goes the other way by feeding equivalent events to the
store's recorder.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from agentbench.replay.cassette import Cassette, Interaction
from agentbench.replay.drift import TraceSource
from agentbench.replay.session import tool_results
from agentbench.replay.stored_events import events_of, loads
from agentbench.replay.trajectory import Step, canonical, trajectory
from agentbench.runtime.events import (
    ErrorInfo,
    ModelRequest,
    ModelResponse,
    RunFinished,
    RunStarted,
    StopReason,
    ToolFinished,
)
from agentbench.runtime.models import ChatResponse, Usage
from agentbench.runtime.tools import ResultKind, ToolResult
from agentbench.trace.errors import RunNotFoundError
from agentbench.trace.schema import RunTrace
from agentbench.trace.storage import queries
from agentbench.trace.store import TraceStore

__all__ = ["cassette_from_store", "conversation", "events_of", "store_cassette"]


def conversation(store: TraceStore, run_id: str) -> list[RunTrace]:
    """The run and every run it led to (handoffs, chains), in the order they started."""
    return conversations(store, [run_id])[run_id]


def conversations(
    store: TraceStore, run_ids: Iterable[str], *, missing_ok: bool = False
) -> dict[str, list[RunTrace]]:
    """`conversation` of each run, read over one connection (opening the store is what costs:
    a comparison reads the runs of every changed case); `missing_ok` leaves out runs the
    store does not have instead of raising."""
    found: dict[str, list[RunTrace]] = {}
    with store.reading() as conn:
        wanted = {}
        for run_id in run_ids:
            try:
                wanted[run_id] = queries.resolve_run_id(conn, run_id, store.path)
            except RunNotFoundError:
                if not missing_ok:
                    raise
        loaded = queries.load_trees(conn, sorted(set(wanted.values())))
    for run_id, full in wanted.items():
        traces = [loaded[full]]
        index = 0
        while index < len(traces):
            children = sorted(traces[index].children, key=lambda r: r.started_at)
            traces.extend(loaded[c.run_id] for c in children if c.run_id in loaded)
            index += 1
        found[run_id] = sorted(traces, key=lambda t: t.run.started_at)
    return found


def stored_trajectories(
    store: TraceStore, run_ids: Iterable[str], *, missing_ok: bool = False
) -> dict[str, list[Step]]:
    """`stored_trajectory` of each run, read over one connection."""
    return {
        run_id: trajectory([e for t in traces for e in events_of(t)])
        for run_id, traces in conversations(store, run_ids, missing_ok=missing_ok).items()
    }


def stored_trajectory(store: TraceStore, run_id: str) -> list[Step]:
    return trajectory([e for t in conversation(store, run_id) for e in events_of(t)])


def cassette_from_store(store: TraceStore, run_id: str, *, agent: str | None = None) -> Cassette:
    """A cassette that replays a stored run (and the runs it handed off to). `agent` is the
    name the agent that will replay it goes by, when it is not the run's: a run imported from
    a trace bears the service's name, and a step's agent is part of what is compared."""
    traces = conversation(store, run_id)
    root, last = traces[0].run, traces[-1].run
    interactions: list[Interaction] = []
    events: list[Any] = []
    for trace in traces:
        requests = store.requests(trace.run.run_id)
        calls = sorted(trace.llm_calls, key=lambda c: c.seq)
        for call in calls:
            if call.seq not in requests:
                continue
            if call.response is None:
                failed = _failed_call(trace, call, requests[call.seq], last=call is calls[-1])
                if failed is not None:
                    interactions.append(failed)
                continue
            response = ChatResponse.model_validate(loads(call.response))
            interactions.append(Interaction.of(requests[call.seq], response))
        events.extend(events_of(trace))
    cassette = Cassette(interactions)
    cassette.update_info(
        agent=None,
        source_run=root.run_id,
        recorded_at=root.started_at.isoformat(timespec="seconds"),
        input=loads(root.input),
        context=loads(root.context) or {},
        runs=[
            {
                "run_id": t.run.run_id,
                "agent": t.run.agent,
                "parent_run_id": t.run.parent_run_id,
                "stop_reason": t.run.stop_reason,
            }
            for t in traces
        ],
        stop_reason=last.stop_reason,
        output=canonical(loads(last.output)),
        trajectory=[s.as_dict() for s in trajectory(events)],
        tool_results=tool_results(events),
    )
    source = trace_source(traces)
    if source is not None:
        cassette.update_info(**{TraceSource.INFO_KEY: source.as_info()})
    if agent is not None and agent != root.agent:
        _rename_agent(cassette.info, root.agent, agent)
    return cassette


def _rename_agent(info: dict[str, Any], old: str, new: str) -> None:
    """The recorded session's agent `old` called `new` wherever a comparison sees its name."""
    for run in info["runs"]:
        if run["agent"] == old:
            run["agent"] = new
    for step in info["trajectory"]:
        if step["agent"] == old:
            step["agent"] = new
            step["signature"][1] = new
        if step["kind"] == "handoff" and step["detail"].get("to") == old:
            step["detail"]["to"] = new


def trace_source(traces: list[RunTrace]) -> TraceSource | None:
    """What the imported traces a conversation's runs came from recorded of the requests;
    None when none was imported. Runs from different traces are compared on the fields all
    of them recorded."""
    origins = [o for t in traces if isinstance(o := loads(t.run.origin), dict)]
    if not origins:
        return None
    instrumentations = dict.fromkeys(str(o.get("instrumentation") or "?") for o in origins)
    partial = [
        frozenset(map(str, o["recorded_fields"]))
        for o in origins
        if isinstance(o.get("recorded_fields"), list)
    ]
    fields = frozenset.intersection(*partial) if partial else None
    return TraceSource(", ".join(instrumentations), fields)


def _failed_call(
    trace: RunTrace, call: Any, request: dict[str, Any], *, last: bool
) -> Interaction | None:
    """The model call a stored run ended on, when it ended in that call's error: replayed, it
    fails again the same way (a call without a response that is not the one is left out)."""
    run = trace.run
    error = loads(run.error) if run.stop_reason == StopReason.ERROR.value else None
    if not last or not isinstance(error, dict):
        return None
    return Interaction.stored_failure(
        request, str(error.get("type")), str(error.get("message")), call.attempts or 1
    )


def store_cassette(cassette: Cassette, store: TraceStore, *, agent: str | None = None) -> str:
    """Record a cassette's session in the store as one run; returns the new run id."""
    info = cassette.info
    name = agent or next((r["agent"] for r in info.get("runs", ())), None) or "cassette"
    run_id = f"run_{abs(hash((str(cassette.path), datetime.now(UTC).isoformat()))):x}"
    hook = store.run_hook()
    seq = 0

    def emit(cls: type, **fields: Any) -> None:
        nonlocal seq
        hook(cls(run_id=run_id, seq=seq, agent=name, **fields))
        seq += 1

    emit(
        RunStarted,
        input=info.get("input") or "",
        model=_model(cassette),
        context=info.get("context") or {},
    )
    usage = Usage()
    results = list(info.get("tool_results", ()))
    failed: ErrorInfo | None = None
    for step, interaction in enumerate(cassette.interactions, start=1):
        emit(ModelRequest, step=step, request=interaction.request)
        if interaction.failure is not None:  # the session ended in this call's error
            error = interaction.error()
            failed = ErrorInfo(type=type(error).__name__, message=str(error), step=step)
            break
        response = interaction.response()
        usage = usage + response.usage
        emit(ModelResponse, step=step, response=response)
        for call in response.tool_calls:
            recorded = results.pop(0) if results and results[0]["tool"] == call.name else None
            if recorded is None:
                continue
            result = recorded["result"]
            emit(
                ToolFinished,
                step=step,
                call_id=call.id,
                tool=call.name,
                arguments=recorded["arguments"] if isinstance(recorded["arguments"], dict) else {},
                result=ToolResult(
                    kind=ResultKind(result["kind"]),
                    data=result.get("data"),
                    error=result.get("error"),
                ),
                effect="unknown",
            )
    emit(
        RunFinished,
        stop_reason=StopReason.ERROR
        if failed is not None
        else StopReason(info.get("stop_reason") or "completed"),
        output=None if failed is not None else info.get("output"),
        error=failed,
        usage=usage,
        iterations=len(cassette.interactions),
    )
    store.flush()
    return run_id


def _model(cassette: Cassette) -> str:
    if cassette.interactions:
        return str(cassette.interactions[0].request.get("model", "unknown"))
    return "unknown"
