"""`run_against`: evaluate an older commit in a temporary worktree of a tmp git repository."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from agentbench.errors import UsageError
from agentbench.evals.comparing.against import run_against
from agentbench.evals.comparing.compare import compare_evals
from agentbench.evals.running.harness import Harness, HarnessOptions
from agentbench.evals.suites.dataset import discover
from agentbench.replay.cassette import RecordMode
from agentbench.testing import OpenAICompatibleServer
from agentbench.trace.store import TraceStore
from tests.test_compare_evals import CASES
from tests.weather_suite import AGENT, SUITE, respond

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def run_suite(folder: Path, store: TraceStore, **options: object) -> str:
    found = discover([folder])
    result = asyncio.run(Harness(store, HarnessOptions(**options)).run(found.suites))
    store.flush()
    return result.eval_id


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    """v1 records the suite's cassettes; v2 changes the Oslo reading (oslo fails on replay)."""
    root = tmp_path / "project"
    suite = root / "suites" / "mini"
    (suite / "cases").mkdir(parents=True)
    (suite / "agent.py").write_text(AGENT)
    (suite / "suite.yaml").write_text(SUITE)
    (suite / "cases" / "weather.yaml").write_text(CASES)
    with OpenAICompatibleServer(responder=respond) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "unused")
        run_suite(
            suite,
            TraceStore(tmp_path / "record.duckdb"),
            live=True,
            record_mode=RecordMode.ALL,
            base_url=server.base_url,
        )
    monkeypatch.delenv("OPENAI_API_KEY")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "v1")
    v1 = git(root, "rev-parse", "HEAD")
    agent = suite / "agent.py"
    agent.write_text(agent.read_text().replace('"Oslo": 4', '"Oslo": -3'))
    git(root, "commit", "-q", "-am", "v2")
    return {"root": root, "suite": suite, "v1": v1}


def test_run_against_evaluates_the_ref_and_removes_the_worktree(
    repo: dict[str, object], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, suite = repo["root"], repo["suite"]
    assert isinstance(root, Path) and isinstance(suite, Path)
    db = tmp_path / "evals.duckdb"
    monkeypatch.chdir(root)
    baseline = run_against("HEAD~1", ["suites/mini"], ["--concurrency", "2"], db=db)
    store = TraceStore(db)
    rows = store.sql(f"SELECT code_version, status FROM evals WHERE eval_id = '{baseline}'").rows
    assert rows == [(repo["v1"], "finished")]
    passed = store.sql(
        f"SELECT case_id, status FROM results WHERE eval_id = '{baseline}' ORDER BY case_id"
    ).rows
    assert passed == [("oslo", "passed"), ("paris", "passed"), ("snow", "xfailed")]
    current = run_suite(suite, store)
    comparison = compare_evals(store, baseline, current)
    assert comparison.cases[0].case_id == "oslo" and comparison.cases[0].kind == "newly_failing"
    assert git(root, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert not list(Path(tmp_path).glob("agentbench-against-*"))


def test_run_against_refuses_what_it_cannot_run(
    repo: dict[str, object], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = repo["root"]
    assert isinstance(root, Path)
    db = tmp_path / "e.duckdb"
    with pytest.raises(UsageError, match="git:nope: no such commit"):
        run_against("nope", [root / "suites"], db=db, repo=root)
    with pytest.raises(UsageError, match="is outside the repository"):
        run_against("HEAD", [tmp_path], db=db, repo=root)
    with pytest.raises(UsageError, match="'--db=x' cannot be passed"):
        run_against("HEAD", [root / "suites"], ["--db=x"], db=db, repo=root)
    (root / "later").mkdir()
    (root / "later" / "x.txt").write_text("new")
    with pytest.raises(UsageError, match="later does not exist at"):
        run_against("HEAD", [root / "later"], db=db, repo=root)
    assert git(root, "worktree", "list", "--porcelain").count("worktree ") == 1
