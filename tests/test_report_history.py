"""The history of a store's evals: numbers per eval, regressions, flaky cases, CLI and page.

The store is written the way the harness writes one (`results_store`), with evals of a few
commits of a real git repository made in the test, so commit dates, subjects and branches
come from git. `test_report_pages.py` opens the history page in Chromium.
"""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import orjson
import pytest

from agentbench.cli import main
from agentbench.evals.comparing.stats import TrialOutcome
from agentbench.evals.history.history import load_history
from agentbench.evals.running.harness import EvalRun, HarnessOptions
from agentbench.evals.storage import results_store
from agentbench.report.history_page import write_history_report
from agentbench.trace.store import TraceStore

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

START = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def git(repo: Path, *args: str) -> str:
    identity = ["-c", "user.name=t", "-c", "user.email=t@example.com"]
    done = subprocess.run(
        ["git", *identity, *args], cwd=repo, check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


def record(
    store: TraceStore,
    eval_id: str,
    version: str | None,
    day: int,
    statuses: dict[str, list[str]],
    suite: str = "sre",
) -> None:
    """An eval of `version`, `day` days after START: each case's trials with these statuses."""
    run = EvalRun(eval_id, code_version=version, started_at=START + timedelta(days=day))
    stub = SimpleNamespace(name=suite, path=Path("golden") / suite, model=None)
    results_store.start_eval(store, run, [stub], HarnessOptions())
    line = 0
    for case_id, trials in statuses.items():
        line += 5
        for trial, status in enumerate(trials, 1):
            run.outcomes.append(
                TrialOutcome(
                    suite=suite,
                    case_id=case_id,
                    trial=trial,
                    status=status,
                    score=float(status == "passed"),
                    duration_ms=100.0 * day + trial,
                    tokens=1000 + day,
                    cost_usd=0.001,
                    source=f"golden/{suite}/cases.yaml:{line}",
                )
            )
    results_store.store_outcomes(store, eval_id, run.outcomes)
    store.flush()
    results_store.finish_eval(store, run)


@pytest.fixture(scope="module")
def history_store(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """Three commits on main; five evals: a regression at the second commit, a flaky case
    (two evals of one commit disagree), a case whose trials disagree, and a dirty eval."""
    folder = tmp_path_factory.mktemp("history")
    repo = folder / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    shas = []
    for subject in ("first suite", "cheaper order total", "retry on timeout"):
        (repo / "notes.txt").write_text(subject)
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", subject)
        shas.append(git(repo, "rev-parse", "HEAD"))
    store = TraceStore(folder / "traces.duckdb")
    ok = ["passed"]
    record(store, "eval_1", shas[0], 0, {"disk": ok, "cpu": ok, "mem": ok})
    record(store, "eval_2", shas[1], 1, {"disk": ["failed"], "cpu": ok, "mem": ok})
    record(store, "eval_3", shas[1], 2, {"disk": ["failed"], "cpu": ["failed"], "mem": ok})
    record(store, "eval_4", shas[2], 3, {"disk": ok, "cpu": ok, "mem": ["passed", "failed"]})
    record(store, "eval_5", f"{shas[2]}+dirty", 4, {"disk": ok, "cpu": ["failed"], "mem": ok})
    record(store, "eval_other", shas[2], 4, {"x": ok}, suite="billing")
    yield SimpleNamespace(store=store, repo=repo, shas=shas, folder=folder)
    store.close()


def test_each_eval_has_its_numbers_commit_and_regressions(history_store: SimpleNamespace):
    found = load_history(history_store.store, suite="sre", repo=history_store.repo)
    points = found.points
    assert [p.eval_id for p in points] == ["eval_1", "eval_2", "eval_3", "eval_4", "eval_5"]
    first, second = points[0], points[1]
    assert first.pass_rate == 1.0 and second.pass_rate == pytest.approx(2 / 3)
    assert second.subject == "cheaper order total" and second.branch == "main"
    assert second.commit == history_store.shas[1] and second.commit_date
    assert second.tokens == 3 * 1001 and second.cost_usd == pytest.approx(0.003)
    assert [(m.case_id, m.before, m.after, m.source) for m in second.regressions] == [
        ("disk", "pass", "fail", "golden/sre/cases.yaml:5")
    ]
    assert second.previous == "eval_1"
    assert [m.case_id for m in points[2].regressions] == ["cpu"]
    assert [m.case_id for m in points[3].fixed] == ["cpu", "disk"]
    assert [(m.case_id, m.after) for m in points[3].regressions] == [("mem", "flaky")]
    assert points[4].dirty and points[4].commit == history_store.shas[2]


def test_flaky_means_flipping_without_a_code_change(history_store: SimpleNamespace) -> None:
    found = load_history(history_store.store, suite="sre", repo=history_store.repo)
    flaky = {(f.case_id, f.code_version): f for f in found.flaky}
    # cpu passed in eval_2 and failed in eval_3, both of the second commit
    assert flaky[("cpu", history_store.shas[1])].results == [("eval_2", "pass"), ("eval_3", "fail")]
    # mem's two trials disagree within eval_4
    assert "trials disagree" in flaky[("mem", history_store.shas[2])].why
    # cpu failed in the dirty eval_5 after passing in eval_4 of its commit: uncommitted code
    # is not the same code, so that is no flake
    assert ("cpu", history_store.shas[2]) not in flaky
    assert len(found.flaky) == 2


def test_suite_and_since_narrow_the_history(history_store: SimpleNamespace) -> None:
    everything = load_history(history_store.store, repo=history_store.repo)
    assert [p.eval_id for p in everything.points][-2:] == ["eval_5", "eval_other"]
    recent = load_history(
        history_store.store, suite="sre", since=START + timedelta(days=2), repo=history_store.repo
    )
    assert [p.eval_id for p in recent.points] == ["eval_3", "eval_4", "eval_5"]
    # the first eval in the window has nothing before it to regress from
    assert recent.points[0].regressions == [] and recent.points[0].previous is None


def test_a_commit_git_does_not_know_is_shown_without_its_details(tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "traces.duckdb")
    record(store, "eval_a", "f" * 40, 0, {"disk": ["passed"]})
    found = load_history(store, repo=tmp_path)  # not a git checkout
    assert found.points[0].commit == "f" * 40 and found.points[0].subject is None
    store.close()


def test_history_json_and_page_from_the_cli(
    history_store: SimpleNamespace, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    monkeypatch.chdir(history_store.repo)
    db = str(history_store.folder / "traces.duckdb")
    assert main(["history", "--db", db, "--suite", "sre", "--json"]) == 0
    document = orjson.loads(capsys.readouterr().out)
    assert [p["eval_id"] for p in document["points"]] == [f"eval_{i}" for i in range(1, 6)]
    assert document["points"][1]["regressions"][0]["case_id"] == "disk"
    assert {f["case_id"] for f in document["flaky"]} == {"cpu", "mem"}

    assert main(["history", "--db", db, "--suite", "sre"]) == 0
    text = capsys.readouterr().out
    assert "regressed: sre/disk (golden/sre/cases.yaml:5) pass → fail" in text
    assert "cheaper order total" in text and "flaky (2):" in text

    out = history_store.folder / "reports"
    code = main(["report", "--history", "--db", db, "--suite", "sre", "--report-dir", str(out)])
    assert code == 0
    page = out / "history-sre" / "index.html"
    assert f"history of 5 eval(s): {page}" in capsys.readouterr().out
    html = page.read_text()
    assert "cheaper order total" in html and "eval_4" in html and 'id="history-data"' in html


def test_history_flags_are_checked(history_store: SimpleNamespace, capsys) -> None:
    db = str(history_store.folder / "traces.duckdb")
    assert main(["report", "--history", "latest", "--db", db]) == 2
    assert "takes no EVAL_ID" in capsys.readouterr().err
    assert main(["report", "latest", "--suite", "sre", "--db", db]) == 2
    assert "--suite goes with --history" in capsys.readouterr().err
    assert main(["history", "--since", "yesterday", "--db", db]) == 2
    assert "--since 'yesterday'" in capsys.readouterr().err


def test_with_reports_writes_the_missing_eval_reports(history_store: SimpleNamespace) -> None:
    out = history_store.folder / "linked"
    found = load_history(history_store.store, suite="sre", repo=history_store.repo)
    page = write_history_report(history_store.store, found, out).read_text()
    assert 'href="../eval_1/index.html"' not in page  # no report written: no dead link
    assert "agentbench report eval_1" in page
    db = str(history_store.folder / "traces.duckdb")
    args = ["report", "--history", "--suite", "sre", "--with-reports", "--db", db]
    assert main([*args, "--report-dir", str(out)]) == 0
    page = (out / "history-sre" / "index.html").read_text()
    assert (out / "eval_1" / "index.html").exists()
    assert 'href="../eval_1/index.html"' in page


def test_a_case_that_could_not_run_is_no_regression(tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "traces.duckdb")
    record(store, "eval_a", "a" * 40, 0, {"disk": ["passed"], "cpu": ["failed"]})
    record(store, "eval_outage", "a" * 40, 1, {"disk": ["error"], "cpu": ["error"]})
    record(store, "eval_c", "c" * 40, 2, {"disk": ["passed"], "cpu": ["passed"]})
    found = load_history(store, repo=tmp_path)
    outage = found.points[1]
    assert (outage.errors, outage.regressions, outage.fixed) == (2, [], [])
    # the fix is counted against the last result the case had, before the outage
    assert [(m.case_id, m.before) for m in found.points[2].fixed] == [("cpu", "fail")]
    assert found.flaky == []  # an outage is not a flip of the same commit's code
    store.close()


def test_evals_follow_the_commits_not_the_clock(tmp_path: Path) -> None:
    """Commits evaluated out of order (as bisect does) are shown in history order; an eval of
    a commit git does not know keeps its place in time."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    shas = []
    for subject in ("one", "two", "three"):
        (repo / "f.txt").write_text(subject)
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", subject)  # all within a second: dates cannot order them
        shas.append(git(repo, "rev-parse", "HEAD"))
    store = TraceStore(tmp_path / "traces.duckdb")
    ok = {"disk": ["passed"]}
    record(store, "eval_c", shas[2], 0, ok)
    record(store, "eval_x", "e" * 40, 1, ok)
    record(store, "eval_a", shas[0], 2, ok)
    record(store, "eval_b", shas[1], 3, {"disk": ["failed"]})
    found = load_history(store, repo=repo)
    assert [p.eval_id for p in found.points] == ["eval_a", "eval_x", "eval_b", "eval_c"]
    assert [m.case_id for m in found.points[2].regressions] == ["disk"]
    assert [m.case_id for m in found.points[3].fixed] == ["disk"]
    store.close()
