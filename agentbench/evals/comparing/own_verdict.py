"""The verdict on a stored eval by its own rule, for a report made when none was kept.

`run` and `gate` keep the verdict they reach with the eval (`results_store.keep_verdict`), and
a report made later opens with it. An eval that has none — killed or interrupted before its
verdict, or merged from shards and not gated yet — is judged here as `gate` would judge it
without a baseline (`evals.comparing.verdict.decide`): the shards it lacks, the suites that could
not be loaded, the trials it planned and does not hold, then every counted trial must pass. So its
report never says "passed" of an eval `gate` would not pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from agentbench.evals.comparing.gate import StrictXfail
from agentbench.evals.comparing.stats import TrialOutcome, summarize
from agentbench.evals.comparing.verdict import GateRules, Verdict, decide
from agentbench.evals.running.completion import completion_of
from agentbench.evals.running.shards import ShardSet
from agentbench.evals.storage.results_store import eval_config

NOTE = (
    "no verdict was kept with this eval, so this is its own rule, without a baseline "
    "(`agentbench gate EVAL_ID` compares it with one)"
)


def own_verdict(store: Any, eval_id: str, outcomes: Sequence[TrialOutcome]) -> Verdict:
    """The verdict `gate` would reach on the stored eval without a baseline."""
    config = eval_config(store, eval_id)
    suite_errors = _suite_errors(store, eval_id)
    summary = summarize(outcomes)
    verdict = decide(
        summary,
        outcomes,
        rules=GateRules(strict_xfail=StrictXfail.of(False, config)),
        suite_errors=suite_errors,
        shards=ShardSet.of(config.get("shards")),
        completion=completion_of(
            store, eval_id, held=summary.trials, suite_errors=len(suite_errors)
        ),
    )
    verdict.notes.append(NOTE)
    return verdict


def _suite_errors(store: Any, eval_id: str) -> list[str]:
    with store.reading() as conn:
        row = conn.execute("SELECT summary FROM evals WHERE eval_id = ?", [eval_id]).fetchone()
    try:
        summary = orjson.loads(row[0]) if row and row[0] else {}
    except orjson.JSONDecodeError:
        return []
    errors = summary.get("suite_errors") if isinstance(summary, dict) else None
    return [str(e) for e in errors] if isinstance(errors, list) else []
