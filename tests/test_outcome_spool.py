"""An eval's outcomes spooled to disk: read back whole, in order, as often as needed — and the
driver holds almost nothing per trial."""

from __future__ import annotations

import asyncio
import os
import random
import tempfile
import tracemalloc
from pathlib import Path

import pytest

from agentbench.evals.comparing.stats import TrialOutcome, summarize
from agentbench.evals.running.harness import EvalRun, Harness, HarnessOptions
from agentbench.evals.running.outcome_spool import OutcomeSpool
from agentbench.evals.storage.results_store import iter_stored_outcomes, stored_outcomes
from agentbench.evals.suites.dataset import discover
from agentbench.trace.code_version import anchor
from agentbench.trace.store import TraceStore

ROOT = Path(__file__).resolve().parent.parent


def outcome(suite: str, case: str, trial: int, **fields: object) -> TrialOutcome:
    values: dict[str, object] = {"status": "passed", "score": 1.0}
    values.update(fields)
    return TrialOutcome(suite=suite, case_id=case, trial=trial, **values)  # type: ignore[arg-type]


def generated(count: int, seed: int = 7) -> list[TrialOutcome]:
    rng = random.Random(seed)
    made = []
    for index in range(count):
        status = rng.choice(["passed", "failed", "error", "xfailed", "xpassed", "skipped"])
        made.append(
            outcome(
                rng.choice(["alpha", "beta"]),
                f"case-{rng.randint(0, count // 3):04d}",
                index % 3 + 1,
                status=status,
                score=rng.random(),
                scores=[
                    {"name": "output_contains", "value": 0.0, "passed": False, "reason": "é ✓"}
                ],
                duration_ms=rng.random() * 1000,
                tokens=rng.randint(0, 900),
                cost_usd=rng.choice([None, rng.random()]),
                drifts=[{"call": 1, "changes": [{"path": "messages[0]", "before": "a"}]}],
                diverged_at={"step": 2, "cause": "tool_result_changed"} if index % 5 else None,
                tags=["t"],
                source=f"cases/x.yaml:{index}",
            )
        )
    return made


def key(o: TrialOutcome) -> tuple[str, str, int]:
    return (o.suite, o.case_id, o.trial)


def test_outcomes_come_back_whole_and_sorted_however_they_finished() -> None:
    made = generated(300)
    spool = OutcomeSpool()
    for item in made:
        spool.append(item)
    expected = sorted(made, key=key)
    assert len(spool) == 300 and spool
    assert list(spool) == expected  # every field, in (suite, case, trial) order
    assert list(spool) == expected  # again: a spool is read as often as outputs need
    assert spool[0] == expected[0] and spool[-1] == expected[-1]
    assert spool[10:13] == expected[10:13]
    # Two readers at once, interleaved, each see the whole sequence.
    pairs = list(zip(spool, spool, strict=True))
    assert all(a == b for a, b in pairs)
    # Appending after a read (resumed trials first, then new ones) re-sorts.
    spool.append(outcome("aaa", "first", 1))
    assert next(iter(spool)) == outcome("aaa", "first", 1)


def test_a_sealed_spool_takes_nothing_more_and_an_empty_one_reads_empty() -> None:
    spool = OutcomeSpool()
    assert list(spool) == [] and not spool and len(spool) == 0
    spool.append(outcome("s", "c", 1))
    spool.seal()
    with pytest.raises(ValueError, match="complete"):
        spool.append(outcome("s", "c", 2))


def test_the_spool_leaves_no_file_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A temporary folder of this test's own: other tests' spools (other workers) come and go.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    before = set(os.listdir(tempfile.gettempdir()))
    spool = OutcomeSpool()
    spool.extend(generated(20))
    after = set(os.listdir(tempfile.gettempdir()))
    assert not [name for name in after - before if "agentbench-outcomes" in name]
    spool.close()
    assert list(spool) == []


def test_the_spool_keeps_a_small_fixed_amount_per_trial_in_memory() -> None:
    # Each outcome here carries ~3 KB of reasons and drifts; the spool keeps its key and its
    # place in the file.
    big = "reason " * 400
    made = [
        outcome("suite", f"case-{i:05d}", 1, scores=[{"name": "x", "reason": big}])
        for i in range(2000)
    ]
    tracemalloc.start()
    try:
        spool = OutcomeSpool()
        before = tracemalloc.get_traced_memory()[0]
        for item in made:
            spool.append(item)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held / len(made) < 300, f"{held / len(made):.0f} bytes a trial"
    assert list(spool)[1999].scores[0]["reason"] == big


def test_summaries_are_made_in_one_pass_over_a_stream() -> None:
    made = generated(400, seed=3)
    once = iter(made)  # a generator can be read once only
    assert summarize(once) == summarize(list(made))
    numbers = summarize(made).by_suite
    for suite, counts in numbers.items():
        mine = [o for o in made if o.suite == suite]
        assert counts["cases"] == len({o.case_id for o in mine})
        assert counts["failed"] == sum(o.status == "failed" for o in mine)
        assert counts["errors"] == sum(o.status == "error" for o in mine)
        assert counts["expected"] == sum(o.status in ("xfailed", "xpassed") for o in mine)
        assert counts["skipped"] == sum(o.status == "skipped" for o in mine)


def test_an_eval_run_summarizes_a_sealed_spool_once() -> None:
    spool = OutcomeSpool()
    spool.extend(generated(30))
    run = EvalRun("eval_x", spool)
    first = run.summary
    spool.seal()
    assert run.summary == first
    assert run.summary is run.summary  # kept once complete
    listed = EvalRun("eval_y", list(generated(5)))
    assert listed.summary is not listed.summary  # a list may still change


def test_a_harness_eval_reads_back_the_same_from_its_spool_and_from_the_store(
    tmp_path: Path,
) -> None:
    found = discover([ROOT / "golden" / "customer_service", ROOT / "golden" / "sre"])
    assert found.ok
    anchor(ROOT)
    store = TraceStore(tmp_path / "evals.duckdb")
    run = asyncio.run(Harness(store, HarnessOptions()).run(found.suites))
    store.flush()
    spooled = list(run.outcomes)
    assert isinstance(run.outcomes, OutcomeSpool) and run.outcomes.sealed
    assert spooled == sorted(spooled, key=key)
    assert spooled == list(iter_stored_outcomes(store, run.eval_id))
    assert {key(o): o for o in spooled} == stored_outcomes(store, run.eval_id)
    assert run.summary == summarize(iter_stored_outcomes(store, run.eval_id))
