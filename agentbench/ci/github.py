"""GitHub Actions annotations: `::error file=…,line=…,title=…::message` at the failing case.

A workflow command printed on stdout becomes an annotation on the pull request's diff, at the
case's line in its suite file. Failing cases (one annotation per case, not per trial) are
errors — titled as regressions when the baseline passed them; flaky cases, budget regressions
and behaviour changes (scores equal, trajectory not) from the comparison are warnings; a
significant pass-rate drop is an error without a file. An unexpected pass (XPASS) is an error
in a strict suite, a warning elsewhere. With the eval's verdict, one that did not pass comes
first, as an error naming its reasons (a missing shard or a suite that could not load has no
case to point at).
Values are escaped by GitHub's workflow-command rules: `%`, `\\r` and `\\n` in messages, and
also `:` and `,` in properties.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from agentbench.ci.paths import split_source
from agentbench.evals.comparing.compare_text import as_data, describe_divergence, pct, points
from agentbench.evals.comparing.stats import TrialOutcome
from agentbench.evals.comparing.verdict import Verdict
from agentbench.trace.redaction.redactor import Redactor

MAX_ANNOTATIONS = 50  # GitHub keeps at most 50 annotations of each type per job


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def command(level: str, message: str, *, title: str, source: str | None, root: Path | None) -> str:
    """One workflow command line (`level` is error, warning or notice)."""
    # Redacted before escaping: `%0A` would glue a secret to the text around it.
    message, title = (Redactor().document(text) for text in (message, title))
    file, line = split_source(source, root)
    properties = [f"file={escape_property(file)}"] if file else []
    if file and line is not None:
        properties.append(f"line={line}")
    properties.append(f"title={escape_property(title)}")
    return f"::{level} {','.join(properties)}::{escape_data(message)}"


def github_annotations(
    outcomes: Iterable[TrialOutcome],
    comparison: Any = None,
    *,
    root: Path | None = None,
    limit: int = MAX_ANNOTATIONS,
    verdict: Verdict | None = None,
) -> list[str]:
    """Workflow-command lines for the verdict, and failing, regressed, flaky, over-budget,
    changed and unexpectedly passing cases."""
    outcomes = list(outcomes)
    data = as_data(comparison) if comparison is not None else None
    kinds = {(c["suite"], c["case_id"]): c for c in data["cases"]} if data else {}
    errors: list[tuple[int, str]] = []
    warnings: list[str] = []
    seen: set[tuple[str, str]] = set()
    for outcome in outcomes:
        if outcome.status == "xpassed" and outcome.key not in seen:
            seen.add(outcome.key)
            strict, line = _xpass(outcome, verdict, root)
            if strict:
                errors.append((1, line))
            else:
                warnings.append(line)
            continue
        if outcome.status not in ("failed", "error") or outcome.key in seen:
            continue
        seen.add(outcome.key)
        change = kinds.get(outcome.key)
        regressed = change is not None and change["kind"] == "newly_failing"
        title = _failing_title(outcome, regressed)
        reasons = [outcome.error] if outcome.status == "error" else outcome.reasons()
        message = "\n".join(r for r in reasons if r) or outcome.status
        line = command("error", message, title=title, source=outcome.source, root=root)
        errors.append((0 if regressed else 1, line))
    for change in data["cases"] if data else ():
        if change["kind"] not in ("flaky", "budget_regression", "behaviour_changed"):
            continue
        name = f"{change['suite']}/{change['case_id']}"
        source = _source_of(change, outcomes)
        if change["kind"] == "flaky":
            title, message = f"agentbench: {name} is flaky", _trials(change)
        elif change["kind"] == "behaviour_changed":
            title = f"agentbench: {name} behaves differently (scores equal)"
            message = "first divergence — " + describe_divergence(change["divergences"][0])
        else:
            title, message = f"agentbench: {name} is over budget", "\n".join(change["reasons"])
        warnings.append(command("warning", message, title=title, source=source, root=root))
    lines = [line for _, line in sorted(errors, key=lambda item: item[0])]
    if data and data["significant_drop"]:
        rate = data["pass_rate"]
        lines.insert(
            0,
            f"::error title={escape_property('agentbench: pass rate dropped')}::"
            + escape_data(
                f"{pct(rate['baseline'])} → {pct(rate['current'])} "
                f"({points(rate['delta'])} points, sign test p = {data['p_value']:.3g})"
            ),
        )
    if verdict is not None and not verdict.passed:
        shown = "\n".join(verdict.reasons[:10]) or verdict.basis
        title = f"agentbench: gate {verdict.words} (exit {verdict.exit_code})"
        lines.insert(0, command("error", shown, title=title, source=None, root=root))
    lines.extend(warnings)
    if len(lines) > limit:
        hidden = len(lines) - limit + 1
        lines = [*lines[: limit - 1], f"::notice::{hidden} more agentbench annotations not shown"]
    return lines


def _failing_title(outcome: TrialOutcome, regressed: bool) -> str:
    name = f"agentbench: {outcome.suite}/{outcome.case_id}"
    if outcome.status == "error":
        return f"{name} could not run"
    return f"{name} regressed (passed in the baseline)" if regressed else f"{name} failed"


def _xpass(outcome: TrialOutcome, verdict: Verdict | None, root: Path | None) -> tuple[bool, str]:
    """Whether the unexpected pass fails the gate (a strict suite's), and its annotation."""
    strict = verdict is not None and verdict.xpass_fails(outcome.suite)
    title = f"agentbench: {outcome.suite}/{outcome.case_id} passed unexpectedly (XPASS)"
    message = "marked xfail, and passed"
    if strict:
        assert verdict is not None
        why = (
            "--strict-xfail"
            if verdict.strict_xfail.every_suite
            else "its suite says strict_xfail: true"
        )
        message += f": {why}, so the gate fails"
    level = "error" if strict else "warning"
    return strict, command(level, message, title=title, source=outcome.source, root=root)


def _trials(change: dict[str, Any]) -> str:
    parts = []
    for side in ("baseline", "current"):
        found = change[side]
        if found:
            parts.append(f"{side}: {found['passed_trials']}/{found['trials']} trials passed")
    return "; ".join(parts)


def _source_of(change: dict[str, Any], outcomes: list[TrialOutcome]) -> str | None:
    key = (change["suite"], change["case_id"])
    return next((o.source for o in outcomes if o.key == key and o.source), None)
