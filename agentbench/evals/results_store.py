"""Evals and scored results in the trace store (`evals` and `results` tables).

A result row is journaled as each trial finishes, like a finished run (see
`agentbench.trace.spool`), so a killed eval keeps every scored trial and `--resume EVAL_ID`
picks up where it stopped; the eval row is written when it starts and completed when it
ends. Writes take the store's write lock like any recording, waiting while another process
holds it. Every row passes the store's redaction rules on its way in, like a recorded run's:
scores quote the run (reasons, drifted requests), and an eval's configuration and summary can
quote whatever a suite's setup raised.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson

from agentbench.errors import UsageError
from agentbench.evals.stats import TrialOutcome
from agentbench.trace.redact import RedactionRules, Redactor


def _json(value: Any) -> str:
    return orjson.dumps(value, default=str).decode()


def redactor_for(store: Any) -> Redactor:
    """The redactor of the store's rules (the defaults for a store without any)."""
    return Redactor(getattr(store, "redaction", None) or RedactionRules())


def eval_exists(store: Any, eval_id: str) -> bool:
    if not store.path.exists():
        return False
    with store.reading() as conn:
        return (
            conn.execute("SELECT 1 FROM evals WHERE eval_id = ?", [eval_id]).fetchone() is not None
        )


def eval_config(store: Any, eval_id: str) -> dict[str, Any]:
    """The options an eval was run with (`start_eval`'s config); {} for an unknown eval."""
    if not store.path.exists():
        return {}
    with store.reading() as conn:
        row = conn.execute("SELECT config FROM evals WHERE eval_id = ?", [eval_id]).fetchone()
    config = orjson.loads(row[0]) if row and row[0] else None
    return config if isinstance(config, dict) else {}


def check_resumable(store: Any, eval_id: str, suites: Sequence[Any], version: str | None) -> None:
    """`--resume EVAL_ID` only continues the same suites on the same code: anything else
    would mix two versions' results in one eval."""
    if not store.path.exists():
        raise UsageError(f"--resume {eval_id}: no trace store at {store.path}")
    with store.reading() as conn:
        row = conn.execute(
            "SELECT suite, code_version FROM evals WHERE eval_id = ?", [eval_id]
        ).fetchone()
    if row is None:
        raise UsageError(f"--resume {eval_id}: no such eval in {store.path}")
    stored_suites, stored_version = set(row[0].split(",")), row[1]
    names = {s.name for s in suites}
    if names != stored_suites:
        raise UsageError(
            f"--resume {eval_id}: it ran the suites {', '.join(sorted(stored_suites))}; these "
            f"are {', '.join(sorted(names))} (resume with the same paths, or start a new eval)"
        )
    if stored_version != version:
        raise UsageError(
            f"--resume {eval_id}: it ran code {stored_version}; this is {version} (a resumed "
            "eval must be one version of the code; start a new eval)"
        )


def start_eval(store: Any, run: Any, suites: Sequence[Any], options: Any) -> None:
    config = {
        "trials": options.trials,
        "concurrency": options.concurrency,
        "record_mode": options.record_mode.value,
        "live": options.live,
        "filters": list(options.filters),
        # A shard of a CI job matrix: `agentbench merge` lists the shards an eval holds.
        "shards": [str(options.shard)] if getattr(options, "shard", None) else None,
        "strict": options.strict,
        # Suites whose XPASS fails the gate (`strict_xfail: true`): `agentbench gate` reads
        # them here, since it gates a stored eval without loading its suites.
        "strict_xfail": sorted(s.name for s in suites if getattr(s, "strict_xfail", False)),
        "live_from_divergence": options.live_from_divergence,
        "suites": {s.name: str(s.path) for s in suites},
    }
    models = sorted({s.model.name for s in suites if s.model and s.model.name})
    redact = redactor_for(store)
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
                _json(redact.value(config)),
            ],
        )


def result_row(
    eval_id: str, outcome: TrialOutcome, redactor: Redactor | None = None
) -> dict[str, Any]:
    """The `results` row of one scored trial, redacted (with the default rules unless given)."""
    row = {
        "eval_id": eval_id,
        "suite": outcome.suite,
        "case_id": outcome.case_id,
        "trial": outcome.trial,
        "run_id": outcome.run_id,
        "status": outcome.status,
        "passed": outcome.passed,
        "score": outcome.score,
        "scores": _json(outcome.scores),
        "duration_ms": outcome.duration_ms,
        "tokens": outcome.tokens,
        "cost_usd": outcome.cost_usd,
        "error": outcome.error,
        "source": outcome.source,
        "tags": _json(outcome.tags),
        "recorded_at": datetime.now(UTC),
        "details": _details(outcome),
    }
    return _redacted_row(row, redactor or Redactor())


_PLAIN_TYPES = (str, int, float, bool, type(None))


def _redacted_row(row: dict[str, Any], redactor: Redactor) -> dict[str, Any]:
    """`redactor.value(row)`, with the row's time (which needs no redaction) left as it is."""
    rest = {key: value for key, value in row.items() if key != "recorded_at"}
    return row if _nothing_to_mask([rest], redactor) else redactor.value(row)


def redacted_rows(rows: list[dict[str, Any]], redactor: Redactor) -> list[dict[str, Any]]:
    """`redactor.value(rows)` for rows of plain values (texts, numbers, booleans, None)."""
    if _nothing_to_mask(rows, redactor):
        return rows
    redacted: list[dict[str, Any]] = redactor.value(rows)
    return redacted


def _nothing_to_mask(rows: list[dict[str, Any]], redactor: Redactor) -> bool:
    """Whether redacting `rows` would leave them as they are, found in one pass over their
    JSON. Most rows of a trial hold nothing to mask (texts redacted already, or no secret);
    redacted value by value, their texts — unique to the trial: a score's reason, a score
    list's JSON — would also be kept in the redactor's cache, ~2 KB a trial until it fills."""
    if not all(type(value) in _PLAIN_TYPES for row in rows for value in row.values()):
        return False
    try:
        return redactor.clean(orjson.dumps(rows))
    except orjson.JSONEncodeError:  # an integer past 64 bits, a key that is not text
        return False


def _details(outcome: TrialOutcome) -> str | None:
    details = {
        key: value
        for key, value in (
            ("drifts", outcome.drifts),
            ("divergences", outcome.divergences),
            ("turn_runs", outcome.turn_runs),
            ("diverged_at", outcome.diverged_at),
            ("live_model_failed", outcome.live_model_failed),
        )
        if value
    }
    return _json(details) if details else None


def store_outcomes(store: Any, eval_id: str, outcomes: Sequence[TrialOutcome]) -> None:
    """Keep results now: journaled beside the store at once, stored with the next batch."""
    redactor = redactor_for(store)
    store.record_results([result_row(eval_id, outcome, redactor) for outcome in outcomes])


class ResultWriter:
    """Keeps each result as its trial finishes. The journal makes it durable at once (a
    killed eval keeps every scored trial, so `--resume` runs only the rest); the store's
    background thread writes journaled results and runs to DuckDB together, in batches."""

    def __init__(self, store: Any, eval_id: str) -> None:
        self.store = store
        self.eval_id = eval_id
        self.redactor = redactor_for(store)

    def add(self, outcome: TrialOutcome) -> None:
        self.store.record_results([result_row(self.eval_id, outcome, self.redactor)])

    def flush(self) -> None:
        self.store.flush()


def finish_eval(store: Any, run: Any) -> None:
    summary = run.summary.as_dict()
    summary["suite_errors"] = run.suite_errors
    summary = redactor_for(store).value(summary)
    with store.writing() as conn:
        conn.execute(
            "UPDATE evals SET status = 'finished', finished_at = ?, summary = ? WHERE eval_id = ?",
            [datetime.now(UTC), _json(summary), run.eval_id],
        )


def keep_verdict(store: Any, eval_id: str, verdict: dict[str, Any]) -> None:
    """Keep the verdict `run` or `gate` reached with the eval's summary, so a report made
    later (`agentbench report`) opens with the same banner; a merge, which changes the eval,
    drops it (`merging.resummarize`)."""
    with store.writing() as conn:
        row = conn.execute("SELECT summary FROM evals WHERE eval_id = ?", [eval_id]).fetchone()
        if row is None:
            return
        summary = orjson.loads(row[0]) if row[0] else {}
        summary["verdict"] = {
            **verdict,
            "judged_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        conn.execute(
            "UPDATE evals SET summary = ? WHERE eval_id = ?",
            [_json(redactor_for(store).value(summary)), eval_id],
        )


def stored_verdict(summary: dict[str, Any] | None) -> dict[str, Any] | None:
    """The verdict `keep_verdict` kept in an eval's summary, if any."""
    found = (summary or {}).get("verdict")
    return found if isinstance(found, dict) and found.get("status") else None


def stored_outcomes(store: Any, eval_id: str) -> dict[tuple[str, str, int], TrialOutcome]:
    """The trials an eval already has results for (the latest row of each)."""
    return {(o.suite, o.case_id, o.trial): o for o in iter_stored_outcomes(store, eval_id)}


_BATCH_ROWS = 1000


def iter_stored_outcomes(store: Any, eval_id: str) -> Iterator[TrialOutcome]:
    """An eval's trials as stored (the latest row of each), in (suite, case, trial) order,
    read a thousand rows at a time: an eval of any size streams through. The read connection
    is held while this is iterated — the caller must not use the store meanwhile."""
    if not store.path.exists():
        return
    with store.reading() as conn:
        cursor = conn.execute(
            "SELECT suite, case_id, trial, run_id, status, score, scores, duration_ms, tokens, "
            "cost_usd, error, source, tags, details FROM results WHERE eval_id = ? "
            "QUALIFY row_number() OVER (PARTITION BY suite, case_id, trial "
            "ORDER BY recorded_at DESC) = 1 ORDER BY suite, case_id, trial",
            [eval_id],
        )
        while rows := cursor.fetchmany(_BATCH_ROWS):
            yield from map(_stored_outcome, rows)


def _stored_outcome(row: tuple[Any, ...]) -> TrialOutcome:
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
        details,
    ) = row
    seen = orjson.loads(details) if details else {}
    return TrialOutcome(
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
        drifts=seen.get("drifts", []),
        divergences=seen.get("divergences", []),
        turn_runs=seen.get("turn_runs", []),
        diverged_at=seen.get("diverged_at"),  # absent in results stored before it existed
        live_model_failed=bool(seen.get("live_model_failed")),
    )
