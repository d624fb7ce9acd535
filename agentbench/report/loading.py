"""Reading one stored eval for a report: its row, its scored trials and every run behind them.

Everything is read over one read-only connection with a handful of queries (the eval's runs,
the runs they handed off to, and their rows of each trace table), because a report of
thousands of cases must not open the store once per run. Runs are matched to trials by their
eval labels (case id and trial); a multi-turn case has several root runs, all shown.

`load_eval` reads every trace at once; `trial_runs` reads them a batch of trials at a time, in
the trials' order, so a report written trial by trial holds one batch of traces, whatever
the size of the eval.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson

from agentbench.errors import UsageError
from agentbench.evals.comparing.stats import TrialOutcome
from agentbench.evals.storage.results_store import stored_outcomes, stored_verdict
from agentbench.trace.schema import (
    ContextDiffRecord,
    EventRecord,
    LlmCallRecord,
    RunRecord,
    RunTrace,
    ToolCallRecord,
)
from agentbench.trace.storage.queries import fetch

TrialKey = tuple[str, str, int]

# Every run of the eval: those labelled with it, those its results point at, and (recursively)
# every run they handed off to or chained into.
_TREE = """
WITH RECURSIVE tree(run_id) AS (
    SELECT run_id FROM runs WHERE eval_id = $eval
    UNION
    SELECT run_id FROM results WHERE eval_id = $eval AND run_id IS NOT NULL
    UNION
    SELECT r.run_id FROM runs r JOIN tree t ON r.parent_run_id = t.run_id
)
"""
_CHILD_TABLES = (
    ("llm_calls", LlmCallRecord),
    ("tool_calls", ToolCallRecord),
    ("context_diffs", ContextDiffRecord),
    ("events", EventRecord),
)


@dataclass
class EvalData:
    """One eval as a report shows it."""

    eval_id: str
    suite: str
    status: str
    started_at: datetime | None
    finished_at: datetime | None
    code_version: str | None
    model: str | None
    outcomes: list[TrialOutcome]
    runs: dict[TrialKey, list[RunTrace]] = field(default_factory=dict)
    verdict: dict[str, Any] | None = None  # the last verdict `run` or `gate` reached on it


def resolve_eval_id(store: Any, text: str) -> str:
    """The eval `text` names: an id, or `latest` (the most recently started eval)."""
    if not store.path.exists():
        raise UsageError(f"no trace store at {store.path}; run `agentbench run` first")
    with store.reading() as conn:
        if text == "latest":
            row = conn.execute(
                "SELECT eval_id FROM evals ORDER BY started_at DESC, eval_id DESC LIMIT 1"
            ).fetchone()
            if row is None:
                raise UsageError(f"no eval in {store.path}; run `agentbench run` first")
            return str(row[0])
        if conn.execute("SELECT 1 FROM evals WHERE eval_id = ?", [text]).fetchone():
            return text
        recent = [
            r[0]
            for r in conn.execute(
                "SELECT eval_id FROM evals ORDER BY started_at DESC LIMIT 5"
            ).fetchall()
        ]
    known = ", ".join(recent) if recent else "none"
    raise UsageError(f"no eval {text!r} in {store.path} (latest evals: {known}; or use `latest`)")


def load_eval(store: Any, eval_id: str, *, traces: bool = True) -> EvalData:
    """The eval's row, its latest result per trial, and the runs of each trial (none without
    `traces`: `trial_runs` reads them then, a batch at a time)."""
    outcomes = sorted(
        stored_outcomes(store, eval_id).values(), key=lambda o: (o.suite, o.case_id, o.trial)
    )
    with store.reading() as conn:
        rows = fetch(conn, "SELECT * FROM evals WHERE eval_id = ?", [eval_id])
        if not rows:
            raise UsageError(f"no eval {eval_id!r} in {store.path}")
        if not traces:
            return _eval_data(eval_id, rows[0], outcomes, {})
        params = {"eval": eval_id}
        runs = [
            RunRecord.model_validate(r)
            for r in fetch(
                conn,
                _TREE + "SELECT * FROM runs WHERE run_id IN (SELECT run_id FROM tree) "
                "ORDER BY started_at, run_id",
                params,
            )
        ]
        children: dict[str, dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
        for table, record in _CHILD_TABLES:
            for row in fetch(
                conn,
                _TREE + f"SELECT * FROM {table} WHERE run_id IN (SELECT run_id FROM tree) "
                "ORDER BY run_id, seq",
                params,
            ):
                children[row["run_id"]][table].append(record.model_validate(row))
    return _eval_data(eval_id, rows[0], outcomes, _runs_by_trial(outcomes, runs, children))


def _eval_data(
    eval_id: str,
    row: dict[str, Any],
    outcomes: list[TrialOutcome],
    runs: dict[TrialKey, list[RunTrace]],
) -> EvalData:
    return EvalData(
        eval_id=eval_id,
        suite=row["suite"],
        status=row["status"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        code_version=row["code_version"],
        model=row["model"],
        outcomes=outcomes,
        runs=runs,
        verdict=stored_verdict(_summary(row.get("summary"))),
    )


def _summary(text: Any) -> dict[str, Any] | None:
    try:
        value = orjson.loads(text) if isinstance(text, str | bytes) and text else None
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _runs_by_trial(
    outcomes: list[TrialOutcome],
    runs: list[RunRecord],
    children: dict[str, dict[str, list[Any]]],
) -> dict[TrialKey, list[RunTrace]]:
    by_id = {r.run_id: r for r in runs}
    kids: dict[str, list[RunRecord]] = defaultdict(list)
    for run in runs:
        if run.parent_run_id:
            kids[run.parent_run_id].append(run)

    def trace(run: RunRecord) -> RunTrace:
        rows = children.get(run.run_id, {})
        return RunTrace(
            run=run,
            llm_calls=rows.get("llm_calls", []),
            tool_calls=rows.get("tool_calls", []),
            context_diffs=rows.get("context_diffs", []),
            events=rows.get("events", []),
            children=kids.get(run.run_id, []),
        )

    plan = _trial_run_ids(outcomes, runs)
    return {
        (outcome.suite, outcome.case_id, outcome.trial): [trace(by_id[i]) for i in ids]
        for outcome, ids in zip(outcomes, plan, strict=True)
    }


# Trials whose traces are read (and held) at once by `trial_runs`: a few hundred traces are a
# few megabytes as records, and each batch costs a query per table.
TRIAL_BATCH = 100


@dataclass(frozen=True)
class _RunRef:
    """What matching runs to trials needs of a run: the `runs` row's ids and labels."""

    run_id: str
    parent_run_id: str | None
    case_id: str | None
    trial: int | None
    started_at: datetime


def trial_runs(
    store: Any, eval_id: str, outcomes: Sequence[TrialOutcome], batch: int = TRIAL_BATCH
) -> Iterator[list[RunTrace]]:
    """The runs of each trial of `outcomes`, in their order: what `load_eval` puts in
    `EvalData.runs`, read `batch` trials at a time over one read-only connection."""
    with store.reading() as conn:
        refs = [
            _RunRef(**row)
            for row in fetch(
                conn,
                _TREE + "SELECT run_id, parent_run_id, case_id, trial, started_at FROM runs "
                "WHERE run_id IN (SELECT run_id FROM tree) ORDER BY started_at, run_id",
                {"eval": eval_id},
            )
        ]
        plan = _trial_run_ids(outcomes, refs)
        kids: dict[str, list[str]] = defaultdict(list)
        for ref in refs:
            if ref.parent_run_id:
                kids[ref.parent_run_id].append(ref.run_id)
        del refs
        for start in range(0, len(plan), batch):
            chunk = plan[start : start + batch]
            wanted = {run_id for ids in chunk for run_id in ids}
            wanted |= {kid for run_id in list(wanted) for kid in kids.get(run_id, ())}
            records, children = _read_runs(conn, sorted(wanted))
            for ids in chunk:
                yield [
                    RunTrace(
                        run=records[run_id],
                        llm_calls=children[run_id].get("llm_calls", []),
                        tool_calls=children[run_id].get("tool_calls", []),
                        context_diffs=children[run_id].get("context_diffs", []),
                        events=children[run_id].get("events", []),
                        children=[records[kid] for kid in kids.get(run_id, ())],
                    )
                    for run_id in ids
                ]


def _read_runs(
    conn: Any, run_ids: list[str]
) -> tuple[dict[str, RunRecord], dict[str, dict[str, list[Any]]]]:
    """The `runs` rows of `run_ids` and their rows of each trace table (in `seq` order)."""
    params = {"ids": run_ids}
    where = "WHERE run_id IN (SELECT unnest($ids::VARCHAR[]))"
    records = {
        row["run_id"]: RunRecord.model_validate(row)
        for row in fetch(conn, f"SELECT * FROM runs {where}", params)
    }
    children: dict[str, dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
    for table, record in _CHILD_TABLES:
        for row in fetch(conn, f"SELECT * FROM {table} {where} ORDER BY run_id, seq", params):
            children[row["run_id"]][table].append(record.model_validate(row))
    return records, children


def _trial_run_ids(
    outcomes: Sequence[TrialOutcome], refs: Sequence[_RunRef] | Sequence[RunRecord]
) -> list[list[str]]:
    """The ids of each trial's runs, in the order they started: the runs labelled with its
    case and trial, and the conversation of the result's own run. Runs carry the case id but
    not the suite: when two suites share a case id, only the conversation counts."""
    by_id = {r.run_id: r for r in refs}
    kids: dict[str, list[Any]] = defaultdict(list)
    labelled: dict[tuple[str, int], list[Any]] = defaultdict(list)
    for ref in refs:
        if ref.parent_run_id:
            kids[ref.parent_run_id].append(ref)
        if ref.case_id is not None and ref.trial is not None:
            labelled[(ref.case_id, ref.trial)].append(ref)
    suites_of: dict[tuple[str, int], set[str]] = defaultdict(set)
    for outcome in outcomes:
        suites_of[(outcome.case_id, outcome.trial)].add(outcome.suite)

    def conversation(run_id: str) -> list[Any]:
        found: list[Any] = []
        seen: set[str] = set()
        queue = [run_id]
        while queue:
            ref = by_id.get(queue.pop(0))
            if ref is not None and ref.run_id not in seen:
                seen.add(ref.run_id)
                found.append(ref)
                queue.extend(child.run_id for child in kids.get(ref.run_id, []))
        return found

    plan = []
    for outcome in outcomes:
        label = (outcome.case_id, outcome.trial)
        mine = list(labelled.get(label, [])) if len(suites_of[label]) == 1 else []
        if outcome.run_id and outcome.run_id not in {r.run_id for r in mine}:
            mine.extend(conversation(outcome.run_id))
        mine.sort(key=lambda r: (r.started_at, r.run_id))
        plan.append([r.run_id for r in mine])
    return plan
