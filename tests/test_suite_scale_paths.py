"""What the suite-scale work changed keeps its meaning: the report's details are the bytes they
were (now built trial by trial, and the page written piece by piece from traces read a batch of
trials at a time), and a suite's repository root, now resolved once, still follows the suite
folder and the working folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentbench.errors import UsageError
from agentbench.evals.comparing.own_verdict import own_verdict
from agentbench.evals.storage import results_store
from agentbench.evals.suites.suite_models import Suite
from agentbench.report import html as report_html
from agentbench.report import render_report, write_report
from agentbench.report.embed import script_json
from agentbench.report.loading import load_eval, trial_runs
from agentbench.report.packing import report_details
from agentbench.report.page import eval_context, page_context
from agentbench.report.timeline import trial_detail
from agentbench.trace.redaction.redactor import Redactor
from agentbench.trace.redaction.rules import RedactionRules
from agentbench.trace.store import TraceStore
from tests.test_report_html import record_eval


def test_details_are_the_bytes_of_the_whole_list(tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "traces.duckdb")
    try:
        record_eval(store, "eval_x", evil_tool=True)
        whole = load_eval(store, "eval_x")
        expected = script_json(
            [
                trial_detail(o, whole.runs.get((o.suite, o.case_id, o.trial), []))
                for o in whole.outcomes
            ]
        )
        data = load_eval(store, "eval_x")
        assert any(data.runs.values())
        assert str(eval_context(data)["details"]) == str(expected)
        assert not data.runs  # each trial's traces were let go once its detail was written
    finally:
        store.close()


@pytest.mark.parametrize("batch", [1, 2, 100])
def test_trial_runs_are_the_runs_load_eval_matches(tmp_path: Path, batch: int) -> None:
    store = TraceStore(tmp_path / "traces.duckdb")
    try:
        record_eval(store, "eval_x", evil_tool=True)
        whole = load_eval(store, "eval_x")
        keys = [(o.suite, o.case_id, o.trial) for o in whole.outcomes]
        expected = [whole.runs.get(key, []) for key in keys]
        assert any(expected)
        assert list(trial_runs(store, "eval_x", whole.outcomes, batch)) == expected
    finally:
        store.close()


def unpacked(page: str) -> str:
    """The page with its packed case details in their JSON text, as `eval_context` has them."""
    start = page.index('id="case-data"')
    start = page.index(">", start) + 1
    end = page.index("</script>", start)
    return page[:start] + (report_details(page) or "") + page[end:]


def test_the_page_written_in_pieces_is_the_page_made_whole(tmp_path: Path) -> None:
    # The whole page, redacted as one document (as reports were made), against the page
    # made and redacted piece by piece — written to a file, or returned as text.
    store = TraceStore(tmp_path / "traces.duckdb")
    try:
        record_eval(store, "eval_x", evil_tool=True)
        data = load_eval(store, "eval_x")
        # The verdict a report opens with when none was kept (`own_verdict`), given alike.
        gate = own_verdict(store, "eval_x", data.outcomes).as_dict()
        whole = report_html._page(
            "report.html.j2",
            Redactor(store.redaction or RedactionRules()),
            comparison=None,
            **{**eval_context(data), **page_context(data, None, gate)},
        )
        # The details travel deflated: unpacked, they are the text the whole page holds.
        assert unpacked(render_report(store, "eval_x", gate=gate)) == whole
        assert unpacked(render_report(store, "eval_x")) == whole  # the verdict found alone
        path = write_report(store, "eval_x", tmp_path / "reports", gate=gate)
        assert unpacked(path.read_text(encoding="utf-8")) == whole
        assert [p.name for p in path.parent.iterdir()] == ["index.html"]
    finally:
        store.close()


def test_a_report_that_fails_half_way_leaves_the_last_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = TraceStore(tmp_path / "traces.duckdb")
    try:
        record_eval(store, "eval_x", evil_tool=True)
        path = write_report(store, "eval_x", tmp_path / "reports")
        before = path.read_bytes()

        def broken(*args: object, **kwargs: object) -> object:
            yield from ()
            raise RuntimeError("the store went away")

        monkeypatch.setattr(report_html, "trial_runs", broken)
        with pytest.raises(RuntimeError):
            write_report(store, "eval_x", tmp_path / "reports")
        assert path.read_bytes() == before
        assert [p.name for p in path.parent.iterdir()] == ["index.html"]
    finally:
        store.close()


def _suite(folder: Path) -> Suite:
    suite = Suite(name="s", agent="agent.py:agent")
    suite._path = folder
    return suite


def test_root_follows_the_suite_folder(tmp_path: Path) -> None:
    first = tmp_path / "one" / "golden" / "s"
    second = tmp_path / "two" / "golden" / "s"
    for folder in (first, second):
        folder.mkdir(parents=True)
    suite = _suite(first)
    assert suite.root == tmp_path / "one"
    assert suite.root == tmp_path / "one"  # asked again: the same answer
    suite._path = second
    assert suite.root == tmp_path / "two"
    assert suite.cassette_for(type("C", (), {"cassette": None, "id": "c"})()) == (
        tmp_path / "two" / "replays" / "s" / "c.yaml"
    )


def test_a_relative_folder_follows_the_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for top in ("one", "two"):
        (tmp_path / top / "repo" / "golden" / "s").mkdir(parents=True)
    suite = _suite(Path("repo/golden/s"))
    monkeypatch.chdir(tmp_path / "one")
    assert suite.root == (tmp_path / "one" / "repo").resolve()
    monkeypatch.chdir(tmp_path / "two")
    assert suite.root == (tmp_path / "two" / "repo").resolve()
    assert Path(os.getcwd()) == (tmp_path / "two").resolve()


def test_a_report_of_an_unknown_eval_writes_nothing(tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "traces.duckdb")
    try:
        record_eval(store, "eval_x", evil_tool=True)
        with pytest.raises(UsageError, match="no eval 'eval_missing'"):
            write_report(store, "eval_missing", tmp_path / "reports")
        assert not (tmp_path / "reports").exists()
    finally:
        store.close()


@pytest.mark.parametrize(
    "rows",
    [
        [{"name": "stop_reason", "value": 1.0, "passed": True, "reason": "stop reason completed"}],
        [{"name": "token", "value": 1.0, "passed": True, "reason": "a named secret"}],
        [{"name": "x", "value": 0.0, "passed": False, "reason": "Bearer abcdefghijklmnop"}],
        [{"name": "x", "value": 2**70, "passed": True, "reason": "cut here…"}],
        [{"name": "x", "value": 1, "passed": True, "reason": None, "drifts": [{"a": 1}]}],
        [{"password": "hunter22", "source": "golden/s/cases.yaml:3"}],
    ],
)
def test_rows_checked_in_one_pass_are_redacted_as_value_by_value(rows: list[dict]) -> None:
    redactor = Redactor(RedactionRules())
    assert results_store.redacted_rows(rows, redactor) == redactor.value(rows)
    if rows[0].get("reason") == "stop reason completed":
        assert results_store.redacted_rows(rows, redactor) is rows  # kept, not rebuilt
