"""Every event the runner emits survives the store: recorded, read back, compared, replayed.

A property test over the event union (new kinds are generated automatically; one that cannot
round-trip fails here): a generated run goes through the recorder the runner uses into a real
DuckDB file, and `events_of` must rebuild exactly the events that went in — the one documented
normalisation being that a model call's text deltas are coalesced into one. The same stored
run must give the same trajectory, align with the original without a difference, convert to a
cassette, and show every row in the report's timeline. A second test does the same with real
runs of the runner that, together, emit every kind of the union.
"""

from __future__ import annotations

import uuid
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest
from event_strategies import EVENT_KINDS, runs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentbench import (
    Agent,
    BusinessFailure,
    Limits,
    MemoryPolicy,
    ModelSettings,
    RunContext,
    Runner,
    ScriptedModel,
    ToolCall,
    tool,
)
from agentbench.evals.comparing.stats import TrialOutcome
from agentbench.replay.convert import cassette_from_store, events_of, stored_trajectory
from agentbench.replay.diff import align
from agentbench.replay.trajectory import trajectory
from agentbench.report.timeline import trial_detail
from agentbench.trace.redaction.rules import RedactionRules
from agentbench.trace.storage import queries
from agentbench.trace.store import TraceStore

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

# Redaction has its own tests; here any generated text must come back as it went in.
NO_REDACTION = RedactionRules(keys=(), patterns=(), mask_environment=False)
ROUND_TRIP = settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> TraceStore:
    path = tmp_path_factory.mktemp("roundtrip") / "traces.duckdb"
    return TraceStore(path, redaction=NO_REDACTION)


def coalesced(events: list[Any]) -> list[Any]:
    """What the store keeps: consecutive text deltas of one step joined into the first."""
    kept: list[Any] = []
    for event in events:
        last = kept[-1] if kept else None
        if (
            event.kind == "text_delta"
            and last is not None
            and last.kind == "text_delta"
            and last.step == event.step
        ):
            kept[-1] = last.model_copy(update={"text": last.text + event.text})
        else:
            kept.append(event)
    return kept


def comparable(event: Any) -> dict[str, Any]:
    """An event as plain data; times in UTC (DuckDB hands them back in the local zone)."""
    data = event.model_dump()
    data["ts"] = event.ts.astimezone(UTC)
    return data


def report_rows(events: list[Any]) -> list[tuple[str, int]]:
    """The (kind, seq) of each timeline item the report must show for these events."""
    rows = []
    paired = {"model_response": "purpose", "tool_finished": "call_id"}
    open_calls: dict[str, set[Any]] = {"model_response": set(), "tool_finished": set()}
    for event in coalesced(events):
        kind = event.kind
        if kind == "model_request":
            open_calls["model_response"].add(event.purpose)
            rows.append(("llm", event.seq))
        elif kind == "tool_started":
            open_calls["tool_finished"].add(event.call_id)
            rows.append(("tool", event.seq))
        elif kind in paired:
            key = getattr(event, paired[kind])
            if key in open_calls[kind]:
                open_calls[kind].discard(key)  # folded into its request's (start's) row
            else:
                rows.append(("tool" if kind == "tool_finished" else kind, event.seq))
        elif kind == "tool_call_rejected":
            rows.append(("tool", event.seq))
        elif kind == "context_changed":
            rows.append(("context", event.seq))
        elif kind not in ("run_started", "run_finished"):
            rows.append((kind, event.seq))
    return sorted(rows, key=lambda row: row[1])


def record(store: TraceStore, events: list[Any]) -> None:
    hook = store.run_hook()  # the recorder `Runner.run(store=...)` attaches
    for event in events:
        hook(event)


def check_round_trip(store: TraceStore, batch: list[list[Any]]) -> None:
    """Record a batch of runs, then read each back through every reader."""
    for events in batch:
        record(store, events)
    store.flush()  # one store write per batch: opening DuckDB is the slow part
    with store.reading() as conn:
        traces = [queries.load_run(conn, events[0].run_id, store.path) for events in batch]
    for events, trace in zip(batch, traces, strict=True):
        rebuilt = events_of(trace)
        assert [comparable(e) for e in rebuilt] == [comparable(e) for e in coalesced(events)]
        # Every reader of the stored run sees the run that happened.
        assert trajectory(rebuilt) == trajectory(events)
        assert align(trajectory(events), trajectory(rebuilt)) == []
        detail = trial_detail(
            TrialOutcome(suite="s", case_id="c", trial=1, status="passed", score=1.0), [trace]
        )
        shown = [(item["kind"], item["seq"]) for item in detail["runs"][0]["items"]]
        assert shown == report_rows(events)
    events = batch[0]
    steps = stored_trajectory(store, events[0].run_id)
    assert steps == trajectory(events)
    cassette = cassette_from_store(store, events[0].run_id)
    assert [s["kind"] for s in cassette.info["trajectory"]] == [s.kind for s in steps]
    answered = [e for e in events if e.kind == "model_request"]
    assert all(i.request in [r.request for r in answered] for i in cassette.interactions)


@ROUND_TRIP
@given(data=st.data())
def test_any_run_of_any_events_round_trips(store: TraceStore, data: st.DataObject) -> None:
    batch = [data.draw(runs(f"run_{uuid.uuid4().hex}")) for _ in range(8)]
    check_round_trip(store, batch)


@pytest.mark.parametrize("optional", ["all", "none"])
@pytest.mark.parametrize("kind", EVENT_KINDS, ids=lambda k: k.model_fields["kind"].default)
@settings(ROUND_TRIP, max_examples=2)
@given(data=st.data())
def test_every_kind_round_trips_with_its_optional_fields_set_and_unset(
    store: TraceStore, kind: Any, optional: Any, data: st.DataObject
) -> None:
    batch = [
        data.draw(runs(f"run_{uuid.uuid4().hex}", include=kind, optional=optional, max_events=3))
        for _ in range(4)
    ]
    check_round_trip(store, batch)


# -- real runs ---------------------------------------------------------------------------


@tool(effect="write")
def remember(ctx: RunContext, order_id: str) -> dict:
    """Keep the order id in the session.

    Args:
        order_id: The order.
    """
    ctx.set("order_id", order_id)
    ctx.set("seen", True, scope="request")
    return {"kept": order_id, "notes": "x" * 300}


@tool(effect="read_only")
def lookup(order_id: str) -> dict:
    """Look an order up.

    Args:
        order_id: The order.
    """
    if order_id == "none":
        raise BusinessFailure("no such order")
    return {"order_id": order_id, "status": "delivered", "history": ["placed"] * 40}


def conversation_runs(tmp_path: Path) -> tuple[TraceStore, list[Any]]:
    """Real runs that together emit every event kind of the union."""
    store = TraceStore(tmp_path / "traces.duckdb")
    refunds = Agent(
        name="refunds",
        instructions="Refund the order.",
        tools=[lookup],
        model_settings=ModelSettings(stream=True),  # text deltas
    )
    triage = Agent(
        name="triage",
        instructions="Triage.",
        tools=[remember, lookup],
        handoffs=[refunds],
        model_settings=ModelSettings(stream=True),  # text deltas
        memory=MemoryPolicy(max_messages=6, keep_recent=1, tool_result_chars=200),
        limits=Limits(repeat_warn_at=2, repeat_stop_at=3),
    )
    model = ScriptedModel(
        [
            [ToolCall("remember", {"order_id": "A1"}), ToolCall("nope", {})],
            ToolCall("lookup", '{"order_id": '),  # broken JSON: rejected, the run goes on
            ToolCall("lookup", {"order_id": "A1"}),
            ToolCall("lookup", {"order_id": "A1"}),  # a repeat: the guard warns
            ToolCall("lookup", {"order_id": "none"}),
            ToolCall("transfer_to_refunds", {"reason": "refund", "summary": "refund A1"}),
            ToolCall("lookup", {"order_id": "A1"}),
            "Refunded A1.",
        ]
    )
    result = Runner.run_sync(triage, "Refund order A1", model=model, store=store)
    model.assert_complete()
    return store, result.runs or [result]


def test_real_runs_emitting_every_kind_read_back_unchanged(tmp_path: Path) -> None:
    store, finished = conversation_runs(tmp_path)
    seen = {event.kind for run in finished for event in run.events}
    every_kind = {k.model_fields["kind"].default for k in EVENT_KINDS}
    assert seen == every_kind, f"extend the scenario to emit {sorted(every_kind - seen)}"
    for run in finished:
        rebuilt = events_of(store.run(run.run_id))
        assert [comparable(e) for e in rebuilt] == [comparable(e) for e in coalesced(run.events)]
    root = finished[0].run_id
    all_events = [e for run in finished for e in run.events]
    assert stored_trajectory(store, root) == trajectory(all_events)
    cassette = cassette_from_store(store, root)
    assert [r["agent"] for r in cassette.info["runs"]] == ["triage", "refunds"]
