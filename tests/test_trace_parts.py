"""A long run's rows go to the journal in parts while it runs, and are stored as if whole.

The recorder hands a store its finished rows every `SPILL_ROWS` rows, the store journals them
and holds only where they are; they are read back when the run is stored. What is stored must
be what a recording without parts stores, and crash safety must not change: a run killed
mid-way (its parts journaled, no end) is `incomplete` with no rows, a finished one whose
process died before storing it is stored whole from the journal.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentbench.runtime.events import (
    ModelRequest,
    ModelResponse,
    RunFinished,
    RunStarted,
    ToolFinished,
    ToolStarted,
)
from agentbench.runtime.models import ChatResponse, ToolCall, Usage
from agentbench.runtime.tools import ToolResult
from agentbench.trace import TraceRecorder, TraceStore, recorder
from agentbench.trace.journal.spool import Journal, spool_dir
from agentbench.trace.redaction.redactor import Redactor
from agentbench.trace.schema import RunRows
from agentbench.trace.storage import ingest

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

STEPS = 40


def run_events(run_id: str, steps: int = STEPS) -> list[Any]:
    """A tool-calling run; the tool of the last step finishes after the next request (a
    row still waiting for its result when a part is taken)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "find teas"}]
    events: list[Any] = []

    def add(cls: type, **fields: Any) -> None:
        events.append(cls(run_id=run_id, seq=len(events), agent="shop", **fields))

    add(RunStarted, input="find teas", model="m")
    late: ToolCall | None = None
    for step in range(1, steps + 1):
        add(ModelRequest, step=step, request={"model": "m", "messages": list(messages)})
        if late is not None:
            add(ToolFinished, step=step - 1, call_id=late.id, tool="search",
                arguments={"q": late.name}, result=ToolResult.ok({"late": step}),
                effect="read_only")  # fmt: skip
        arguments = {"q": f"tea {step}", "token": "s3cr3t-value"}
        call = ToolCall("search", arguments, id=f"c{step}")
        response = ChatResponse(tool_calls=[call], usage=Usage(input_tokens=5, output_tokens=1))
        add(ModelResponse, step=step, response=response)
        add(ToolStarted, step=step, call_id=call.id, tool="search", arguments=arguments)
        if step % 5 == 0:
            late = call
            continue
        late = None
        add(ToolFinished, step=step, call_id=call.id, tool="search", arguments=arguments,
            result=ToolResult.ok({"tea": step}), effect="read_only")  # fmt: skip
        messages += [response.as_message(), {"role": "tool", "tool_call_id": call.id,
                                               "content": f"tea {step}"}]  # fmt: skip
    add(RunFinished, stop_reason="completed", output="done", iterations=steps)
    return events


def record(sink: Any, events: list[Any]) -> None:
    feed = TraceRecorder(sink, redactor=Redactor(environ={}), code_version=lambda: "v")
    for event in events:
        feed(event)


def stored(store: TraceStore, run_id: str) -> dict[str, Any]:
    trace = store.run(run_id).model_dump()
    return {**trace, "requests": store.requests(run_id)}


@pytest.mark.parametrize("gathered_bytes", [ingest.PART_BYTES, 1], ids=["gathered", "each"])
def test_a_long_run_stored_in_parts_reads_back_as_one_stored_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gathered_bytes: int
) -> None:
    events = run_events("run_long")
    whole = TraceStore(tmp_path / "whole.duckdb")
    record(whole, events)
    monkeypatch.setattr(recorder, "SPILL_ROWS", 8)
    # Parts are inserted together up to PART_BYTES: all at once here, or one INSERT each.
    monkeypatch.setattr(ingest, "PART_BYTES", gathered_bytes)
    parts = TraceStore(tmp_path / "parts.duckdb")
    spilled: list[RunRows] = []
    monkeypatch.setattr(parts, "run_part", lambda rows: (spilled.append(rows),
                        TraceStore.run_part(parts, rows)))  # fmt: skip
    record(parts, events)
    assert len(spilled) >= 3
    expected = stored(whole, "run_long")
    assert stored(parts, "run_long") == expected
    assert expected["run"]["llm_calls"] == STEPS and expected["run"]["tool_calls"] == STEPS
    assert "s3cr3t-value" not in str(expected)
    whole.close()
    parts.close()


class JournalOnly:
    """What a recording process leaves in its spool when it dies before storing anything."""

    def __init__(self, db: Path) -> None:
        self.journal = Journal(spool_dir(db))

    def run_started(self, row: dict[str, Any]) -> None:
        self.journal.append({"start": row})

    def run_part(self, rows: RunRows) -> None:
        self.journal.append({"part": rows.as_dict()})

    def run_finished(self, rows: RunRows) -> None:
        self.journal.append({"run": rows.as_dict()})


def test_a_dead_process_journal_with_parts_is_stored_whole_or_incomplete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = run_events("run_done")
    reference = TraceStore(tmp_path / "reference.duckdb")
    record(reference, events)
    monkeypatch.setattr(recorder, "SPILL_ROWS", 8)
    db = tmp_path / "traces.duckdb"
    dead = JournalOnly(db)
    record(dead, events)
    record(dead, run_events("run_killed")[:-1])  # killed before its end: parts, no end
    dead.journal.close(delete=False)  # its lock goes with the process

    store = TraceStore(db)
    assert stored(store, "run_done") == stored(reference, "run_done")
    killed = store.run("run_killed")
    assert killed.run.status == "incomplete"
    assert killed.llm_calls == [] and killed.tool_calls == []
    assert not list(spool_dir(db).glob("*.journal"))  # stored, then deleted
    store.close()
    reference.close()


def test_a_long_run_stored_twice_keeps_one_copy_of_its_parts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As when a journal is ingested again: the run is skipped by id, parts and all.
    monkeypatch.setattr(recorder, "SPILL_ROWS", 8)
    events = run_events("run_twice")
    store = TraceStore(tmp_path / "traces.duckdb")
    record(store, events)
    once = stored(store, "run_twice")
    record(store, events)
    assert stored(store, "run_twice") == once
    counts = store.sql("SELECT count(*), count(DISTINCT seq) FROM llm_calls").rows
    assert counts == [(STEPS, STEPS)]
    store.close()


def test_a_run_stored_as_incomplete_gives_way_to_the_whole_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A recording process died while the run went on: its journal (the run's start and first
    # parts) is stored first, then the whole run arrives, recorded on by the parent.
    events = run_events("run_on")
    reference = TraceStore(tmp_path / "reference.duckdb")
    record(reference, events)
    monkeypatch.setattr(recorder, "SPILL_ROWS", 8)
    db = tmp_path / "traces.duckdb"
    dead = JournalOnly(db)
    record(dead, events[: len(events) // 2])
    dead.journal.close(delete=False)  # its lock goes with the process
    store = TraceStore(db)
    assert store.run("run_on").run.status == "incomplete"
    record(store, events)
    assert stored(store, "run_on") == stored(reference, "run_on")
    counts = store.sql("SELECT count(*), count(DISTINCT seq) FROM llm_calls").rows
    assert counts == [(STEPS, STEPS)]
    store.close()
    reference.close()
