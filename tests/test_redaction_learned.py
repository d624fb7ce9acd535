"""A secret seen once is masked everywhere (issue 34, finding 2).

A password passed as a tool argument named `password` was masked there and nowhere else: the
input (recorded before the tool call named it), the tool's error and result, the model's answer
and everything made from them kept it in clear. The run's redactor now learns what it masks —
a value under a secret key, a pattern's secret — masks it wherever it meets it from then on,
and the rows made before it knew are masked again when the run ends (`trace.remask`): held
whole, or, for a long run whose parts went to the journal first, as they are stored. Values too
short to be told from ordinary text are masked in their own field only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

from agentbench import Agent, Limits, Runner, ScriptedModel, ToolCall, tool
from agentbench.replay.cassette import Cassette, Interaction
from agentbench.replay.masked import revealed
from agentbench.runtime.models import ChatResponse
from agentbench.trace import TraceStore, recorder
from agentbench.trace.recorder import TraceRecorder
from agentbench.trace.redaction.redactor import Redactor
from agentbench.trace.redaction.rules import MASK, MAX_LEARNED, MIN_LEARNED_CHARS
from agentbench.trace.schema import RunRows

PASSWORD = "Pw8Qr7St6Uv5Wx4Yz"
MARKER = "visible-marker-5c5c"


@tool(effect="read_only")
def login(user: str, password: str) -> dict[str, Any]:
    """Log a user in.

    Args:
        user: Who.
        password: Their password.
    """
    if user == "mallory":
        raise RuntimeError(f"login refused for {password}")
    return {"session": "ok", "greeting": f"welcome back; {password} still works ({MARKER})"}


@tool(effect="read_only")
def lookup(query: str) -> str:
    """Look something up.

    Args:
        query: What.
    """
    return f"nothing about {query}"


AGENT = Agent(
    name="vault",
    instructions="Answer briefly.",
    tools=[login, lookup],
    limits=Limits(max_iterations=40),
)
INPUT = f"log me in; my password is {PASSWORD}"


def script(lookups: int = 0) -> list[Any]:
    """The model: some lookups, a login that names the password, a refused one, an answer
    that repeats it (and, with `check`, a lookup quoting it in an argument not named so)."""
    return [
        *(ToolCall("lookup", {"query": f"topic {i}"}) for i in range(lookups)),
        ToolCall("login", {"user": "ada", "password": PASSWORD}),
        ToolCall("login", {"user": "mallory", "password": PASSWORD}),
        ToolCall("lookup", {"query": f"who else uses {PASSWORD}"}),
        f"Done: {PASSWORD} works.",
    ]


def text_cells(db: Path) -> list[str]:
    with duckdb.connect(str(db), read_only=True) as conn:
        columns = conn.execute(
            "SELECT table_name, column_name FROM duckdb_columns() "
            "WHERE data_type = 'VARCHAR' AND NOT internal AND schema_name = 'main'"
        ).fetchall()
        cells = [
            row[0]
            for table, column in columns
            for row in conn.execute(f'SELECT "{column}" FROM "{table}"').fetchall()
        ]
    return [cell for cell in cells if cell is not None]


@pytest.mark.parametrize("process", [False, True], ids=["recorded_here", "recording_process"])
def test_a_password_argument_is_masked_in_every_row_of_its_run(
    tmp_path: Path, process: bool
) -> None:
    store = TraceStore(tmp_path / "traces.duckdb", recording_process=process)
    trial = store.with_labels(eval_id="eval_1", case_id="login", trial=1)
    result = Runner.run_sync(AGENT, INPUT, model=ScriptedModel(script()), store=trial)
    store.flush()
    try:
        cells = text_cells(store.path)
        assert any(MARKER in cell for cell in cells)  # the scan reads real content
        assert [cell for cell in cells if PASSWORD in cell] == []
        # The requests were encoded again: each still rebuilds to what its hash says.
        requests = store.requests(result.run_id)
        first = requests[min(requests)]["messages"][-1]["content"]
        assert first == f"log me in; my password is {MASK}"
        # What the trial writes about its runs (results, a cassette) masks it too.
        assert PASSWORD in trial.redactor.learned
    finally:
        store.close()


def test_a_long_run_that_learns_late_is_masked_in_the_parts_it_journaled_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(recorder, "SPILL_ROWS", 8)  # parts go to the journal every few steps
    store = TraceStore(tmp_path / "traces.duckdb")
    result = Runner.run_sync(AGENT, INPUT, model=ScriptedModel(script(lookups=12)), store=store)
    store.flush()
    try:
        assert [cell for cell in text_cells(store.path) if PASSWORD in cell] == []
        requests = store.requests(result.run_id)  # diffs and hashes stay consistent
        assert len(requests) == 16
        assert all(PASSWORD not in str(request) for request in requests.values())
    finally:
        store.close()


class _Sink:
    def __init__(self) -> None:
        self.started: list[dict[str, Any]] = []
        self.finished: list[RunRows] = []

    def run_started(self, row: dict[str, Any]) -> None:
        self.started.append(row)

    def run_finished(self, rows: RunRows) -> None:
        self.finished.append(rows)


def test_the_start_marker_holds_no_input_the_finished_run_its_masked_input() -> None:
    """The start marker is journaled before anything in the input is known to be secret."""
    sink = _Sink()
    hook = TraceRecorder(sink, redactor=Redactor(environ={}))
    Runner.run_sync(AGENT, INPUT, model=ScriptedModel(script()), hooks=[hook])
    assert sink.started[0]["input"] is None and sink.started[0]["context"] is None
    assert sink.finished[0].runs[0]["input"] == f'"log me in; my password is {MASK}"'


def test_a_value_is_masked_everywhere_only_if_it_could_be_a_secret() -> None:
    assert MIN_LEARNED_CHARS == 8
    for short in ("a", "hunter2", "12345678", "password", "api_token"):
        redactor = Redactor(environ={})
        masked = redactor.value({"password": short, "note": f"banana {short} banana"})
        assert masked == {"password": MASK, "note": f"banana {short} banana"}, short
        assert redactor.learned == set()
    redactor = Redactor(environ={})
    # The note comes first: it is masked too, within the same value.
    masked = redactor.value({"note": "it is hunter22", "password": "hunter22"})
    assert masked == {"note": f"it is {MASK}", "password": MASK}
    assert redactor.text("and later hunter22 again") == f"and later {MASK} again"


def test_a_redactor_learns_a_bounded_number_of_values() -> None:
    redactor = Redactor(environ={})
    keys = [f"vault-key-{i:05d}x" for i in range(MAX_LEARNED + 1)]
    assert redactor.value([{"api_key": key} for key in keys]) == [{"api_key": MASK}] * len(keys)
    assert len(redactor.learned) == MAX_LEARNED
    assert redactor.text(f"first {keys[0]}, last {keys[-1]}") == f"first {MASK}, last {keys[-1]}"


def test_a_pattern_secret_is_learned_and_masked_bare() -> None:
    redactor = Redactor(environ={})
    assert redactor.text("refused: Bearer Zy9Xw8Vu7Ts6") == f"refused: Bearer {MASK}"
    assert redactor.text("use Zy9Xw8Vu7Ts6 again") == f"use {MASK} again"
    assert redactor.json({"Zy9Xw8Vu7Ts6": 1}) == f'{{"{MASK}":1}}'  # a key is text too


def test_a_cassette_masks_a_secret_its_later_calls_named(tmp_path: Path) -> None:
    asked = {"model": "m", "messages": [{"role": "user", "content": INPUT}]}
    call = ToolCall("login", {"user": "ada", "password": PASSWORD})
    answer = ChatResponse(tool_calls=[call], finish_reason="tool_calls")
    cassette = Cassette([Interaction.of(asked, answer)], {"agentbench": {"input": INPUT}})
    saved = cassette.save(tmp_path / "login.yaml").read_text()
    assert PASSWORD not in saved and f"my password is {MASK}" in saved


def test_what_a_recording_masked_is_revealed_by_the_request_that_fits_it() -> None:
    recorded = {"messages": [{"role": "user", "content": f"my password is {MASK}"}]}
    current = {"messages": [{"role": "user", "content": f"my password is {PASSWORD}"}]}
    assert list(revealed(recorded, current)) == [PASSWORD]
    other = {"messages": [{"role": "user", "content": "something else entirely"}]}
    assert list(revealed(recorded, other)) == []
