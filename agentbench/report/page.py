"""What a report page shows, computed from a loaded eval: numbers, charts, rows, details.

The template only lays these out. The verdict banner comes from `verdict`. Case rows and each
row's detail — input, expectations, output, transcript, trace timeline — travel as JSON that
the page's script turns into DOM: rows sorted failing-first and listed a page at a time
(filters and sorting apply to all of them), a detail when its row is first expanded.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

from markupsafe import Markup

from agentbench.evals.comparing.stats import Summary, TrialOutcome, summarize
from agentbench.report.charts import Chart, histogram, rate_bars
from agentbench.report.embed import script_json
from agentbench.report.loading import EvalData
from agentbench.report.timeline import trial_detail
from agentbench.report.verdict import row_key, verdict_view
from agentbench.trace.schema import RunTrace

STATUSES = ("passed", "failed", "error", "xfailed", "xpassed", "skipped")
# The table's default order puts what needs a look first.
STATUS_ORDER = ("error", "failed", "xpassed", "xfailed", "skipped", "passed")
# Rows the page puts in the table at a time ("show more" adds as many again): the browser
# parses and lays out a table row in about half a millisecond, so 2,000 rows at once would
# cost a second before anything shows.
PAGE_SIZE = 200


@dataclass
class CaseRow:
    index: int
    key: str  # `suite/case/trial`: what a deep link (`#case=…`) names
    suite: str
    case_id: str
    trial: int
    status: str
    score: float | None
    tokens: int
    duration_ms: float
    cost_usd: float | None
    tags: list[str]
    source: str | None
    why: str | None  # the first failing scorer's reason, or the error


@dataclass
class SuiteLine:
    name: str
    cases: int
    trials: int
    passed: int
    pass_rate: float | None
    mean_score: float | None
    tokens: int


def eval_context(data: EvalData) -> dict[str, Any]:
    """What the report template shows of `data`; its runs are used up (see `_details_json`)."""
    return {**page_context(data), "details": _details_json(data)}


def page_context(
    data: EvalData,
    comparison: dict[str, Any] | None = None,
    gate: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """`eval_context` but the trials' details (`detail_texts` makes those one by one);
    `gate` (the command's verdict, `Verdict.as_dict()`), else `comparison`'s gate
    (`Comparison.as_dict()`), decides the banner when given."""
    outcomes = data.outcomes
    summary = summarize(outcomes)
    rows = _rows(data)
    verdict = verdict_view(outcomes, summary, comparison, gate)
    return {
        "eval": data,
        "summary": summary,
        "verdict": verdict,
        "meta_json": script_json(
            {
                "eval_id": data.eval_id,
                "suite": data.suite,
                "status": data.status,
                "started_at": data.started_at,
                "finished_at": data.finished_at,
                "code_version": data.code_version,
                "model": data.model,
                "summary": summary.as_dict(),
                "verdict": {
                    "failed": verdict.failed,
                    "status": verdict.status or ("failed" if verdict.failed else "passed"),
                    "exit_code": verdict.exit_code,
                    "basis": verdict.basis,
                    "notes": verdict.notes,
                    "reasons": verdict.reasons,
                },
            }
        ),
        "counts": _counts(outcomes),
        "suites": _suites(outcomes, summary),
        "charts": _charts(outcomes, summary),
        "rows": rows,
        "rows_json": script_json([asdict(row) for row in rows]),
        "page_size": PAGE_SIZE,
        "statuses": [s for s in STATUSES if any(o.status == s for o in outcomes)],
        "suite_names": sorted({o.suite for o in outcomes}),
        "tags": sorted({t for o in outcomes for t in o.tags}),
        "duration_s": (
            (data.finished_at - data.started_at).total_seconds()
            if data.finished_at and data.started_at
            else None
        ),
    }


def _details_json(data: EvalData) -> Markup:
    """Every trial's detail as one JSON array (the page's `details`), the same bytes
    `script_json` writes for the whole list, built trial by trial: each trial's runs are let
    go (taken out of `data.runs`) once its detail is encoded."""
    keys = [(o.suite, o.case_id, o.trial) for o in data.outcomes]
    runs = (data.runs.pop(key, []) for key in keys)
    return Markup("".join(detail_texts(data.outcomes, runs)))


def detail_texts(outcomes: list[TrialOutcome], runs: Iterable[list[RunTrace]]) -> Iterator[str]:
    """The page's `details` — one JSON array, parsed on the first expansion (a script element
    per case would cost the browser's parser more than the whole table: ~1 s at 2,000 cases)
    — as pieces: `[`, each trial's detail (`runs` gives each trial's runs, in order) with the
    comma before it, `]`. Joined, they are the bytes `script_json` writes for the whole list;
    one at a time, a report never holds more than one trial's traces and detail."""
    yield "["
    for index, (outcome, trial_runs) in enumerate(zip(outcomes, runs, strict=True)):
        text = str(script_json(trial_detail(outcome, trial_runs)))
        yield "," + text if index else text
    yield "]"


def _counts(outcomes: list[TrialOutcome]) -> dict[str, int]:
    found = Counter(o.status for o in outcomes)
    return {status: found.get(status, 0) for status in STATUSES}


def _suites(outcomes: list[TrialOutcome], summary: Summary) -> list[SuiteLine]:
    by_suite: dict[str, list[TrialOutcome]] = defaultdict(list)
    for outcome in outcomes:
        by_suite[outcome.suite].append(outcome)
    lines = []
    for name, mine in sorted(by_suite.items()):
        scored = [o.score for o in mine if o.counted and o.score is not None]
        numbers = summary.by_suite.get(name, {})
        lines.append(
            SuiteLine(
                name=name,
                cases=len({o.case_id for o in mine}),
                trials=len(mine),
                passed=sum(o.passed for o in mine),
                pass_rate=numbers.get("pass_rate"),
                mean_score=sum(scored) / len(scored) if scored else None,
                tokens=sum(o.tokens for o in mine),
            )
        )
    return lines


def _charts(outcomes: list[TrialOutcome], summary: Summary) -> list[Chart]:
    ran = [o for o in outcomes if o.status != "skipped"]
    return [
        histogram(
            "scores",
            "Score distribution",
            [o.score for o in ran if o.score is not None],
            x_title="score",
            low=0.0,
            high=1.0,
        ),
        histogram(
            "latency",
            "Latency per trial",
            [o.duration_ms for o in ran],
            unit=" ms",
            x_title="latency (ms)",
            low=0.0,
        ),
        histogram(
            "tokens", "Tokens per trial", [float(o.tokens) for o in ran], x_title="tokens", low=0.0
        ),
        rate_bars(
            "suites",
            "Pass rate by suite",
            {name: numbers.get("pass_rate") for name, numbers in summary.by_suite.items()},
        ),
    ]


def _rows(data: EvalData) -> list[CaseRow]:
    rows = []
    for index, outcome in enumerate(data.outcomes):
        why = None
        if outcome.status in ("failed", "error", "xpassed"):
            reasons = outcome.reasons()
            why = reasons[0][:300] if reasons else (outcome.error or "")[:300] or None
        rows.append(
            CaseRow(
                index=index,
                key=row_key(outcome),
                suite=outcome.suite,
                case_id=outcome.case_id,
                trial=outcome.trial,
                status=outcome.status,
                score=outcome.score,
                tokens=outcome.tokens,
                duration_ms=outcome.duration_ms,
                cost_usd=outcome.cost_usd,
                tags=list(outcome.tags),
                source=outcome.source,
                why=why,
            )
        )
    return rows
