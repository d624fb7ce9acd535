"""Reading one stored eval for a report: its row, its scored trials and every run behind them.

Everything is read over one read-only connection with a handful of queries (the eval's runs,
the runs they handed off to, and their rows of each trace table), because a report of
thousands of cases must not open the store once per run. Runs are matched to trials by their
eval labels (case id and trial); a multi-turn case has several root runs, all shown.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from agentbench.errors import UsageError
from agentbench.evals.results_store import stored_outcomes
from agentbench.evals.stats import TrialOutcome
from agentbench.trace.queries import fetch
from agentbench.trace.schema import (
    ContextDiffRecord,
    EventRecord,
    LlmCallRecord,
    RunRecord,
    RunTrace,
    ToolCallRecord,
)

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


def load_eval(store: Any, eval_id: str) -> EvalData:
    """The eval's row, its latest result per trial, and the runs of each trial."""
    outcomes = sorted(
        stored_outcomes(store, eval_id).values(), key=lambda o: (o.suite, o.case_id, o.trial)
    )
    with store.reading() as conn:
        rows = fetch(conn, "SELECT * FROM evals WHERE eval_id = ?", [eval_id])
        if not rows:
            raise UsageError(f"no eval {eval_id!r} in {store.path}")
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
    row = rows[0]
    return EvalData(
        eval_id=eval_id,
        suite=row["suite"],
        status=row["status"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        code_version=row["code_version"],
        model=row["model"],
        outcomes=outcomes,
        runs=_runs_by_trial(outcomes, runs, children),
    )


def _runs_by_trial(
    outcomes: list[TrialOutcome],
    runs: list[RunRecord],
    children: dict[str, dict[str, list[Any]]],
) -> dict[TrialKey, list[RunTrace]]:
    by_id = {r.run_id: r for r in runs}
    kids: dict[str, list[RunRecord]] = defaultdict(list)
    labelled: dict[tuple[str, int], list[RunRecord]] = defaultdict(list)
    for run in runs:
        if run.parent_run_id:
            kids[run.parent_run_id].append(run)
        if run.case_id is not None and run.trial is not None:
            labelled[(run.case_id, run.trial)].append(run)
    # Runs carry the case id but not the suite: when two suites share a case id, fall back to
    # the conversation of the result's own run.
    suites_of: dict[tuple[str, int], set[str]] = defaultdict(set)
    for outcome in outcomes:
        suites_of[(outcome.case_id, outcome.trial)].add(outcome.suite)

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

    def conversation(run_id: str) -> list[RunRecord]:
        found: list[RunRecord] = []
        seen: set[str] = set()
        queue = [run_id]
        while queue:
            run = by_id.get(queue.pop(0))
            if run is not None and run.run_id not in seen:
                seen.add(run.run_id)
                found.append(run)
                queue.extend(child.run_id for child in kids.get(run.run_id, []))
        return found

    result: dict[TrialKey, list[RunTrace]] = {}
    for outcome in outcomes:
        label = (outcome.case_id, outcome.trial)
        mine = list(labelled.get(label, [])) if len(suites_of[label]) == 1 else []
        if outcome.run_id and outcome.run_id not in {r.run_id for r in mine}:
            mine.extend(conversation(outcome.run_id))
        mine.sort(key=lambda r: (r.started_at, r.run_id))
        result[outcome.suite, outcome.case_id, outcome.trial] = [trace(r) for r in mine]
    return result
