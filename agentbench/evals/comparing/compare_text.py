"""A comparison of two evals as plain text, for `agentbench diff EVAL_A EVAL_B` and CI logs.

It reads the `Comparison.as_dict()` shape (so a comparison loaded from JSON renders the same):
the pass rates with the delta, its 95% interval and the test's p-value, then newly failing
cases with their reasons and first divergent step, then the other kinds (a case whose behaviour
changed with its first divergent step too), then the gate.
"""

from __future__ import annotations

from typing import Any

from agentbench.replay.diff import Divergence
from agentbench.replay.drift import Change

MAX_LISTED = 20  # cases listed per kind; the rest are counted
# `diff` has no --strict-xfail: a suite's `strict_xfail: true` gates it there, as everywhere.
XPASS_TITLE = (
    "XPASS: marked xfail, and passed (gating in a suite with strict_xfail: true, or under "
    "run/gate --strict-xfail)"
)
# Budget sentences ("tokens 1,000 → 1,500 (+50%, …)"); scorer reasons read "token_budget: …".
BUDGET_PREFIXES = ("tokens ", "cost ", "latency ")


def as_data(comparison: Any) -> dict[str, Any]:
    """The dict shape of a `Comparison` (or the dict itself)."""
    return comparison.as_dict() if hasattr(comparison, "as_dict") else comparison


def divergence_from_dict(data: dict[str, Any]) -> Divergence:
    return Divergence(
        data["class"],
        data["position"],
        data["agent"],
        data["step"],
        data["label"],
        data.get("old"),
        data.get("new"),
        [Change(**c) for c in data.get("changes", ())],
    )


def describe_divergence(data: dict[str, Any], width: int = 76) -> str:
    """A divergence (as stored), naming the changed fields when both sides are structured."""
    return divergence_from_dict(data).describe(width)


def drift_text(outcome: Any, width: int = 70) -> str | None:
    """One line on a trial's request drift (a stored `TrialOutcome`), from its root: the
    first divergence from the recording when it came before the drifted call."""
    if not outcome.drifts:
        return None
    first = outcome.drifts[0]
    changes = [Change(**c) for c in first.get("changes", ())]
    what = changes[0].describe(width) if changes else "the request changed"
    more = f"; {len(outcome.drifts) - 1} more drifted call(s)" if len(outcome.drifts) > 1 else ""
    text = f"model call #{first['call']} at step {first['step']} ({first['agent']}): {what}{more}"
    cause = outcome.divergences[0] if outcome.divergences else None
    if cause is not None and cause["class"] != "request_drift":
        text = " ".join(describe_divergence(cause, width).split()) + f"; then {text}"
    return text


def pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}"


def points(value: float) -> str:
    return f"{value * 100:+.1f}".replace("-", "−")


def rate_line(data: dict[str, Any]) -> str:
    """`pass rate 100.0% → 97.7% (−2.3 points, 95% CI [−6.8, +0.0]; p = 0.5)`."""
    rate = data["pass_rate"]
    line = f"pass rate {pct(rate['baseline'])} → {pct(rate['current'])}"
    details = []
    if rate["delta"] is not None:
        details.append(f"{points(rate['delta'])} points")
    if rate["ci95"] is not None:
        low, high = rate["ci95"]
        details.append(f"95% CI [{points(low)}, {points(high)}]")
    if data["p_value"] is not None:
        details.append(f"sign test p = {data['p_value']:.3g}")
    if data["significant_drop"]:
        details.append("a significant drop")
    return line + (f" ({'; '.join(details)})" if details else "")


def trials_text(case: dict[str, Any]) -> str:
    """`passed 1/1 → 0/1 trials, score 1.00 → 0.50`; uncounted sides show their status."""
    sides = [case["baseline"], case["current"]]
    if all(side and side["trials"] for side in sides):
        text = "passed " + " → ".join(f"{s['passed_trials']}/{s['trials']}" for s in sides)
        text += " trials"
    else:  # added, removed, or only expected failures / skips (never counted)
        text = " → ".join(_side_text(side) for side in sides)
    before, after = sides
    if before and after and before["score"] is not None and after["score"] is not None:
        text += f", score {before['score']:.2f} → {after['score']:.2f}"
    return text


def _side_text(side: dict[str, Any] | None) -> str:
    if not side:
        return "—"
    if side["trials"]:
        verdict = "passed" if side["passed_trials"] == side["trials"] else side["status"]
        return f"{verdict} ({side['passed_trials']}/{side['trials']} trials passed)"
    return side["status"]


def _name(case: dict[str, Any]) -> str:
    return f"{case['suite']}/{case['case_id']}"


def _named(case: dict[str, Any]) -> str:
    """The case with the file and line it is written at, when known."""
    source = case.get("source")
    return f"{_name(case)} ({source})" if source else _name(case)


def _indent(text: str, prefix: str) -> str:
    return prefix + text.replace("\n", "\n" + prefix)


def _detailed(case: dict[str, Any]) -> list[str]:
    lines = [f"  {_named(case)}: {trials_text(case)}"]
    lines.extend(f"    - {reason}" for reason in case["reasons"][:5])
    if case["divergences"]:
        first = describe_divergence(case["divergences"][0])
        lines.append(_indent(f"first divergence — {first}", "    "))
    return lines


_SECTIONS = (
    ("could_not_run", "could not run now (not judged)"),
    ("newly_failing", "newly failing"),
    ("xpassed", XPASS_TITLE),
    ("budget_regression", "budget regressions (gating when both evals replayed the same usage)"),
    ("score_changed", "score changes"),
    ("flaky", "flaky (reported, not gating)"),
    ("behaviour_changed", "behaviour changed, scores equal (gating only with --fail-on-change)"),
    ("usage_changed", "tokens or cost changed, replayed (gating only with --fail-on-change)"),
    ("newly_passing", "newly passing"),
    ("added", "added (not in the baseline: reported, not gated)"),
    ("removed", "removed (only in the baseline)"),
)


def not_compared_lines(data: dict[str, Any]) -> list[str]:
    """Suites only one of the two evals ran: said once, never listed case by case."""
    apart = data.get("not_compared") or {}
    lines = []
    for key, text in (
        ("suites_only_in_baseline", "only in the baseline (not run now, not compared)"),
        ("suites_only_in_current", "only in this eval (no baseline, not compared)"),
    ):
        if apart.get(key):
            lines.append(f"suites {text}: {', '.join(apart[key])}")
    return ["", *lines] if lines else []


def comparison_text(comparison: Any, *, gate: bool = True) -> str:
    """The comparison as a one-screen text report, ending with the gate's verdict unless
    `gate` is false (`run` and `gate` print the eval's whole verdict after it instead)."""
    data = as_data(comparison)
    cases = data["cases"]
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for case in cases:
        by_kind.setdefault(case["kind"], []).append(case)
    lines = [
        f"compare {data['baseline_eval']} → {data['current_eval']}: {len(cases)} cases",
        rate_line(data),
    ]
    for kind, title in _SECTIONS:
        found = by_kind.get(kind, [])
        if not found:
            continue
        lines.append("")
        lines.append(f"{title} ({len(found)}):")
        for case in found[:MAX_LISTED]:
            if kind in ("could_not_run", "newly_failing", "flaky", "behaviour_changed"):
                lines.extend(_detailed(case))
            elif kind in ("budget_regression", "usage_changed"):
                lines.append(f"  {_name(case)}: {usage_text(case)}")
            else:
                lines.append(f"  {_name(case)}: {trials_text(case)}")
        if len(found) > MAX_LISTED:
            lines.append(f"  … and {len(found) - MAX_LISTED} more")
    unchanged = len(by_kind.get("unchanged", []))
    if unchanged:
        lines.append("")
        lines.append(f"unchanged: {unchanged} case(s)")
    lines.extend(not_compared_lines(data))
    if not gate:
        return "\n".join(lines)
    lines.append("")
    verdict = data["gate"]
    if verdict["failed"]:
        lines.append("gate: FAILED")
        lines.extend(f"  - {reason}" for reason in verdict["reasons"][:MAX_LISTED])
        if len(verdict["reasons"]) > MAX_LISTED:
            lines.append(f"  … and {len(verdict['reasons']) - MAX_LISTED} more")
    else:
        lines.append("gate: passed (no regression)")
    return "\n".join(lines)


def usage_text(case: dict[str, Any]) -> str:
    """A budget or usage change: its sentences, and whether the gate may judge it."""
    moved = case.get("budget") or case.get("usage")
    if not moved:  # a comparison stored before these fields: the sentences are its reasons
        moved = [r for r in case["reasons"] if r.startswith(BUDGET_PREFIXES)]
    text = "; ".join(moved)
    if case.get("same_recorded_usage") is False:
        text += " (the recordings' usage differs: reported, not gated)"
    return text
