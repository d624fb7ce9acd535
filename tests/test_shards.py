"""`run --shard K/N`, `merge` and `gate`: a CI job matrix makes one eval, and gates it.

The assignment is checked as a property (every trial in exactly one shard, arcs of equal
weight, stable when a case is added); the journey runs through the real CLI on a git
checkout of the shipped multi-agent suite: a baseline eval, then a regression (a tool's
result changed) run as three shards into three stores, merged into the baseline's store
and gated — the regression named with its file and line, exactly as an unsharded run names
it — and a lake written with `--results parquet://` merged back the same.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentbench.errors import UsageError
from agentbench.evals.running.shards import Shard, assign, recorded_calls
from tests.test_journeys import ROOT, _generated, agentbench, apply, edit, git

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

SUITE = "customer_service"
CHANGED = (edit('"total": 42.5', '"total": 40.5'),)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0/4", "between 1 and N"),
        ("5/4", "between 1 and N"),
        ("2", "expected K/N"),
        ("a/b", "expected K/N"),
        ("1/0", "between 1 and N"),
    ],
)
def test_bad_shards_are_refused_by_name(text: str, expected: str) -> None:
    with pytest.raises(UsageError, match=expected):
        Shard.parse(text)


WEIGHTS = st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=300)


@settings(max_examples=60, deadline=None)
@given(weights=WEIGHTS, count=st.integers(min_value=1, max_value=9), extra=st.integers(1, 40))
def test_assignment_is_balanced_and_stable(weights: list[int], count: int, extra: int) -> None:
    names = [f"suite/case-{i}/1" for i in range(len(weights))]
    parts = assign(names, weights, count)
    assert all(1 <= part <= count for part in parts)
    total, heaviest = sum(weights), max(weights)
    for shard in range(1, count + 1):
        held = sum(w for w, p in zip(weights, parts, strict=True) if p == shard)
        assert abs(held - total / count) <= heaviest, (shard, held, total / count)
    assert assign(list(reversed(names)), list(reversed(weights)), count) == parts[::-1]
    # A case added: it moves, and at most the trials within its weight of each cut do.
    grown = assign([*names, "suite/new-case/1"], [*weights, extra], count)
    moved = sum(a != b for a, b in zip(parts, grown, strict=False))
    assert moved <= (count - 1) * (extra + 1)


def test_a_cassette_weighs_its_recorded_calls(tmp_path: Path) -> None:
    cassette = next((ROOT / "replays" / SUITE).glob("*.yaml"))
    text = cassette.read_text()
    assert recorded_calls(cassette) == text.count("\n- request:") + text.startswith("- request:")
    assert recorded_calls(tmp_path / "missing.yaml") == 1


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A committed checkout of the multi-agent suite with one baseline eval in its store."""
    repo = tmp_path_factory.mktemp("shards") / "repo"
    shutil.copytree(ROOT / "golden" / SUITE, repo / "golden" / SUITE, ignore=_generated)
    for name in ("__init__.py", "_reference.py"):
        shutil.copy(ROOT / "golden" / name, repo / "golden" / name)
    shutil.copytree(ROOT / "replays" / SUITE, repo / "replays" / SUITE)
    shutil.copytree(ROOT / "schema", repo / "schema")
    (repo / ".gitignore").write_text(".agentbench/\nreports/\n__pycache__/\n*.duckdb\nlake/\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "suite")
    first = agentbench(repo, "run", f"golden/{SUITE}", "--json", "--no-report")
    assert first.code == 0, first.err + first.out
    return repo, first.json()["eval_id"]


def test_shards_of_a_regression_merge_into_one_gated_eval(checkout: tuple[Path, str]) -> None:
    repo, baseline = checkout
    work = repo.parent / "regressed"
    shutil.copytree(repo, work)
    apply(work, SUITE, CHANGED)
    whole = agentbench(
        work, "run", f"golden/{SUITE}", "--json", "--no-report", "--db", "whole.duckdb"
    )
    shards = []
    for k in (1, 2, 3):
        part = agentbench(
            work,
            "run",
            f"golden/{SUITE}",
            "--shard",
            f"{k}/3",
            "--json",
            "--no-report",
            "--db",
            f"shard{k}.duckdb",
        )
        assert part.code in (0, 1), part.err
        shards.append(part.json())
    eval_ids = {s["eval_id"] for s in shards}
    assert len(eval_ids) == 1  # the jobs of one run agree on the eval, uncoordinated
    ran = [(r["suite"], r["case_id"], r["trial"]) for s in shards for r in s["results"]]
    assert sorted(ran) == sorted(
        (r["suite"], r["case_id"], r["trial"]) for r in whole.json()["results"]
    )
    merged = agentbench(
        work,
        "merge",
        "shard1.duckdb",
        "shard2.duckdb",
        "shard3.duckdb",
        "--into",
        ".agentbench/traces.duckdb",
    )
    assert merged.code == 0, merged.err
    assert "shards 1/3, 2/3, 3/3" in merged.out and "missing" not in merged.out
    again = agentbench(work, "merge", "shard2.duckdb", "--into", ".agentbench/traces.duckdb")
    assert "nothing new" in again.out  # merged twice, stored once
    (eval_id,) = eval_ids
    gated = agentbench(
        work,
        "gate",
        eval_id,
        "--baseline",
        baseline,
        "--junit",
        "junit.xml",
        "--summary-md",
        "summary.md",
        "--no-report",
    )
    direct = agentbench(work, "run", f"golden/{SUITE}", "--baseline", baseline, "--no-report")
    assert gated.code == direct.code == 1, gated.out + gated.err
    regressed = [
        line for line in gated.out.splitlines() if line.startswith("  - customer_service/")
    ]
    assert regressed and regressed == [
        line for line in direct.out.splitlines() if line.startswith("  - customer_service/")
    ]
    assert "tool_result_changed" in gated.out
    assert "customer_service" in (work / "summary.md").read_text()
    # every trial, and the gate's own testcase, failing as the command exits
    junit = (work / "junit.xml").read_text()
    assert junit.count("<testcase") == len(ran) + 1
    assert '<failure message="gate failed (exit 1): customer_service/' in junit
    report = agentbench(work, "report", eval_id)
    assert report.code == 0, report.err
    diff = agentbench(work, "diff", baseline, eval_id)
    assert diff.code in (0, 1) and "customer_service" in diff.out, diff.err


def test_a_missing_shard_fails_the_gate_by_name(checkout: tuple[Path, str]) -> None:
    repo, _ = checkout
    work = repo.parent / "partial"
    shutil.copytree(repo, work)
    for k in (1, 3):
        agentbench(
            work,
            "run",
            f"golden/{SUITE}",
            "--shard",
            f"{k}/3",
            "--no-report",
            "--db",
            f"s{k}.duckdb",
        )
    merged = agentbench(work, "merge", "s1.duckdb", "s3.duckdb", "--into", "m.duckdb")
    assert "missing 2/3" in merged.out
    gated = agentbench(work, "gate", "latest", "--db", "m.duckdb", "--no-report")
    assert gated.code == 1 and "gate: FAILED" in gated.out
    assert "The eval is partial: it lacks shard(s) 2/3 (it holds 1/3, 3/3)" in gated.out


def test_a_parquet_lake_of_shards_merges_back(checkout: tuple[Path, str]) -> None:
    repo, _ = checkout
    work = repo.parent / "lake"
    shutil.copytree(repo, work)
    for k in (1, 2):
        done = agentbench(
            work,
            "run",
            f"golden/{SUITE}",
            "--shard",
            f"{k}/2",
            "--no-report",
            "--db",
            f"s{k}.duckdb",
            "--results",
            "parquet://lake",
            "--eval-id",
            "eval_nightly",
        )
        assert done.code == 0, done.err
    assert len(list((work / "lake").iterdir())) == 1  # one eval: its two shards, one folder
    # The lake is plain Parquet, read as tables by DuckDB (or Spark, Trino).
    (counted,) = duckdb.sql(
        f"SELECT count(*) FROM read_parquet('{work}/lake/*/*/results/*/*.parquet', "
        "hive_partitioning = true)"
    ).fetchall()
    assert counted[0] > 0
    from_lake = agentbench(work, "merge", "lake", "--into", "from_lake.duckdb")
    from_stores = agentbench(
        work, "merge", "s1.duckdb", "s2.duckdb", "--into", "from_stores.duckdb"
    )
    assert from_lake.code == from_stores.code == 0, from_lake.err + from_stores.err
    query = "SELECT suite, case_id, trial, status FROM results ORDER BY ALL"
    lake_rows = agentbench(
        work, "traces", "sql", query, "--db", "from_lake.duckdb", "--format", "csv"
    ).out
    store_rows = agentbench(
        work, "traces", "sql", query, "--db", "from_stores.duckdb", "--format", "csv"
    ).out
    assert lake_rows == store_rows and lake_rows.count("customer_service") > 5


def test_a_store_named_like_the_merge_source_merges(checkout: tuple[Path, str]) -> None:
    repo, _ = checkout
    work = repo.parent / "names"
    shutil.copytree(repo, work)
    for k in (1, 2):
        agentbench(
            work,
            "run",
            f"golden/{SUITE}",
            "--shard",
            f"{k}/2",
            "--no-report",
            "--db",
            f"merged{k}.duckdb",
        )
    # DuckDB names an attached file after its stem: the target's name must not matter.
    done = agentbench(work, "merge", "merged1.duckdb", "merged2.duckdb", "--into", "merged.duckdb")
    assert done.code == 0, done.err
    assert "shards 1/2, 2/2" in done.out
