"""A suite's history across evals and commits: numbers per eval, regressions, flaky cases.

Read from the store in two queries — each eval's row, and each case's trial statuses per eval
(the latest result of every trial) — and from git in four calls whatever their number (which
stored commits the repository knows, their dates and subjects, a branch that holds each, their
order), so a store of hundreds of evals renders at once. With `suite`, every number is that
suite's alone.

Evals are ordered along the git history — by their commit, ancestors first, then by start time
(a commit evaluated twice, or an eval of uncommitted code after its commit's clean one); an
eval of a commit git does not know keeps its place in time. Per eval: pass rate (counted
trials: passed, failed, error), tokens, cost, latency p50/p95, and what it changed: the cases
whose latest earlier result was a pass and fail now (regressions), and the reverse (fixes). A
case is flaky when its result flips without a code change: its trials disagree within one eval,
or evals of the same clean commit disagree. Evals of uncommitted code (`+dirty`) never count as
the same code: two of them may have run different edits.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from agentbench.evals.history.git_commits import CommitInfo, describe_commits

COUNTED = ("passed", "failed", "error")

_CASES = """
WITH latest AS (
    SELECT eval_id, suite, case_id, trial, status, source, tokens, cost_usd, duration_ms
    FROM results
    WHERE eval_id IN (SELECT unnest($evals::VARCHAR[]))
    QUALIFY row_number() OVER (
        PARTITION BY eval_id, suite, case_id, trial ORDER BY recorded_at DESC
    ) = 1
)
SELECT eval_id, suite, case_id, list(status ORDER BY trial), any_value(source),
       sum(tokens), sum(cost_usd), list(duration_ms) FILTER (WHERE status <> 'skipped')
FROM latest
GROUP BY eval_id, suite, case_id
"""


@dataclass
class CaseMove:
    """A case whose result changed between two evals."""

    suite: str
    case_id: str
    source: str | None
    before: str  # pass | fail | flaky
    after: str


@dataclass
class EvalPoint:
    """One eval along the history."""

    eval_id: str
    suites: list[str]
    started_at: datetime
    status: str
    code_version: str | None
    model: str | None
    commit: str | None
    dirty: bool
    commit_date: str | None  # ISO 8601, from git; None when git does not know the commit
    subject: str | None
    branch: str | None
    trials: int
    passed: int
    failed: int
    errors: int
    pass_rate: float | None
    tokens: int
    cost_usd: float | None
    latency_p50_ms: float | None
    latency_p95_ms: float | None
    filters: list[str] = field(default_factory=list)  # `--filter`: it ran only some cases
    previous: str | None = None  # the eval the regressions are counted against
    regressions: list[CaseMove] = field(default_factory=list)
    fixed: list[CaseMove] = field(default_factory=list)


@dataclass
class FlakyCase:
    """A case whose result flipped while the code stayed the same."""

    suite: str
    case_id: str
    source: str | None
    code_version: str | None
    results: list[tuple[str, str]]  # (eval id, pass | fail | flaky), oldest first
    why: str


@dataclass
class History:
    suite: str | None
    since: datetime | None
    points: list[EvalPoint]  # oldest first
    flaky: list[FlakyCase]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Case:
    statuses: list[str]
    source: str | None

    @property
    def verdict(self) -> str | None:
        """pass, fail, flaky (its trials disagree), or None (nothing counted, or nothing that
        ran: a trial that could not run — a missing cassette, a live outage — says nothing of
        the code, so it is neither a regression nor a fix, nor a flip)."""
        counted = [s for s in self.statuses if s in COUNTED and s != "error"]
        if not counted:
            return None
        passed = sum(s == "passed" for s in counted)
        return "pass" if passed == len(counted) else "fail" if passed == 0 else "flaky"


def load_history(
    store: Any,
    *,
    suite: str | None = None,
    since: datetime | None = None,
    repo: Path | None = None,
) -> History:
    """The evals of `store` (those that ran `suite`, started after `since`), oldest first,
    with their commits as `repo`'s git history knows them."""
    if not store.path.exists():
        return History(suite, since, [], [])
    with store.reading() as conn:
        rows = conn.execute(
            "SELECT eval_id, suite, started_at, status, code_version, model, config FROM evals "
            "WHERE status <> 'running' ORDER BY started_at, eval_id"
        ).fetchall()
        rows = [
            r
            for r in rows
            if (suite is None or suite in r[1].split(",")) and (since is None or r[2] >= since)
        ]
        cases: dict[str, dict[tuple[str, str], _Case]] = defaultdict(dict)
        numbers: dict[str, dict[str, Any]] = defaultdict(
            lambda: {"tokens": 0, "cost": [], "durations": []}
        )
        found = conn.execute(_CASES, {"evals": [r[0] for r in rows]}).fetchall() if rows else []
        for eval_id, case_suite, case_id, statuses, source, tokens, cost, durations in found:
            if suite is not None and case_suite != suite:
                continue
            cases[eval_id][(case_suite, case_id)] = _Case(list(statuses), source)
            mine = numbers[eval_id]
            mine["tokens"] += int(tokens or 0)
            if cost is not None:
                mine["cost"].append(float(cost))
            mine["durations"].extend(float(d) for d in durations or () if d is not None)
    commits = describe_commits({_commit(r[4]) for r in rows} - {None}, repo or Path.cwd())
    points = _along_history(
        [_point(row, cases.get(row[0], {}), numbers.get(row[0]), commits) for row in rows],
        commits,
    )
    _moves(points, cases, suite)
    return History(suite, since, points, _flaky(points, cases))


def _commit(version: str | None) -> str | None:
    return version.split("+", 1)[0] if version else None


def _point(
    row: tuple[Any, ...],
    cases: dict[tuple[str, str], _Case],
    numbers: dict[str, Any] | None,
    commits: dict[str, CommitInfo],
) -> EvalPoint:
    eval_id, suites, started_at, status, version, model, config = row
    statuses = [s for case in cases.values() for s in case.statuses]
    counted = [s for s in statuses if s in COUNTED]
    passed = sum(s == "passed" for s in counted)
    durations = sorted((numbers or {}).get("durations", []))
    costs = (numbers or {}).get("cost", [])
    commit = _commit(version)
    info = commits.get(commit or "")
    return EvalPoint(
        eval_id=eval_id,
        suites=sorted(suites.split(",")),
        started_at=started_at,
        status=status,
        code_version=version,
        model=model,
        commit=commit,
        dirty=bool(version and "+" in version),
        commit_date=info.date if info else None,
        subject=info.subject if info else None,
        branch=info.branch if info else None,
        trials=len(statuses),
        passed=passed,
        failed=sum(s == "failed" for s in counted),
        errors=sum(s == "error" for s in counted),
        pass_rate=passed / len(counted) if counted else None,
        tokens=int((numbers or {}).get("tokens", 0)),
        cost_usd=sum(costs) if costs else None,
        latency_p50_ms=_quantile(durations, 0.5),
        latency_p95_ms=_quantile(durations, 0.95),
        filters=_filters(config),
    )


def _filters(config: str | None) -> list[str]:
    try:
        found = orjson.loads(config).get("filters") if config else None
    except (orjson.JSONDecodeError, AttributeError):
        return []
    return [str(f) for f in found] if isinstance(found, list) else []


def _along_history(points: list[EvalPoint], commits: dict[str, CommitInfo]) -> list[EvalPoint]:
    """`points` (in start order) with those of known commits put in commit order, ancestors
    first; the others keep their slots."""
    slots = [i for i, p in enumerate(points) if p.commit in commits]
    known = sorted(
        (points[i] for i in slots),
        key=lambda p: (commits[p.commit or ""].order, p.started_at, p.eval_id),
    )
    ordered = list(points)
    for slot, point in zip(slots, known, strict=True):
        ordered[slot] = point
    return ordered


def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


def _moves(
    points: list[EvalPoint], cases: dict[str, dict[tuple[str, str], _Case]], suite: str | None
) -> None:
    """Each eval's regressions and fixes: every case against its own latest earlier result
    (an eval that ran one case with `--filter`, as bisect does, hides no other case's
    change), and `previous` the latest earlier eval of a suite it ran."""
    last_of_suite: dict[str, str] = {}
    last_seen: dict[tuple[str, str], str] = {}  # case -> its latest verdict so far
    for point in points:
        for name in point.suites:
            if suite is None or name == suite:
                point.previous = point.previous or last_of_suite.get(name)
                last_of_suite[name] = point.eval_id
        for key, case in sorted(cases.get(point.eval_id, {}).items()):
            old, new = last_seen.get(key), case.verdict
            if new is None:
                continue
            last_seen[key] = new
            move = CaseMove(key[0], key[1], case.source, old or "-", new)
            if old == "pass" and new in ("fail", "flaky"):
                point.regressions.append(move)
            elif old in ("fail", "flaky") and new == "pass":
                point.fixed.append(move)


def _flaky(
    points: list[EvalPoint], cases: dict[str, dict[tuple[str, str], _Case]]
) -> list[FlakyCase]:
    """Cases whose result flipped without a code change (see the module docstring)."""
    seen: dict[tuple[str | None, str, str], list[tuple[str, str, str | None]]] = defaultdict(list)
    for point in points:
        # Uncommitted code is never "the same code" twice: each eval is its own version.
        version = point.code_version if point.code_version and not point.dirty else point.eval_id
        for (suite, case_id), case in sorted(cases.get(point.eval_id, {}).items()):
            if case.verdict is not None:
                seen[(version, suite, case_id)].append((point.eval_id, case.verdict, case.source))
    flaky = []
    for (version, suite, case_id), results in seen.items():
        verdicts = {v for _, v, _ in results}
        if "flaky" in verdicts:
            why = "its trials disagree within an eval"
        elif len(verdicts) > 1:
            why = f"passed and failed in {len(results)} evals of the same commit"
        else:
            continue
        flaky.append(
            FlakyCase(
                suite=suite,
                case_id=case_id,
                source=results[-1][2],
                code_version=None if version and version.startswith("eval_") else version,
                results=[(e, v) for e, v, _ in results],
                why=why,
            )
        )
    return sorted(flaky, key=lambda f: (f.suite, f.case_id, f.code_version or ""))
