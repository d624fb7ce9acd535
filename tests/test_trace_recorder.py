"""Events become rows: every table, every way of attaching a store, labels and code version."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import orjson
import pytest

from agentbench import (
    Agent,
    FunctionModel,
    ModelSettings,
    RunContext,
    Runner,
    ScriptedModel,
    ToolCall,
    tool,
)
from agentbench.runtime.events import (
    Handoff,
    MemoryDecision,
    ModelRequest,
    RunFinished,
    RunStarted,
    _EventBase,
)
from agentbench.trace import TraceRecorder, TraceStore
from agentbench.trace.code_version import code_version
from agentbench.trace.store import store_from_env

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop


@tool(effect="read_only")
def echo(text: str) -> str:
    """Say it back."""
    return text


@tool(effect="write")
def remember(ctx: RunContext, note: str) -> str:
    """Keep a note in the session."""
    ctx.set("note", note)
    return "noted"


@pytest.fixture(params=[False, True], ids=["here", "recording_process"])
def store(tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    """Every test here records in this process, and again in the store's recording process
    (what `agentbench run` does): rows must come out the same."""
    made = TraceStore(tmp_path / "traces.duckdb", recording_process=request.param)
    yield made
    made.close()


def payload(event: Any) -> dict[str, Any]:
    return orjson.loads(event.payload)


async def test_a_run_fills_every_table(store: TraceStore) -> None:
    model = ScriptedModel(
        [
            ToolCall("remember", {"note": "tea"}),
            ToolCall("nope", {}),
            [ToolCall("echo", {"text": "a"}), ToolCall("echo", {"text": "b"})],
            "done",
        ]
    )
    agent = Agent(name="helper", tools=[echo, remember])
    result = await Runner.run(agent, "go", model=model, store=store, context={"user": "Ada"})
    trace = store.run(result.run_id)

    run = trace.run
    assert (run.agent, run.status, run.stop_reason) == ("helper", "completed", "completed")
    assert (run.llm_calls, run.tool_calls, run.iterations) == (4, 4, 4)
    assert (run.input_tokens, run.output_tokens) == (
        result.usage.input_tokens,
        result.usage.output_tokens,
    )
    assert orjson.loads(run.input) == "go" and orjson.loads(run.output) == "done"
    assert orjson.loads(run.context)["session"] == {"user": "Ada"}
    assert run.started_at <= run.finished_at

    assert [c.step for c in trace.llm_calls] == [1, 2, 3, 4]
    assert [c.finish_reason for c in trace.llm_calls] == ["tool_calls"] * 3 + ["stop"]
    assert all(c.latency_ms is not None and c.request_hash for c in trace.llm_calls)

    tools = [(t.tool, t.result_kind) for t in trace.tool_calls]
    assert tools == [
        ("remember", "ok"),
        ("nope", "rejected"),
        ("echo", "ok"),
        ("echo", "ok"),
    ]
    assert orjson.loads(trace.tool_calls[0].arguments) == {"note": "tea"}
    assert trace.tool_calls[0].effect == "write"
    assert "unknown_tool" in trace.tool_calls[1].result
    assert [orjson.loads(t.result) for t in trace.tool_calls[2:]] == ["a", "b"]

    [diff] = trace.context_diffs
    assert (diff.scope, diff.key, diff.op, diff.old, orjson.loads(diff.new)) == (
        "session",
        "helper.note",
        "add",
        None,
        "tea",
    )
    seqs = [item.seq for item in trace.timeline()]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


async def test_guards_text_deltas_and_unknown_kinds_go_to_events(store: TraceStore) -> None:
    agent = Agent(name="streamer", model_settings=ModelSettings(stream=True))
    result = await Runner.run(agent, "go", model=ScriptedModel(["one two three"]), store=store)
    [text] = store.run(result.run_id).events
    assert (text.kind, payload(text)) == ("text_delta", {"text": "one two three", "deltas": 3})

    looping = Agent(name="looper", tools=[echo], limits={"max_iterations": 1})
    result = await Runner.run(
        looping, "go", model=ScriptedModel([ToolCall("echo", {"text": "x"})]), store=store
    )
    [guard] = store.run(result.run_id).events
    assert guard.kind == "guard_triggered"
    assert payload(guard)["guard"] == "max_iterations"
    assert store.run(result.run_id).run.status == "stopped"

    class PlanUpdated(_EventBase):  # a kind the recorder has never heard of
        kind: Literal["plan_updated"] = "plan_updated"
        step: int
        plan: list[str]

    recorder = store.run_hook()
    recorder(RunStarted(run_id="run_x", seq=0, agent="planner", input="hi", model="m"))
    recorder(PlanUpdated(run_id="run_x", seq=1, agent="planner", step=1, plan=["a", "b"]))
    recorder(
        MemoryDecision(
            run_id="run_x",
            seq=2,
            agent="planner",
            step=1,
            action="summarized",
            reason="over 8 messages",
            messages=6,
            tokens_before=900,
            tokens_after=200,
            summary="the plan so far",
        )
    )
    recorder(RunFinished(run_id="run_x", seq=3, agent="planner", stop_reason="completed"))
    kinds = [(e.kind, e.step) for e in store.run("run_x").events]
    assert kinds == [("plan_updated", 1), ("memory_decision", 1)]
    assert payload(store.run("run_x").events[0]) == {"plan": ["a", "b"]}


async def test_handoff_records_parent_and_child_runs(store: TraceStore) -> None:
    refunds = Agent(name="refunds", description="Handles refunds.", tools=[echo])
    triage = Agent(name="triage", handoffs=[refunds])
    model = ScriptedModel(
        [
            ToolCall("transfer_to_refunds", {"reason": "refund", "summary": "wants a refund"}),
            "refund issued",
        ]
    )
    result = await Runner.run(triage, "refund please", model=model, store=store)
    first, second = result.runs
    parent = store.run(first.run_id)
    assert parent.run.stop_reason == "handoff" and parent.run.status == "completed"
    assert [c.run_id for c in parent.children] == [second.run_id]
    [handoff] = [e for e in parent.events if e.kind == "handoff"]
    assert payload(handoff)["child_run_id"] == second.run_id
    assert store.run(second.run_id).run.parent_run_id == first.run_id


def test_interleaved_runs_through_one_recorder_stay_apart(store: TraceStore) -> None:
    recorder = store.run_hook()
    for run_id in ("run_a", "run_b"):
        recorder(RunStarted(run_id=run_id, seq=0, agent=run_id, input="x", model="m"))
    recorder(ModelRequest(run_id="run_a", seq=1, agent="run_a", step=1, request={"messages": []}))
    recorder(
        Handoff(
            run_id="run_b",
            seq=1,
            agent="run_b",
            step=1,
            mode="tool",
            from_agent="run_b",
            to_agent="x",
        )
    )
    for run_id in ("run_b", "run_a"):
        recorder(RunFinished(run_id=run_id, seq=2, agent=run_id, stop_reason="completed"))
    assert len(store.run("run_a").llm_calls) == 1 and not store.run("run_a").events
    assert len(store.run("run_b").events) == 1 and not store.run("run_b").llm_calls


async def test_every_runner_entry_point_accepts_a_store(store: TraceStore) -> None:
    agent = Agent(name="echoer")
    ran = await Runner.run(agent, "a", model=ScriptedModel(["1"]), store=store)
    streamed = [e async for e in Runner.stream(agent, "b", model=ScriptedModel(["2"]), store=store)]
    many = await Runner.run_many(
        agent, ["c", "d"], model_factory=lambda: ScriptedModel(["3"]), store=store
    )
    chained = await Runner.run_chain(
        [agent, agent], "e", model=ScriptedModel(["4", "5"]), store=store
    )
    ids = {ran.run_id, streamed[-1].run_id, *(r.run_id for r in many)}
    ids |= {r.run_id for r in chained.runs}
    assert {r.run_id for r in store.runs()} == ids


def test_run_sync_and_the_environment_variable(tmp_path: Path, monkeypatch: Any) -> None:
    path = tmp_path / "env.duckdb"
    monkeypatch.setenv("AGENTBENCH_DB", str(path))
    result = Runner.run_sync(Agent(name="a"), "hi", model=ScriptedModel(["ok"]))
    env_store = store_from_env()
    assert env_store is not None and env_store.path == path
    env_store.flush()
    assert [r.run_id for r in TraceStore(path).runs()] == [result.run_id]
    env_store.close()


async def test_labels_and_code_version_are_stamped(store: TraceStore, monkeypatch: Any) -> None:
    monkeypatch.setenv("AGENTBENCH_CODE_VERSION", "abc123+dirty")
    code_version.cache_clear()
    try:
        labelled = store.with_labels(eval_id="ev1", case_id="case-7", trial=2)
        result = await Runner.run(
            Agent(name="a"), "hi", model=ScriptedModel(["ok"]), store=labelled
        )
    finally:
        code_version.cache_clear()
    run = store.run(result.run_id).run
    assert (run.eval_id, run.case_id, run.trial, run.code_version) == (
        "ev1",
        "case-7",
        2,
        "abc123+dirty",
    )


async def test_a_failing_store_never_breaks_the_run(tmp_path: Path) -> None:
    class Broken:
        def run_started(self, row: dict[str, Any]) -> None:
            raise OSError("disk full")

        def run_finished(self, rows: Any) -> None:
            raise OSError("disk full")

    class BrokenStore:
        def run_hook(self) -> TraceRecorder:
            return TraceRecorder(Broken())

    result = await Runner.run(
        Agent(name="a"), "hi", model=ScriptedModel(["ok"]), store=BrokenStore()
    )
    assert result.completed and result.output == "ok"
    assert any("disk full" in error for error in result.hook_errors)


async def test_long_run_with_the_runtime_memory_policy_rebuilds_exactly(store: TraceStore) -> None:
    from agentbench.runtime.memory import MemoryPolicy

    def answer(request: dict[str, Any], info: Any) -> Any:
        return ToolCall("echo", {"text": f"fact {info.index} " * 10}) if info.index < 14 else "ok"

    model = FunctionModel(answer)
    agent = Agent(
        name="a",
        tools=[echo],
        memory=MemoryPolicy(max_messages=8, keep_recent=2),
        limits={"max_iterations": 20},
    )
    result = await Runner.run(agent, "collect facts", model=model, store=store)
    assert result.completed
    trace = store.run(result.run_id)
    assert list(store.requests(result.run_id).values()) == model.requests
    assert any(e.kind == "memory_decision" for e in trace.events)
    assert any(call.messages_dropped for call in trace.llm_calls)
