"""`agentbench gate EVAL_ID`: the gate of `agentbench run`, over an eval already stored.

For an eval that was not run in one go — the shards of a CI job matrix merged with
`agentbench merge` — this is the step that compares it with its baseline, writes the JUnit,
Markdown summary and HTML report, and exits as `run` would (0 passed, 1 gate failed, 2 a
suite could not be loaded, 3 a case could not run). An eval that lacks some of its shards —
merged from only some stores, or one shard's store not merged at all — fails, naming them; one
that did not finish (killed, interrupted, still running) is an error, exit 3, naming the
trials it lacks and the `--resume` command that runs them (`evals.running.completion`).
"""

from __future__ import annotations

from pathlib import Path

import click
import orjson

from agentbench.commands.options import Gating, Outputs, StoreOptions, gate_options, gathered
from agentbench.commands.run_outputs import conclude
from agentbench.commands.traces import store_options
from agentbench.errors import UsageError
from agentbench.evals.running.harness import EvalRun
from agentbench.evals.running.outcome_spool import OutcomeSpool
from agentbench.evals.storage.results_store import iter_stored_outcomes
from agentbench.report.loading import resolve_eval_id
from agentbench.trace.code_version import find_work_tree


@click.command(
    epilog="""\b
Examples:
  agentbench gate latest --db merged.duckdb --summary-md summary.md
  agentbench gate eval_shards4_1a2b3c4d5e6f --baseline git:main --junit junit.xml
""",
)
@click.argument("eval_id")
@gate_options
@store_options
@gathered(gating=Gating, outputs=Outputs, storage=StoreOptions)
def gate(eval_id: str, gating: Gating, outputs: Outputs, storage: StoreOptions) -> int:
    """Gate stored eval EVAL_ID (or `latest`) as `agentbench run` gates the eval it runs."""
    store = storage.open(existing=True)
    eval_id = resolve_eval_id(store, eval_id)
    with store.reading() as conn:
        row = conn.execute(
            "SELECT code_version, summary, started_at FROM evals WHERE eval_id = ?", [eval_id]
        ).fetchone()
    if row is None:
        raise UsageError(f"no eval {eval_id} in {store.path}")
    outcomes = OutcomeSpool()  # streamed from the store to disk: nothing held per trial
    outcomes.extend(iter_stored_outcomes(store, eval_id))
    outcomes.seal()
    stored = orjson.loads(row[1]) if row[1] else {}
    result = EvalRun(
        eval_id,
        outcomes=outcomes,
        suite_errors=list(stored.get("suite_errors", [])),
        code_version=row[0],
        started_at=row[2],
    )
    repo = find_work_tree(Path.cwd()) or Path.cwd()
    return conclude(store, result, gating, outputs, repo=repo, reports=repo / "reports")
