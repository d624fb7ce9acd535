"""Baseline resolution: EVAL_ID, latest, git:REF and the merge-base default, in a tmp git repo."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import pytest

from agentbench.errors import UsageError
from agentbench.evals.comparing.baseline import find_baseline, resolve_baseline
from agentbench.trace.store import TraceStore

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def commit(repo: Path, message: str) -> str:
    (repo / "file.txt").write_text(message)
    git(repo, "add", "file.txt")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> dict[str, object]:
    """main: a0 -> a1; feature (checked out): a1 -> b."""
    folder = tmp_path / "repo"
    folder.mkdir()
    git(folder, "init", "-q", "-b", "main")
    a0 = commit(folder, "a0")
    a1 = commit(folder, "a1")
    git(folder, "checkout", "-q", "-b", "feature")
    b = commit(folder, "b")
    return {"path": folder, "a0": a0, "a1": a1, "b": b}


def add_eval(
    store: TraceStore,
    eval_id: str,
    version: str | None,
    minutes: int,
    *,
    status: str = "finished",
    suite: str = "sre,brakes",
    cases: dict[str, int] | None = None,
    filters: list[str] | None = None,
    shards: list[str] | None = None,
    suite_errors: list[str] | None = None,
    config: dict[str, object] | None = None,
    summary: dict[str, object] | None = None,
) -> None:
    """An eval row; with `cases` (per suite), the summary and config a run stores (`config`
    and `summary` add to them)."""
    config_text = summary_text = None
    if cases is not None:
        kept = {"filters": filters or [], "shards": shards, **(config or {})}
        config_text = orjson.dumps(kept).decode()
        by_suite = {name: {"cases": count} for name, count in cases.items()}
        numbers = {"by_suite": by_suite, "suite_errors": suite_errors or [], **(summary or {})}
        summary_text = orjson.dumps(numbers).decode()
    with store.writing() as conn:
        conn.execute(
            "INSERT INTO evals (eval_id, suite, started_at, status, code_version, config, summary) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                *(eval_id, suite, T0 + timedelta(minutes=minutes), status, version),
                *(config_text, summary_text),
            ],
        )


@pytest.fixture
def store(tmp_path: Path, repo: dict[str, object]) -> TraceStore:
    store = TraceStore(tmp_path / "evals.duckdb")
    a0, a1, b = repo["a0"], repo["a1"], repo["b"]
    add_eval(store, "eval_a0", a0, 1)
    add_eval(store, "eval_a1_dirty", f"{a1}+dirty", 3)
    add_eval(store, "eval_a1_clean", a1, 2)
    add_eval(store, "eval_other_suite", a1, 4, suite="sql_analyst")
    add_eval(store, "eval_b_running", b, 5, status="running")
    add_eval(store, "eval_current", f"{b}+dirty", 6)
    return store


def test_explicit_eval_id(store: TraceStore, repo) -> None:
    assert resolve_baseline(store, "eval_a0", current_eval_id="eval_current") == "eval_a0"
    with pytest.raises(UsageError, match="'eval_nope': no such eval"):
        resolve_baseline(store, "eval_nope", current_eval_id="eval_current")
    with pytest.raises(UsageError, match="that is the current eval"):
        resolve_baseline(store, "eval_current", current_eval_id="eval_current")


def test_latest_is_the_newest_finished_eval_of_the_same_suites(store: TraceStore) -> None:
    # eval_b_running is newer but unfinished; eval_other_suite ran other suites
    assert resolve_baseline(store, "latest", current_eval_id="eval_current") == "eval_a1_dirty"
    empty = TraceStore(store.path.parent / "empty.duckdb")
    found = find_baseline(empty, "latest", current_eval_id="eval_x")
    assert found.eval_id is None and found.note.startswith("no baseline")


def test_git_ref_prefers_a_clean_eval_of_that_commit(store: TraceStore, repo):
    path = repo["path"]
    found = find_baseline(store, "git:main", current_eval_id="eval_current", repo=path)
    # a newer dirty eval of the same commit is not that commit's code
    assert found.eval_id == "eval_a1_clean"
    assert "a clean tree" in found.note
    assert (
        resolve_baseline(store, "git:HEAD~2", current_eval_id="eval_current", repo=path)
        == "eval_a0"
    )
    # a real commit that was never evaluated (finished): no baseline, and a note saying so
    found = find_baseline(store, "git:feature", current_eval_id="eval_current", repo=path)
    assert found.eval_id is None and f"no finished eval of feature ({repo['b'][:12]})" in found.note
    with pytest.raises(UsageError, match="git:no-such-branch: no such commit"):
        resolve_baseline(store, "git:no-such-branch", current_eval_id="eval_current", repo=path)


def test_default_is_the_clean_eval_of_the_merge_base(store: TraceStore, repo) -> None:
    found = find_baseline(store, None, current_eval_id="eval_current", repo=repo["path"])
    assert found.eval_id == "eval_a1_clean"  # clean beats a newer dirty eval of the same commit
    assert f"merge-base with main {repo['a1'][:12]}" in found.note


def test_default_walks_back_to_an_evaluated_ancestor(tmp_path: Path, repo) -> None:
    store = TraceStore(tmp_path / "walk.duckdb")
    add_eval(store, "eval_a0", repo["a0"], 1)
    add_eval(store, "eval_current", repo["b"], 2)
    found = find_baseline(store, None, current_eval_id="eval_current", repo=repo["path"])
    assert found.eval_id == "eval_a0" and "1 commit(s) before it" in found.note


def test_default_prefers_origin_main(tmp_path: Path, repo, store: TraceStore) -> None:
    path = repo["path"]
    git(path, "update-ref", "refs/remotes/origin/main", repo["a0"])
    found = find_baseline(store, None, current_eval_id="eval_current", repo=path)
    assert found.eval_id == "eval_a0" and "merge-base with origin/main" in found.note


def test_default_without_git_or_without_main(tmp_path: Path, repo, store: TraceStore) -> None:
    plain = tmp_path / "not-a-repo"
    plain.mkdir()
    found = find_baseline(store, None, current_eval_id="eval_current", repo=plain)
    assert found.eval_id is None and "not a git checkout" in found.note
    with pytest.raises(UsageError, match="not a git checkout"):
        resolve_baseline(store, "git:main", current_eval_id="eval_current", repo=plain)
    path = repo["path"]
    git(path, "branch", "-q", "-m", "main", "trunk")  # no main: HEAD itself, then its ancestors
    found = find_baseline(store, None, current_eval_id="eval_current", repo=path)
    assert found.eval_id == "eval_a1_clean" and "(HEAD " in found.note


def test_a_dirty_eval_is_used_only_when_no_clean_one_exists(tmp_path: Path, repo) -> None:
    store = TraceStore(tmp_path / "dirty.duckdb")
    add_eval(store, "eval_a1_dirty", f"{repo['a1']}+dirty", 1)
    add_eval(store, "eval_current", repo["b"], 2)
    found = find_baseline(store, "git:main", current_eval_id="eval_current", repo=repo["path"])
    assert found.eval_id == "eval_a1_dirty"
    assert "uncommitted changes were evaluated" in found.note


def test_default_walks_past_a_dirty_eval_to_a_clean_ancestor(tmp_path: Path, repo) -> None:
    # The regression was evaluated uncommitted on a1 (dirty), then committed: comparing with
    # that dirty eval would compare the change with itself.
    store = TraceStore(tmp_path / "walk-clean.duckdb")
    add_eval(store, "eval_a0", repo["a0"], 1)
    add_eval(store, "eval_a1_dirty", f"{repo['a1']}+dirty", 2)
    add_eval(store, "eval_current", repo["b"], 3)
    found = find_baseline(store, None, current_eval_id="eval_current", repo=repo["path"])
    assert found.eval_id == "eval_a0"
    assert "1 commit(s) before it" in found.note and "a clean tree" in found.note


WHOLE = {"sre": 14, "brakes": 8}


@pytest.fixture
def partial_store(tmp_path: Path, repo) -> TraceStore:
    """On a1 (the merge-base): a whole eval, then newer partial ones of fewer cases; the
    current eval, on b, is whole."""
    store = TraceStore(tmp_path / "partial.duckdb")
    a1 = repo["a1"]
    add_eval(store, "eval_whole", a1, 1, cases=WHOLE)
    add_eval(store, "eval_shard", a1, 2, cases={"sre": 7, "brakes": 4}, shards=["1/2"])
    add_eval(store, "eval_broken", a1, 3, cases={"sre": 14}, suite_errors=["brakes: no agent"])
    add_eval(store, "eval_one", a1, 4, suite="sre", cases={"sre": 1}, filters=["status-prod-eu"])
    add_eval(store, "eval_current", repo["b"], 5, cases={"sre": 15, "brakes": 8})
    return store


@pytest.mark.parametrize("spec", [None, "latest", "git:main"])
def test_an_automatic_baseline_is_never_a_smaller_part_of_the_work(
    partial_store: TraceStore, repo, spec: str | None
) -> None:
    found = find_baseline(partial_store, spec, current_eval_id="eval_current", repo=repo["path"])
    # the whole eval, though one case fewer than now (a case was added): still the baseline
    assert found.eval_id == "eval_whole"
    assert (
        "passed over eval_one (it ran 1 of this eval's 2 suites, not brakes), and 2 more eval(s)"
    ) in found.note
    assert "name one with --baseline EVAL_ID to use it anyway" in found.note


def test_no_whole_eval_means_no_baseline_and_says_what_was_passed_over(
    tmp_path: Path, repo
) -> None:
    store = TraceStore(tmp_path / "only-partial.duckdb")
    add_eval(store, "eval_shard", repo["a1"], 1, cases={"sre": 7}, shards=["2/2"])
    add_eval(store, "eval_current", repo["b"], 2, cases=WHOLE)
    found = find_baseline(store, None, current_eval_id="eval_current", repo=repo["path"])
    assert found.eval_id is None and found.note.startswith("no baseline: no finished eval")
    assert "passed over eval_shard (shards 2/2 only (lacking 1/2): 7 case(s)" in found.note


def test_a_partial_eval_that_holds_enough_is_a_baseline(tmp_path: Path, repo) -> None:
    store = TraceStore(tmp_path / "enough.duckdb")
    add_eval(store, "eval_smoke", repo["a1"], 1, cases={"sre": 5}, filters=["tag:smoke"])
    add_eval(store, "eval_one", repo["b"], 2, cases={"sre": 1}, filters=["status-prod-eu"])
    # a filtered eval of more cases than a one-case run
    found = find_baseline(store, "latest", current_eval_id="eval_one")
    assert found.eval_id == "eval_smoke" and "passed over" not in found.note
    # the same --filter is like for like, even when a case was added since
    add_eval(store, "eval_smoke_now", repo["b"], 3, cases={"sre": 6}, filters=["tag:smoke"])
    found = find_baseline(store, "latest", current_eval_id="eval_smoke_now")
    assert found.eval_id == "eval_smoke"  # eval_one (another filter, 1 case) is passed over
    # a merged eval holding every shard is whole
    add_eval(store, "eval_merged", repo["a1"], 4, cases={"sre": 6}, shards=["1/2", "2/2"])
    found = find_baseline(store, "latest", current_eval_id="eval_smoke_now")
    assert found.eval_id == "eval_merged"


def test_an_explicit_partial_baseline_is_used_with_a_note(partial_store: TraceStore) -> None:
    found = find_baseline(partial_store, "eval_one", current_eval_id="eval_current")
    assert found.eval_id == "eval_one"
    assert found.note == (
        "baseline eval_one (named on the command line); it ran 1 of this eval's 2 suites, not "
        "brakes; it is partial — filtered (--filter "
        "status-prod-eu), 1 case(s) against this eval's 15: only the cases both evals ran are "
        "compared, and the pass rates are over those"
    )


def test_an_unfinished_eval_or_one_of_the_other_mode_is_never_found(tmp_path: Path, repo) -> None:
    store = TraceStore(tmp_path / "modes.duckdb")
    a1, b = repo["a1"], repo["b"]
    sre = {"sre": 14}
    add_eval(store, "eval_replayed", a1, 1, suite="sre", cases=sre)
    # newer, of the same commit: a killed eval, a live one (an outage errs every case), and
    # one that finished without trials it planned
    add_eval(store, "eval_killed", a1, 2, suite="sre", status="running", cases={"sre": 5})
    add_eval(store, "eval_live", a1, 3, suite="sre", cases=sre, config={"live": True},
             summary={"trials": 14, "errors": 14})  # fmt: skip
    add_eval(store, "eval_lost", a1, 4, suite="sre", cases={"sre": 9},
             config={"planned_trials": {"all": 14}}, summary={"trials": 9})  # fmt: skip
    add_eval(store, "eval_now", b, 5, suite="sre", cases=sre)
    for spec in (None, "latest", "git:main"):
        found = find_baseline(store, spec, current_eval_id="eval_now", repo=repo["path"])
        assert found.eval_id == "eval_replayed", spec
        assert (
            "passed over eval_lost (5 of its 14 planned trials have no result: 9 case(s) "
            "against this eval's 14), and 2 more eval(s)"
        ) in found.note
    named = find_baseline(store, "eval_live", current_eval_id="eval_now")
    assert "(named on the command line); a live eval, and this one is replayed" in named.note
    # a live run is judged against live evals only, and is told of what could not run there
    add_eval(store, "eval_live_now", b, 6, suite="sre", cases=sre, config={"live": True})
    found = find_baseline(store, "latest", current_eval_id="eval_live_now")
    assert found.eval_id == "eval_live"
    assert "; 14 of its trials could not run: they excuse no case that fails now" in found.note
    assert "passed over eval_now (a replayed eval, and this one is live)" in found.note
    # named, it is used as asked, and the note says what it is
    named = find_baseline(store, "eval_killed", current_eval_id="eval_now")
    assert named.eval_id == "eval_killed" and "it did not finish" in named.note


def test_an_eval_that_left_out_a_suite_its_commit_has_is_not_the_baseline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "suites-repo"
    folder.mkdir()
    monkeypatch.chdir(folder)  # suites are given as the command line had them: relative
    git(folder, "init", "-q", "-b", "main")
    (folder / "golden" / "sre").mkdir(parents=True)
    (folder / "golden" / "sre" / "suite.yaml").write_text("name: sre\n")
    git(folder, "add", "golden")
    c1 = commit(folder, "sre")
    (folder / "golden" / "cs").mkdir()
    (folder / "golden" / "cs" / "suite.yaml").write_text("name: cs\n")
    git(folder, "add", "golden")
    c2 = commit(folder, "cs added")
    git(folder, "checkout", "-q", "-b", "feature")
    (folder / "golden" / "new").mkdir()  # a suite this branch adds, not committed yet
    (folder / "golden" / "new" / "suite.yaml").write_text("name: new\n")
    paths = {name: f"golden/{name}" for name in ("sre", "cs", "new")}
    store = TraceStore(tmp_path / "suites.duckdb")
    add_eval(store, "eval_c1", c1, 1, suite="sre", cases={"sre": 14})
    add_eval(store, "eval_c2_one", c2, 3, suite="sre", cases={"sre": 14})
    add_eval(store, "eval_now", f"{c2}+dirty", 4, suite="sre,cs,new",
             cases={"sre": 14, "cs": 10, "new": 2}, config={"suites": paths})  # fmt: skip
    # c2 has cs and was evaluated only in part: its ancestor c1, which had no cs, is next
    found = find_baseline(store, None, current_eval_id="eval_now", repo=folder)
    assert found.eval_id == "eval_c1" and "1 commit(s) before it" in found.note
    assert "passed over eval_c2_one (it ran 1 of this eval's 3 suites, not cs)" in found.note
    # a whole eval of c2 is the baseline, though it has no `new`: c2 had none
    add_eval(store, "eval_c2_whole", c2, 2, suite="sre,cs", cases={"sre": 14, "cs": 10})
    found = find_baseline(store, None, current_eval_id="eval_now", repo=folder)
    assert found.eval_id == "eval_c2_whole"
    assert "passed over eval_c2_one (it ran 1 of this eval's 3 suites, not cs)" in found.note
