"""What the suite-scale work changed keeps its meaning: the report's details are the bytes they
were (now built trial by trial), and a suite's repository root, now resolved once, still follows
the suite folder and the working folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentbench.evals.suite_models import Suite
from agentbench.report.embed import script_json
from agentbench.report.loading import load_eval
from agentbench.report.page import eval_context
from agentbench.report.timeline import trial_detail
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
