"""A large suite's cases are read from their files as a run reaches them: the same cases, in
the same order, with a bounded number held in memory, and a file edited mid-run is named."""

from __future__ import annotations

import asyncio
import gc
import json
import textwrap
import tracemalloc
from pathlib import Path

import pytest

from agentbench.cli import main
from agentbench.errors import UsageError
from agentbench.evals.running.harness import Harness, HarnessOptions
from agentbench.evals.running.shards import Shard
from agentbench.evals.suites import case_files
from agentbench.evals.suites.case_files import CaseBrief, SuiteCases
from agentbench.evals.suites.dataset import load_suite
from agentbench.trace.code_version import anchor
from agentbench.trace.store import TraceStore
from tests.weather_suite import AGENT, SUITE

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

ROOT = Path(__file__).resolve().parent.parent


def case_yaml(first: int, count: int) -> str:
    return "".join(
        textwrap.dedent(
            f"""\
            - id: city-{n:03d}
              input: Weather in city {n}?
              tags: [t{n % 3}]
              expect:
                - output_contains: "{n}"
            """
        )
        for n in range(first, first + count)
    )


@pytest.fixture
def big_suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Six case files of 20 cases (one JSONL), with memory for only 30 cases at a time."""
    monkeypatch.setattr(case_files, "KEPT_CASES", 30)
    folder = tmp_path / "golden" / "mini"
    (folder / "cases").mkdir(parents=True)
    (folder / "agent.py").write_text(AGENT)
    (folder / "suite.yaml").write_text(SUITE)
    for part in range(5):
        (folder / "cases" / f"part-{part}.yaml").write_text(case_yaml(part * 20, 20))
    rows = [{"id": f"row-{n}", "input": f"Row {n}?", "tags": ["rows"]} for n in range(20)]
    (folder / "cases" / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def kept(cases: SuiteCases) -> int:
    return sum(len(c) for c in cases._kept.values())


def test_the_cases_read_back_are_the_cases_loaded(big_suite: Path) -> None:
    suite = load_suite(big_suite)
    cases = suite.cases
    assert isinstance(cases, SuiteCases) and len(cases) == 120
    assert kept(cases) <= 30 + 20  # the last files the loader read, one over the limit at most
    ids = [c.id for c in cases]
    assert ids == [f"city-{n:03d}" for n in range(100)] + [f"row-{n}" for n in range(20)]
    assert kept(cases) <= 50
    # Read back, each case is the one checked at load: sources, expectations and all.
    first = cases[0]
    assert first.source == (big_suite / "cases" / "part-0.yaml", 1)
    assert first.expect[0].params == "0" and first.expect[0].line == 5
    assert cases[-1].id == "row-19" and cases[-1].source[1] == 20
    assert [c.id for c in cases[38:42]] == ["city-038", "city-039", "city-040", "city-041"]
    assert suite.case("city-077").input == "Weather in city 77?"
    with pytest.raises(KeyError, match="no case 'nowhere'"):
        suite.case("nowhere")
    # Briefs: all that planning keeps of every case, each pointing back at its case.
    briefs = cases.briefs()
    assert briefs[45] == CaseBrief("city-045", ("t0",), None, None, 45)
    assert all(cases[b.index].id == b.id for b in briefs[::7])


def test_a_case_file_edited_after_loading_is_named(big_suite: Path) -> None:
    suite = load_suite(big_suite)
    list(suite.cases)  # the first files are no longer kept
    part = big_suite / "cases" / "part-0.yaml"
    part.write_text(part.read_text().replace("city 0?", "city zero?"))
    with pytest.raises(UsageError, match=r"part-0\.yaml: changed since the suite was loaded"):
        list(suite.cases)
    part.write_text("- not: a case\n")  # now not even valid: still named as changed
    with pytest.raises(UsageError, match=r"part-0\.yaml: changed since"):
        suite.cases[0]


def test_a_run_plans_briefs_and_runs_every_case_once(
    big_suite: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    anchor(big_suite.parents[1])
    suite = load_suite(big_suite)
    harness = Harness(None, HarnessOptions(filters=["tag:t1", "row-1*"]))
    planned = harness.planned([suite])
    assert all(isinstance(case, CaseBrief) for _, case, _ in planned)
    expected = [f"city-{n:03d}" for n in range(100) if n % 3 == 1]
    expected += ["row-1", *[f"row-1{n}" for n in range(10)]]
    assert [case.id for _, case, _ in planned] == expected
    # The shards of a planned eval are the same whether cases are briefs or cases.
    sharded = Harness(None, HarnessOptions(shard=Shard.parse("2/3"))).planned([suite])
    whole = [
        (s, suite.case(b.id), t) for s, b, t in Harness(None, HarnessOptions()).planned([suite])
    ]
    assert [b.id for _, b, _ in sharded] == [
        c.id
        for _, c, _ in Shard.parse("2/3").pick(
            whole,
            name=lambda item: f"{item[0].name}/{item[1].id}/{item[2]}",
            weight=lambda item: 1,
        )
    ]
    # Queued for running, each trial gets its whole case, read from its file then.
    store = TraceStore(tmp_path / "t.duckdb")
    runner = Harness(store, HarnessOptions(filters=["tag:rows"]))
    seen: list[str] = []

    async def fake_trial(suite, agent, case, trial=1, *, eval_id=None):  # type: ignore[no-untyped-def]
        seen.append(type(case).__name__ + ":" + case.id)
        return await Harness.run_trial(runner, suite, agent, case, trial, eval_id=eval_id)

    monkeypatch.setattr(runner, "run_trial", fake_trial)
    run = asyncio.run(runner.run([suite]))
    assert sorted(seen) == sorted(f"Case:row-{n}" for n in range(20))
    assert len(run.outcomes) == 20


def test_a_streamed_suite_runs_through_the_cli_like_a_small_one(
    big_suite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # No cassettes were recorded: every case is an infrastructure error, reported by file
    # and line — read back from the case files as the run reached them.
    code = main(
        ["run", str(big_suite), "--no-report", "--json", "--db", str(tmp_path / "x.duckdb")]
    )
    document = json.loads(capsys.readouterr().out)
    assert code == 3
    assert document["summary"]["trials"] == 120 and document["summary"]["errors"] == 120
    sources = {r["case_id"]: r["source"] for r in document["results"]}
    assert sources["city-041"] == f"{big_suite / 'cases' / 'part-2.yaml'}:6"
    assert sources["row-7"] == f"{big_suite / 'cases' / 'rows.jsonl'}:8"


def _retained_after_run(folder: Path, cases: int, tmp_path: Path) -> int:
    """Python memory an eval of `cases` (unrecorded: each an error trial) leaves held while
    its result is kept, suite loading included."""
    for old in (folder / "cases").glob("*.yaml"):
        old.unlink()
    for first in range(0, cases, 50):  # files of 50 cases: what a file holds is kept whole
        (folder / "cases" / f"part-{first:05d}.yaml").write_text(case_yaml(first, 50))
    tmp_path.mkdir(exist_ok=True)
    store = TraceStore(tmp_path / f"s{cases}.duckdb")
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        suite = load_suite(folder)
        run = asyncio.run(Harness(store, HarnessOptions()).run([suite]))
        assert len(run.outcomes) == cases and run.summary.errors == cases
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
        store.close()


def test_the_driver_holds_a_few_hundred_bytes_a_case(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(case_files, "KEPT_CASES", 50)
    folder = tmp_path / "golden" / "mini"
    (folder / "cases").mkdir(parents=True)
    (folder / "agent.py").write_text(AGENT)
    (folder / "suite.yaml").write_text(SUITE)
    anchor(tmp_path)
    # First a run as large as the largest measured: the interpreter's own tables (interned
    # names, caches) grow once, whichever run happens to cross their sizes.
    _retained_after_run(folder, 1000, tmp_path / "warm")
    small = _retained_after_run(folder, 100, tmp_path)
    large = _retained_after_run(folder, 1000, tmp_path)
    per_case = (large - small) / 900
    # A case's brief and its outcome's place in the spool; its definition (~4.5 KB) and its
    # scored outcome (~1.5 KB) are on disk.
    assert per_case < 800, f"{per_case:.0f} bytes a case"


def test_a_plan_is_made_once_for_the_same_suites(
    big_suite: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `run` counts the trials (its progress bar) before running them: a shard's plan reads
    # every cassette for its weights, which must not happen twice.
    from agentbench.evals.running import harness as harness_module

    reads: list[Path] = []
    monkeypatch.setattr(harness_module, "recorded_calls", lambda path: reads.append(path) or 1)
    suite = load_suite(big_suite)
    harness = Harness(None, HarnessOptions(shard=Shard.parse("1/2")))
    first = harness.planned([suite])
    assert harness.planned_trials([suite]) == len(first)
    assert harness.planned([suite]) is first and len(reads) == 120
    other = load_suite(big_suite)  # other suites: planned again
    assert harness.planned([other]) is not first and len(reads) == 240
