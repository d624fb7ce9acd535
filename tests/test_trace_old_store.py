"""A store written by an earlier agentbench (schema 2) still works with every reader.

The fixture is a real store of the landed version (tests/fixtures/store_schema2): two replayed
customer_service cases, one handing off from the router to triage to refunds. It must migrate
when opened, rebuild its events (the handoff's step included — the bug that crashed the
comparison), compare with a new eval of the same suite, replay and merge.
"""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path

import duckdb
import orjson
import pytest

from agentbench.cli import main
from agentbench.evals.comparing.compare import compare_evals
from agentbench.replay.convert import cassette_from_store, conversation, events_of
from agentbench.trace.storage.migrations import LATEST
from agentbench.trace.store import TraceStore

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = Path(__file__).parent / "fixtures" / "store_schema2"


@pytest.fixture
def old_store(tmp_path: Path) -> TraceStore:
    path = tmp_path / "old.duckdb"
    with duckdb.connect(str(path)) as conn:
        conn.execute((FIXTURE / "schema.sql").read_text())
        conn.execute((FIXTURE / "load.sql").read_text().replace("{folder}", str(FIXTURE)))
        assert conn.execute("SELECT max(id) FROM schema_migrations").fetchone() == (2,)
    return TraceStore(path)


def handoff_run(store: TraceStore) -> str:
    rows = store.sql(
        "SELECT run_id FROM runs WHERE case_id = 'refund-eligible' AND parent_run_id IS NULL"
    ).rows
    return str(rows[0][0])


def test_an_old_store_migrates_and_rebuilds_its_events(old_store: TraceStore) -> None:
    root = handoff_run(old_store)
    traces = conversation(old_store, root)
    assert [t.run.agent for t in traces] == ["desk", "triage", "refunds"]
    kinds = [e.kind for t in traces for e in events_of(t)]
    assert kinds.count("handoff") == 2 and kinds.count("run_started") == 3
    handoffs = [e for t in traces for e in events_of(t) if e.kind == "handoff"]
    assert [(h.from_agent, h.to_agent, h.step) for h in handoffs] == [
        ("desk", "triage", 1),
        ("triage", "refunds", 1),
    ]
    # Each event follows the one it pairs with, even without the second half's seq.
    for trace in traces:
        events = events_of(trace)
        for before, after in itertools.pairwise(events):
            assert before.seq <= after.seq
    rows = old_store.sql("SELECT max(id) FROM schema_migrations").rows
    assert rows == [(LATEST,)]


def test_an_old_eval_compares_replays_and_promotes(
    old_store: TraceStore, tmp_path: Path, capsys
) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "golden", repo / "golden", ignore=shutil.ignore_patterns("*.duckdb"))
    shutil.copytree(ROOT / "replays" / "customer_service", repo / "replays" / "customer_service")
    db = str(old_store.path)
    (old_eval,) = [row[0] for row in old_store.sql("SELECT eval_id FROM evals").rows]
    args = ["run", str(repo / "golden" / "customer_service"), "--db", db, "--json", "--no-report"]
    assert main([*args, "--filter", "refund-*", "--baseline", old_eval]) == 0
    current = orjson.loads(capsys.readouterr().out)
    assert current["comparison"]["gate"]["failed"] is False
    comparison = compare_evals(old_store, old_eval, current["eval_id"])
    changes = {c.case_id: c for c in comparison.cases}
    # The cassettes were re-recorded since (state_summary off by default: fewer tokens sent),
    # so the behaviour is the same and only the recorded usage differs — reported, not gated.
    eligible = changes["refund-eligible"]
    assert eligible.kind == "usage_changed" and eligible.same_recorded_usage is False
    assert eligible.baseline is not None and eligible.current is not None
    assert eligible.current.tokens < eligible.baseline.tokens
    assert eligible.divergences == []
    root = handoff_run(old_store)
    cassette = cassette_from_store(old_store, root)
    assert [r["agent"] for r in cassette.info["runs"]] == ["desk", "triage", "refunds"]
    agent = "golden.customer_service.agent:desk"
    assert main(["replay", root, "--agent", agent, "--db", db]) == 0
    assert "behaviour unchanged" in capsys.readouterr().out


def test_an_old_store_merges_into_a_new_one(old_store: TraceStore, tmp_path: Path) -> None:
    target = TraceStore(tmp_path / "new.duckdb")
    counts = target.merge(old_store.path)
    assert counts["runs"] == 6 and counts["evals"] == 1 and counts["results"] == 2
    assert target.merge(old_store.path) == {name: 0 for name in counts}  # twice: nothing new
    root = handoff_run(target)
    assert [t.run.agent for t in conversation(target, root)] == ["desk", "triage", "refunds"]
