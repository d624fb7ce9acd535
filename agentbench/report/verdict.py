"""The banner a report opens with: the verdict, its reasons, and the cases to look at.

The verdict is the one `agentbench run` or `agentbench gate` reached (`evals.comparing.verdict`,
passed in as its `as_dict()`: passed, failed or error, with its reasons, basis, notes and exit
code), so the banner says what the exit code says. A page made without one — a comparison alone —
shows the comparison's gate (`evals.comparing.gate`), else the verdict `agentbench run` reaches
without a baseline (`evals.comparing.verdict.decide`: a trial that could not run is an error, a
failing one a failure); `agentbench report` of a stored eval passes one in
(`evals.comparing.own_verdict`). Below the reasons come the cases that need a look, worst first:
newly failing, could not run, failing, unexpected passes (XPASS), flaky (trials or evals disagree),
then budget and score regressions, each linking to its row in the case table.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from agentbench.evals.comparing.stats import Summary, TrialOutcome
from agentbench.evals.comparing.verdict import GateRules, decide

REASONS_SHOWN = 12  # more reasons are counted ("… and 30 more"), not listed
# Cases listed under the banner; the rest are one click away (the table, "not passing"), and a
# static row costs the page's first paint in an eval where hundreds fail.
ATTENTION_SHOWN = 50
_REASON_CHARS = 240

# What each kind of case is called in the banner, in the order they are listed.
ATTENTION_KINDS = (
    ("newly_failing", "newly failing"),
    ("error", "could not run"),
    ("failed", "failing"),
    ("xpassed", "XPASS (unexpectedly passing)"),
    ("flaky", "flaky"),
    ("budget_regression", "over budget"),
    ("score_changed", "score dropped"),
    ("usage_changed", "tokens or cost changed"),
)
_RANK = {kind: rank for rank, (kind, _) in enumerate(ATTENTION_KINDS)}
_TITLES = dict(ATTENTION_KINDS)


@dataclass
class Attention:
    """One case the reader should look at, and why."""

    kind: str
    title: str
    suite: str
    case_id: str
    source: str | None
    reason: str
    row: str  # the case table's row key (`suite/case/trial`), the target of its link
    change: str | None = None  # its entry in the comparison section (`change-3`), if any


@dataclass
class VerdictView:
    failed: bool  # did not pass: failed, or an error
    basis: str  # what the verdict was judged against
    reasons: list[str]
    more_reasons: int
    attention: list[Attention]  # the first ATTENTION_SHOWN
    more_attention: int = 0
    status: str | None = None  # passed | failed | error (None: failed or passed, by `failed`)
    notes: list[str] = field(default_factory=list)
    exit_code: int | None = None  # the command's, when the verdict is one it reached

    @property
    def status_word(self) -> str:
        if self.status == "error":
            return "ERROR"
        return "FAILED" if self.failed else "passed"

    @property
    def words(self) -> str:
        return f"Gate {self.status_word}"


def row_key(outcome: TrialOutcome) -> str:
    return f"{outcome.suite}/{outcome.case_id}/{outcome.trial}"


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 1] + "…"


def _why(outcome: TrialOutcome) -> str:
    reasons = outcome.reasons()
    if reasons:
        return _clip(reasons[0])
    return _clip(outcome.error) if outcome.error else outcome.status


def verdict_view(
    outcomes: list[TrialOutcome],
    summary: Summary,
    comparison: dict[str, Any] | None,
    gate: dict[str, Any] | None = None,
) -> VerdictView:
    """The banner for an eval's report; `comparison` is `Comparison.as_dict()` or None;
    `gate` is the verdict the command reached (`Verdict.as_dict()`: `status`, `reasons`,
    `basis`, `notes`, `exit_code`; or just `failed`, `reasons`, `basis`), which wins over the
    comparison's own gate."""
    by_case: dict[tuple[str, str], list[TrialOutcome]] = defaultdict(list)
    for outcome in outcomes:
        by_case[outcome.key].append(outcome)
    found: dict[tuple[str, str], Attention] = {}
    for key, trials in by_case.items():
        item = _own_attention(trials)
        if item is not None:
            found[key] = item
    if comparison is not None:
        for index, change in enumerate(comparison.get("cases") or ()):
            item = _change_attention(change, by_case) if isinstance(change, dict) else None
            if item is None:
                continue
            known = found.get((item.suite, item.case_id))
            # The comparison's word wins when it is at least as grave: "newly failing" says
            # more than "failing", and its reason names the first divergence.
            item.change = f"change-{index}"  # the id `comparison_view` gives its entry
            if known is None or _RANK[item.kind] <= _RANK[known.kind]:
                found[(item.suite, item.case_id)] = item
            else:
                known.change = item.change
    attention = sorted(found.values(), key=lambda a: (_RANK[a.kind], a.suite, a.case_id))
    status, notes, exit_code = None, [], None
    if gate is not None:
        status = str(gate["status"]) if gate.get("status") else None
        failed = status in ("failed", "error") if status else bool(gate.get("failed"))
        reasons = [str(r) for r in gate.get("reasons") or ()]
        basis = str(gate.get("basis") or "the gate of the run that made this eval")
        notes = [str(n) for n in gate.get("notes") or ()]
        exit_code = gate.get("exit_code") if isinstance(gate.get("exit_code"), int) else None
    elif comparison is not None and isinstance(comparison.get("gate"), dict):
        verdict = comparison["gate"]
        failed = bool(verdict.get("failed"))
        reasons = [str(r) for r in verdict.get("reasons") or ()]
        basis = f"compared with baseline {comparison.get('baseline_eval')}"
    else:  # the rule without a baseline, as `run` reaches it (`evals.comparing.verdict.decide`)
        alone = decide(summary, outcomes, rules=GateRules())
        status, failed, reasons = alone.status, not alone.passed, alone.reasons
        basis, exit_code = alone.basis, alone.exit_code
    return VerdictView(
        failed=failed,
        basis=basis,
        reasons=reasons[:REASONS_SHOWN],
        more_reasons=max(0, len(reasons) - REASONS_SHOWN),
        attention=attention[:ATTENTION_SHOWN],
        more_attention=max(0, len(attention) - ATTENTION_SHOWN),
        status=status,
        notes=notes,
        exit_code=exit_code,
    )


def _own_attention(trials: list[TrialOutcome]) -> Attention | None:
    """What this eval alone says of a case: an error or failure, a surprise pass, or trials
    that disagree."""
    worst = next(
        (t for status in ("error", "failed", "xpassed") for t in trials if t.status == status),
        None,
    )
    first = trials[0]
    if worst is not None:
        kind = worst.status
        if kind != "xpassed" and any(t.status == "passed" for t in trials):
            kind = "flaky"
        reason = _why(worst)
        if kind == "flaky":
            passed = sum(t.status == "passed" for t in trials)
            reason = f"{passed} of {len(trials)} trials passed; a failing one: {reason}"
        return Attention(
            kind, _TITLES[kind], first.suite, first.case_id, first.source, reason, row_key(worst)
        )
    return None


def _change_attention(
    change: dict[str, Any], by_case: dict[tuple[str, str], list[TrialOutcome]]
) -> Attention | None:
    kind = str(change.get("kind"))
    if kind not in _RANK or kind in ("failed", "error", "xpassed"):
        return None
    delta = change.get("score_delta")
    if kind == "score_changed" and not (isinstance(delta, int | float) and delta < 0):
        return None  # a score that rose is good news, not a case to look at
    suite, case_id = str(change.get("suite", "")), str(change.get("case_id", ""))
    trials = by_case.get((suite, case_id), [])
    target = next((t for t in trials if not t.passed), trials[0] if trials else None)
    reasons = [str(r) for r in change.get("reasons") or ()]
    divergences = [d for d in change.get("divergences") or () if isinstance(d, dict)]
    if divergences:
        d = divergences[0]
        first = f"first divergence: {d.get('class')} at step {d.get('step')} ({d.get('agent')})"
        reasons.append(f"{first}, {d.get('label')}")
    return Attention(
        kind,
        _TITLES[kind],
        suite,
        case_id,
        change.get("source")
        if isinstance(change.get("source"), str)
        else (target.source if target else None),
        _clip("; ".join(reasons[:2])) if reasons else kind.replace("_", " "),
        row_key(target) if target else f"{suite}/{case_id}/1",
    )
