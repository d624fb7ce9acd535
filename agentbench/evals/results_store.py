"""Evals and scored results in the trace store (`evals` and `results` tables).

A result row is written as each trial finishes, so `--resume EVAL_ID` can pick up where an
interrupted eval stopped; the eval row is written when it starts and completed when it ends.
Writes take the store's write lock like any recording, waiting while another process holds it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import orjson

from agentbench.evals.stats import TrialOutcome


def _json(value: Any) -> str:
    return orjson.dumps(value, default=str).decode()


def eval_exists(store: Any, eval_id: str) -> bool:
    if not store.path.exists():
        return False
    with store.reading() as conn:
        return (
            conn.execute("SELECT 1 FROM evals WHERE eval_id = ?", [eval_id]).fetchone() is not None
        )


def start_eval(store: Any, run: Any, suites: Sequence[Any], options: Any) -> None:
    config = {
        "trials": options.trials,
        "concurrency": options.concurrency,
        "record_mode": options.record_mode.value,
        "live": options.live,
        "filters": list(options.filters),
        "strict": options.strict,
        "suites": {s.name: str(s.path) for s in suites},
    }
    models = sorted({s.model.name for s in suites if s.model and s.model.name})
    with store.writing() as conn:
        if conn.execute("SELECT 1 FROM evals WHERE eval_id = ?", [run.eval_id]).fetchone():
            conn.execute(
                "UPDATE evals SET status = 'running', finished_at = NULL WHERE eval_id = ?",
                [run.eval_id],
            )
            return
        conn.execute(
            "INSERT INTO evals (eval_id, suite, started_at, status, code_version, model, config) "
            "VALUES (?, ?, ?, 'running', ?, ?, ?)",
            [
                run.eval_id,
                ",".join(s.name for s in suites),
                run.started_at,
                run.code_version,
                ",".join(models) or None,
                _json(config),
            ],
        )


def _row(eval_id: str, outcome: TrialOutcome) -> list[Any]:
    return [
        eval_id,
        outcome.suite,
        outcome.case_id,
        outcome.trial,
        outcome.run_id,
        outcome.status,
        outcome.passed,
        outcome.score,
        _json(outcome.scores),
        outcome.duration_ms,
        outcome.tokens,
        outcome.cost_usd,
        outcome.error,
        outcome.source,
        _json(outcome.tags),
        datetime.now(UTC),
    ]


def store_outcomes(store: Any, eval_id: str, outcomes: Sequence[TrialOutcome]) -> None:
    if not outcomes:
        return
    with store.writing() as conn:
        conn.executemany(
            "INSERT INTO results (eval_id, suite, case_id, trial, run_id, status, passed, score, "
            "scores, duration_ms, tokens, cost_usd, error, source, tags, recorded_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [_row(eval_id, outcome) for outcome in outcomes],
        )


class ResultWriter:
    """Buffers results and writes them in batches: opening the store for writing costs tens
    of milliseconds, so one write per trial would dominate a replayed eval. Results reach the
    store at least every `interval_s` and at the end, so `--resume` loses little."""

    def __init__(self, store: Any, eval_id: str, interval_s: float = 2.0) -> None:
        self.store = store
        self.eval_id = eval_id
        self.interval_s = interval_s
        self._pending: list[TrialOutcome] = []
        self._last = time.monotonic()

    def add(self, outcome: TrialOutcome) -> None:
        self._pending.append(outcome)
        if time.monotonic() - self._last >= self.interval_s:
            self.flush()

    def flush(self) -> None:
        pending, self._pending = self._pending, []
        store_outcomes(self.store, self.eval_id, pending)
        self._last = time.monotonic()


def finish_eval(store: Any, run: Any) -> None:
    summary = run.summary.as_dict()
    summary["suite_errors"] = run.suite_errors
    with store.writing() as conn:
        conn.execute(
            "UPDATE evals SET status = 'finished', finished_at = ?, summary = ? WHERE eval_id = ?",
            [datetime.now(UTC), _json(summary), run.eval_id],
        )


def stored_outcomes(store: Any, eval_id: str) -> dict[tuple[str, str, int], TrialOutcome]:
    """The trials an eval already has results for (the latest row of each)."""
    if not store.path.exists():
        return {}
    with store.reading() as conn:
        rows = conn.execute(
            "SELECT suite, case_id, trial, run_id, status, score, scores, duration_ms, tokens, "
            "cost_usd, error, source, tags FROM results WHERE eval_id = ? ORDER BY recorded_at",
            [eval_id],
        ).fetchall()
    found: dict[tuple[str, str, int], TrialOutcome] = {}
    for row in rows:
        (
            suite,
            case_id,
            trial,
            run_id,
            status,
            score,
            scores,
            duration,
            tokens,
            cost,
            error,
            source,
            tags,
        ) = row
        found[(suite, case_id, trial)] = TrialOutcome(
            suite=suite,
            case_id=case_id,
            trial=trial,
            status=status,
            score=score,
            scores=orjson.loads(scores) if scores else [],
            run_id=run_id,
            duration_ms=duration or 0.0,
            tokens=tokens or 0,
            cost_usd=cost,
            error=error,
            tags=orjson.loads(tags) if tags else [],
            source=source,
        )
    return found
