"""`agentbench bisect`: the first commit where a case's behaviour changed, on a real repository.

The repository is made here: a copy of the shipped customer_service suite, committed, then
commits that leave the agent alone and one that changes what a tool returns. Bisect runs the
case in temporary worktrees (real `agentbench run` processes) and must name that commit, its
message and the changed field; a second bisect of the same range reuses every stored eval.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import orjson
import pytest

from agentbench.cli import main
from agentbench.trace.store import TraceStore

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

ROOT = Path(__file__).resolve().parent.parent
SUITE = "golden/customer_service"


def git(repo: Path, *args: str) -> str:
    identity = ["-c", "user.name=t", "-c", "user.email=t@example.com"]
    done = subprocess.run(
        ["git", *identity, *args], cwd=repo, check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


def commit(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    checkout = tmp_path_factory.mktemp("bisect") / "repo"
    ignore = shutil.ignore_patterns("__pycache__", "*.duckdb")
    shutil.copytree(ROOT / SUITE, checkout / SUITE, ignore=ignore)
    for name in ("__init__.py", "_reference.py"):
        shutil.copy(ROOT / "golden" / name, checkout / "golden" / name)
    shutil.copytree(ROOT / "replays" / "customer_service", checkout / "replays/customer_service")
    shutil.copytree(ROOT / "schema", checkout / "schema")
    (checkout / ".gitignore").write_text(".agentbench/\nreports/\n__pycache__/\n*.duckdb*\n")
    git(checkout, "init", "-q", "-b", "main")
    shas = [commit(checkout, "customer_service suite")]
    (checkout / "NOTES.md").write_text("notes\n")
    shas.append(commit(checkout, "notes on refunds"))
    agent = checkout / SUITE / "agent.py"
    text = agent.read_text()
    assert '"total": 42.5' in text, "the shipped suite changed: update this test's edit"
    agent.write_text(text.replace('"total": 42.5', '"total": 40.5', 1))
    shas.append(commit(checkout, "cheaper order total"))
    (checkout / "NOTES.md").write_text("more notes\n")
    shas.append(commit(checkout, "more notes"))
    return checkout, shas


def evals_in(db: Path) -> int:
    store = TraceStore(db)
    try:
        return int(store.sql("SELECT count(*) FROM evals").rows[0][0])
    finally:
        store.close()


def test_bisect_names_the_commit_its_message_and_the_changed_field(
    repo: tuple[Path, list[str]], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    checkout, shas = repo
    monkeypatch.chdir(checkout)
    db = checkout / ".agentbench" / "traces.duckdb"
    args = ["bisect", "refund-eligible", "--good", shas[0], "--bad", "HEAD", "--suite", SUITE]
    assert main([*args, "--db", str(db)]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert f"  {shas[2]}  cheaper order total" in out
    assert f"compared with the commit before it, {shas[1][:12]}: newly_failing" in out
    assert "first divergence — step 1 (refunds) tool_result_changed" in out
    assert "result.total: 42.5 → 40.5" in out
    assert "4 of 4 commits evaluated (4 run, 0 reused from the store)" in out
    # no worktree is left behind
    assert git(checkout, "worktree", "list").count("\n") == 0

    # the same range again: every commit's eval is in the store now
    before = evals_in(db)
    assert main([*args, "--db", str(db), "--json"]) == 0
    captured = capsys.readouterr()
    found = orjson.loads(captured.out)
    assert found["first"] == shas[2] and found["parent"] == shas[1]
    assert found["change"]["kind"] == "newly_failing"
    assert all(p["reused"] for p in found["probes"])
    assert evals_in(db) == before


def test_bisect_refuses_a_range_where_nothing_changed(
    repo: tuple[Path, list[str]], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    checkout, shas = repo
    monkeypatch.chdir(checkout)
    db = str(checkout / ".agentbench" / "traces.duckdb")
    code = main(
        [
            "bisect",
            "refund-eligible",
            "--good",
            shas[0],
            "--bad",
            shas[1],
            "--suite",
            SUITE,
            "--db",
            db,
        ]
    )
    assert code == 2
    assert "behaves the same at --good" in capsys.readouterr().err
    code = main(
        [
            "bisect",
            "refund-eligible",
            "--good",
            shas[1],
            "--bad",
            shas[0],
            "--suite",
            SUITE,
            "--db",
            db,
        ]
    )
    assert code == 2
    assert "is not an ancestor of --bad" in capsys.readouterr().err
    code = main(["bisect", "refund-eligible", "--good", "nope", "--bad", "HEAD", "--db", db])
    assert code == 2
    assert "--good nope: no such commit, branch or tag in" in capsys.readouterr().err
