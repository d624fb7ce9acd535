"""The recording process: runs recorded there are stored exactly as they are recorded here, its
parent's environment secrets are masked there, and neither a recording process that dies nor
a parent that is killed loses a finished run."""

from __future__ import annotations

import contextlib
import enum
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from agentbench import (
    Agent,
    ModelSettings,
    RunContext,
    Runner,
    ScriptedModel,
    ToolCall,
    tool,
)
from agentbench.runtime.message_view import MessageView
from agentbench.trace import TraceStore
from agentbench.trace.errors import StoreNotFoundError
from agentbench.trace.recording.event_wire import WireReader, WireWriter
from agentbench.trace.schema import TABLES

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

SECRET = "sk-shop-7f3a9c2e1b5d8f4a6c0e"


class Colour(enum.Enum):
    GREEN = "green"


@dataclass
class Parcel:
    weight: float
    tags: set[str]


class Quote(BaseModel):
    price: float
    api_key: str


@tool(effect="read_only")
def lookup(name: str) -> dict[str, Any]:
    """Look a product up."""
    return {
        "name": name,
        "parcel": Parcel(1.5, {"fragile"}),
        "quote": Quote(price=4.5, api_key="abc-secret-value"),
        "colour": Colour.GREEN,
        "raw": b"\x00\x01",
        "note": f"key in use: {os.environ.get('SHOP_API_KEY', '')}",
    }


@tool(effect="write")
def remember(ctx: RunContext, note: str) -> str:
    """Keep a note in the session."""
    ctx.set("note", note)
    ctx.set("parcel", Parcel(2.0, {"a"}))
    return "noted"


@tool(effect="read_only")
def broken(text: str) -> str:
    """Always fails."""
    raise RuntimeError(f"cannot do {text}")


REFUNDS = Agent(name="refunds", description="Handles refunds.", tools=[lookup])
SHOP = Agent(
    name="shop",
    instructions="Help with the catalogue. Customer: {{ context.user }}.",
    tools=[lookup, remember, broken],
    handoffs=[REFUNDS],
)
STREAMER = Agent(name="streamer", model_settings=ModelSettings(stream=True))


def scripts(run: int) -> list[tuple[Agent, list[Any]]]:
    return [
        (
            SHOP,
            [
                [ToolCall("lookup", {"name": f"tea {run}"}), ToolCall("remember", {"note": "x"})],
                ToolCall("broken", {"text": "that"}),
                ToolCall("nope", {}),
                ToolCall("transfer_to_refunds", {"reason": "refund", "summary": "wants one"}),
                ToolCall("lookup", {"name": "refund"}),
                f"refund issued for run {run}",
            ],
        ),
        (STREAMER, [f"one two three {run}"]),
    ]


def stored(store: TraceStore) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, in an order that does not depend on how they were stored."""
    return {
        table: sorted(map(tuple, store.sql(f"SELECT * FROM {table}").rows), key=repr)
        for table in TABLES
    }


async def test_runs_recorded_there_are_stored_as_they_are_recorded_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = TraceStore(tmp_path / "here.duckdb")
    there = TraceStore(tmp_path / "there.duckdb", recording_process=True)
    # Set after the recording process started: its environment does not have it.
    monkeypatch.setenv("SHOP_API_KEY", SECRET)
    for run in range(3):
        for agent, answers in scripts(run):
            labels = {"eval_id": "eval_x", "case_id": f"case-{run}", "trial": 1}
            await Runner.run(
                agent,
                f"help me ({run}), my key is {SECRET}",
                model=ScriptedModel(answers),
                store=here.with_labels(**labels),
                hooks=[there.with_labels(**labels).run_hook()],
                context={"user": "Ada"},
            )
    expected, found = stored(here), stored(there)
    assert {t: len(rows) for t, rows in found.items()} == {
        t: len(rows) for t, rows in expected.items()
    }
    assert len(found["runs"]) == 9 and len(found["context_diffs"]) == 6
    for table in TABLES:
        assert found[table] == expected[table], table
    assert SECRET not in repr(found) and "abc-secret-value" not in repr(found)
    here.close()
    there.close()


async def test_a_recording_process_that_dies_loses_no_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = TraceStore(tmp_path / "traces.duckdb", recording_process=True)
    store.start_recording()
    process = store._channel._process  # type: ignore[union-attr]
    assert process is not None and process.poll() is None
    assert process is not None

    @tool(effect="read_only")
    def fatal(text: str) -> str:
        """Kills the recording process while the run is under way."""
        process.kill()
        process.wait()
        return text

    agent = Agent(name="shop", tools=[lookup, fatal])
    finished = []
    with caplog.at_level(logging.WARNING, logger="agentbench.trace"):
        for _ in range(2):
            result = await Runner.run(agent, "go", model=ScriptedModel(["hello"]), store=store)
            finished.append(result.run_id)
        answers = [ToolCall("lookup", {"name": "tea"}), ToolCall("fatal", {"text": "t"}), "done"]
        result = await Runner.run(agent, "go", model=ScriptedModel(answers), store=store)
        finished.append(result.run_id)
        for _ in range(2):
            result = await Runner.run(agent, "go", model=ScriptedModel(["again"]), store=store)
            finished.append(result.run_id)
    warnings = [r.getMessage() for r in caplog.records if "recording process" in r.getMessage()]
    assert len(warnings) == 1 and "recording in this process from now on" in warnings[0]
    runs = {r.run_id: r for r in store.runs()}
    assert set(runs) == set(finished)
    assert {r.status for r in runs.values()} == {"completed"}
    assert store.run(finished[2]).run.tool_calls == 2
    store.close()


_KILLED_PARENT = textwrap.dedent(
    """
    import asyncio, sys
    from agentbench import Agent, Runner, ScriptedModel, ToolCall, tool
    from agentbench.trace import TraceStore

    @tool(effect="read_only")
    def lookup(name: str) -> str:
        "Look a product up."
        return name * 50

    store = TraceStore(sys.argv[1], recording_process=True)
    agent = Agent(name="shop", tools=[lookup])

    async def main():
        for run in range(100000):
            model = ScriptedModel([ToolCall("lookup", {"name": f"tea {run}"}), "done"])
            result = await Runner.run(agent, "go", model=model, store=store)
            print(result.run_id, flush=True)

    asyncio.run(main())
    """
)


def test_a_killed_parent_loses_no_finished_run(tmp_path: Path) -> None:
    db = tmp_path / "traces.duckdb"
    parent = subprocess.Popen(
        [sys.executable, "-c", _KILLED_PARENT, str(db)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert parent.stdout is not None
    finished = [parent.stdout.readline().strip() for _ in range(40)]
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    finished += [line.strip() for line in parent.stdout if line.strip()]
    parent.stdout.close()
    store = TraceStore(db)
    deadline = time.monotonic() + 60
    runs: dict[str, str] = {}
    while time.monotonic() < deadline:  # the recording process stores what it read, then exits
        with contextlib.suppress(StoreNotFoundError):  # the file is made with its first batch
            runs = {r.run_id: r.status for r in store.runs()}
        if set(finished) <= set(runs):
            break
        time.sleep(0.2)
    assert set(finished) <= set(runs)
    assert {runs[run_id] for run_id in finished} == {"completed"}
    assert set(runs.values()) <= {"completed", "incomplete"}  # the one cut short, if any


async def test_a_store_closed_and_used_again_starts_a_new_recording_process(
    tmp_path: Path,
) -> None:
    store = TraceStore(tmp_path / "traces.duckdb", recording_process=True)
    agent = Agent(name="shop", tools=[lookup])
    finished = []
    hook = store.run_hook()  # one recorder across the close: it begins again with the new one
    for _ in range(2):
        for _ in range(2):
            model = ScriptedModel([ToolCall("lookup", {"name": "tea"}), "done"])
            result = await Runner.run(agent, "go", model=model, hooks=[hook])
            finished.append(result.run_id)
        first = store._channel._process  # type: ignore[union-attr]
        store.close()
        assert first is not None and first.returncode == 0
    runs = {r.run_id: r for r in store.runs()}
    assert set(runs) == set(finished)
    assert {(r.status, r.tool_calls) for r in runs.values()} == {("completed", 1)}


def test_a_conversation_goes_over_the_wire_once_and_a_failed_item_sends_none_of_it() -> None:
    class Unprintable:
        def __str__(self) -> str:
            raise RuntimeError("no text")

    writer, reader = WireWriter(), WireReader(adopt_shapes=False)
    conversation: list[dict[str, Any]] = [{"role": "user", "content": "a"}]
    first = MessageView({"role": "system", "content": "s"}, conversation)
    with pytest.raises(TypeError):
        writer.item(("request", first, Unprintable()))
    conversation.append({"role": "assistant", "content": "b"})
    both = writer.item(("request", first, MessageView(None, conversation)))
    conversation.append({"role": "user", "content": "c"})
    third = writer.item(("request", MessageView(None, conversation)))
    assert b'"c"' not in both and b"content" in third and third.count(b'"a"') == 0

    _, was, now = reader.item(1, both)
    (_, later) = reader.item(1, third)
    assert list(was) == [{"role": "system", "content": "s"}, *conversation[:1]]
    assert list(now) == conversation[:2] and list(later) == conversation
    assert later.extends(now)  # one list on the reader's side too, as views share it here


def test_an_unchanged_system_message_is_read_as_the_same_message_each_request() -> None:
    # Where the run is, every request of a step that only appends shares its system message
    # object; the reader gives its requests the same sharing, so the recording process's
    # recorder sees requests that only appended (and records each in the time of what it
    # appended, not of the whole conversation); a changed one is a new object.
    writer, reader = WireWriter(), WireReader(adopt_shapes=False)
    conversation: list[dict[str, Any]] = [{"role": "user", "content": "a"}]
    system = {"role": "system", "content": "s"}
    views = []
    for step in range(3):
        conversation.append({"role": "assistant", "content": f"step {step}"})
        views.append(reader.item(1, writer.item(("request", MessageView(system, conversation))))[1])
    changed = {"role": "system", "content": "t"}
    views.append(reader.item(1, writer.item(("request", MessageView(changed, conversation))))[1])
    firsts = [view.first for view in views]
    assert firsts[0] is firsts[1] is firsts[2] and firsts[2] == system
    assert firsts[3] == changed and firsts[3] is not firsts[2]


async def test_a_run_under_way_when_the_recording_process_dies_is_stored_whole(
    tmp_path: Path,
) -> None:
    store = TraceStore(tmp_path / "traces.duckdb", recording_process=True)
    store.start_recording()
    process = store._channel._process  # type: ignore[union-attr]
    assert process is not None

    @tool(effect="read_only")
    async def fatal(text: str) -> str:
        """Kills the recording process once it has this run's start in its journal; another
        run finishes and the store is read before this one ends."""
        store.flush()
        process.kill()
        process.wait()
        await Runner.run(Agent(name="other"), "b", model=ScriptedModel(["hi"]), store=store)
        store.flush()
        return text

    agent = Agent(name="shop", tools=[fatal])
    answers = [ToolCall("fatal", {"text": "t"}), "done"]
    result = await Runner.run(agent, "go", model=ScriptedModel(answers), store=store)
    run = store.run(result.run_id).run
    assert (run.status, run.tool_calls, run.llm_calls) == ("completed", 1, 2)
    assert len(store.runs()) == 2
    store.close()


_HOLD_THE_STORE = (
    "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); print('held', flush=True); "
    "time.sleep(float(sys.argv[2]))"
)


def test_runs_go_on_while_a_flush_waits_for_a_busy_store(tmp_path: Path) -> None:
    db = tmp_path / "traces.duckdb"
    store = TraceStore(db, recording_process=True, wait_s=3)
    agent = Agent(name="a")
    Runner.run_sync(agent, "go", model=ScriptedModel(["hi"]), store=store)
    store.flush()
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_THE_STORE, str(db), "6"], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    Runner.run_sync(agent, "go", model=ScriptedModel(["hi"]), store=store)
    failed: list[BaseException] = []

    def flush() -> None:
        try:
            store.flush()
        except Exception as exc:  # what stopped the recording process's store, raised here
            failed.append(exc)

    flushing = threading.Thread(target=flush)
    flushing.start()
    time.sleep(0.3)
    started = time.monotonic()
    Runner.run_sync(agent, "go", model=ScriptedModel(["hi"]), store=store)
    took = time.monotonic() - started
    flushing.join()
    holder.kill()
    holder.wait()
    holder.stdout.close()
    assert took < 1.5  # not the flush's 3 s wait for the store
    assert [type(exc).__name__ for exc in failed] == ["StoreBusyError"]
    store.flush()
    assert len(store.runs()) == 3
    store.close()


def test_a_forked_child_does_not_keep_the_recording_process_open(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = TraceStore(tmp_path / "traces.duckdb", recording_process=True)
    result = Runner.run_sync(Agent(name="a"), "go", model=ScriptedModel(["hi"]), store=store)
    store.flush()
    forked = os.fork()  # a multiprocessing "fork" worker, say, still alive as we close
    if forked == 0:
        time.sleep(30)
        os._exit(0)
    try:
        started = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="agentbench.trace"):
            store.close()
        assert time.monotonic() - started < 5  # not the 20 s wait for an exit, then a kill
        assert not [r for r in caplog.records if "recording process" in r.getMessage()]
    finally:
        os.kill(forked, signal.SIGKILL)
        os.waitpid(forked, 0)
    assert [r.run_id for r in store.runs()] == [result.run_id]
