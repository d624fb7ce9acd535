"""Evals and scored results in the trace store (`evals` and `results` tables).

A result row is journaled as each trial finishes, like a finished run (see
`agentbench.trace.journal.spool`), so a killed eval keeps every scored trial and `--resume EVAL_ID`
picks up where it stopped; the eval row is written when it starts and completed when it
ends. Writes take the store's write lock like any recording, waiting while another process
holds it. Every row passes the store's redaction rules on its way in, like a recorded run's:
scores quote the run (reasons, drifted requests), and an eval's configuration and summary can
quote whatever a suite's setup raised.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson

from agentbench.errors import UsageError
from agentbench.evals.comparing.stats import TrialOutcome
from agentbench.trace.redaction.redactor import Redactor
from agentbench.trace.redaction.rules import RedactionRules


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


def check_resumable(
    store: Any, eval_id: str, suites: Sequence[Any], version: str | None, options: Any
) -> None:
    """`--resume EVAL_ID` only continues the same suites on the same code, with the same
    selection (`selection`): anything else would make one eval of two versions' results, or
    of two plans — a resumed `--filter` run would mark a partial eval finished."""
    if not store.path.exists():
        raise UsageError(f"--resume {eval_id}: no trace store at {store.path}")
    with store.reading() as conn:
        row = conn.execute(
            "SELECT suite, code_version, config FROM evals WHERE eval_id = ?", [eval_id]
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
    config = orjson.loads(row[2]) if row[2] else {}
    stored = config if isinstance(config, dict) else {}
    changes = _selection_changes(stored, selection(options))
    if changes:
        flag, then, now = changes[0]
        raise UsageError(
            f"--resume {eval_id}: it ran with {_shown(flag, then)}; this is {_shown(flag, now)} "
            "(a resumed eval runs only the rest of the trials it planned: give the options it "
            "started with, or start a new eval)"
        )


def selection(options: Any) -> dict[str, Any]:
    """What decides which trials an eval runs and how, as its config keeps it: `--resume`
    must give the same, and `resume_command` repeats it."""
    shard = getattr(options, "shard", None)
    return {
        "filters": list(options.filters),
        "trials": options.trials,
        "shards": [str(shard)] if shard else None,
        "live": options.live,
        "record_mode": options.record_mode.value,
        "strict": options.strict,
        "allow_drift": options.allow_drift,
        "live_from_divergence": options.live_from_divergence,
        "model": options.model,
    }


# Each config key of the selection and the option that sets it.
SELECTION_FLAGS = {
    "filters": "--filter",
    "trials": "--trials",
    "shards": "--shard",
    "live": "--live",
    "record_mode": "--record-mode",
    "strict": "--strict",
    "allow_drift": "--allow-drift",
    "live_from_divergence": "--live-from-divergence",
    "model": "--model",
}


def _selection_changes(stored: dict[str, Any], now: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(option, stored value, value now) for each key of the selection that differs; a key
    the stored config lacks (an eval kept by an older agentbench) is not compared."""
    changes = []
    for key, flag in SELECTION_FLAGS.items():
        if key not in stored:
            continue
        then, value = stored[key], now[key]
        if key in ("filters", "shards"):  # lists whose order says nothing
            then, value = sorted(then or ()), sorted(value or ())
        if then != value:
            changes.append((flag, stored[key], now[key]))
    return changes


def _shown(flag: str, value: Any) -> str:
    """An option's value as the command line gives it: `--filter 'status-*'`, `no --filter`,
    `--trials 3`, `--live`, `no --live`."""
    if value in (None, [], False):
        if flag == "--trials":
            return "no --trials (each suite's own)"
        return f"no {flag}"
    if value is True:
        return flag
    if isinstance(value, list):
        return " ".join(f"{flag} {shlex.quote(str(item))}" for item in value)
    return f"{flag} {shlex.quote(str(value))}"


def start_eval(
    store: Any, run: Any, suites: Sequence[Any], options: Any, planned: int | None = None
) -> None:
    """The eval's row, `running` until `finish_eval`: its selection and what it planned
    (`planned` trials, of this shard when it is one — a merge adds the shards' plans up), so
    `gate` and `report` can tell an eval that did not finish from one that did. A resumed
    eval keeps its row; a verdict kept on it is dropped, since the eval is changing."""
    shard = getattr(options, "shard", None)
    config = {
        **selection(options),
        "concurrency": options.concurrency,
        "base_url": options.base_url,  # for the `--resume` command: not compared
        # Suites whose XPASS fails the gate (`strict_xfail: true`): `agentbench gate` reads
        # them here, since it gates a stored eval without loading its suites.
        "strict_xfail": sorted(s.name for s in suites if getattr(s, "strict_xfail", False)),
        "suites": {s.name: str(s.path) for s in suites},
        # Per part: "all", or the shard (K/N) of a CI job matrix.
        "planned_trials": {str(shard) if shard else "all": planned} if planned is not None else {},
    }
    models = sorted({s.model.name for s in suites if s.model and s.model.name})
    redact = redactor_for(store)
    with store.writing() as conn:
        row = conn.execute(
            "SELECT config, summary FROM evals WHERE eval_id = ?", [run.eval_id]
        ).fetchone()
        if row is not None:
            kept, summary = (orjson.loads(text) if text else {} for text in row)
            plans = {**(kept.get("planned_trials") or {}), **config["planned_trials"]}
            kept["planned_trials"] = plans
            summary.pop("verdict", None)
            conn.execute(
                "UPDATE evals SET status = 'running', finished_at = NULL, config = ?, summary = ? "
                "WHERE eval_id = ?",
                [_json(redact.value(kept)), _json(summary) if summary else None, run.eval_id],
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
