"""JUnit XML for CI test reporters (GitLab, GitHub JUnit actions, Jenkins).

One `<testsuite>` per agentbench suite and one `<testcase>` per case and trial
(`classname` = suite, `name` = `case_id[trial N]`, `time` in seconds, `file` and `line` of the
case), inside one `<testsuites>`. A failed trial is a `<failure>` whose message is the first
scorer reason and whose body lists them all; a trial that could not run is an `<error>`; a
skipped case or an expected failure (XFAIL) is `<skipped>`. An unexpected pass (XPASS) is, as
in pytest's JUnit files, a passing testcase with a note in `<system-out>`, or a `<failure>`
when its suite is strict (`--strict-xfail`, `strict_xfail: true`).

The eval's verdict is not one case's, so it travels as a testcase of its own: with a verdict,
a last `<testsuite name="agentbench.gate">` holds one `<testcase classname="agentbench"
name="gate">` that passes, fails (`<failure type="agentbench.gate">`, the reasons in its body)
or errs (`<error type="agentbench.gate">`) exactly as the command exits — so a missing shard,
a suite that could not load or a pass rate under the threshold shows in the test reporter
too, and a reporter that counts failures fails the build with the exit code. Characters XML
1.0 cannot carry are dropped, and the document is redacted as a whole before anyone writes it.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from pathlib import Path

from agentbench.ci.paths import split_source
from agentbench.evals.comparing.compare_text import drift_text
from agentbench.evals.comparing.stats import TrialOutcome
from agentbench.evals.comparing.verdict import Verdict
from agentbench.trace.redaction.redactor import Redactor

GATE_SUITE = "agentbench.gate"

# Control characters (other than tab and newlines) and lone surrogates are invalid in XML 1.0.
_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _clean(text: str | None) -> str:
    return _INVALID_XML.sub("", text or "")


def _seconds(ms: float) -> str:
    return f"{ms / 1000:.3f}"


def _testcase(outcome: TrialOutcome, root: Path | None, verdict: Verdict | None) -> ET.Element:
    attributes = {
        "classname": outcome.suite,
        "name": f"{outcome.case_id}[trial {outcome.trial}]",
        "time": _seconds(outcome.duration_ms),
    }
    file, line = split_source(outcome.source, root)
    if file is not None:
        attributes["file"] = file
    if line is not None:
        attributes["line"] = str(line)
    case = ET.Element("testcase", {k: _clean(v) for k, v in attributes.items()})
    if outcome.status == "failed":
        reasons = outcome.reasons() or [outcome.error or "failed"]
        failure = ET.SubElement(
            case, "failure", {"message": _clean(reasons[0]), "type": "agentbench.failed"}
        )
        failure.text = _clean("\n".join(reasons))
    elif outcome.status == "error":
        error = ET.SubElement(
            case,
            "error",
            {"message": _clean((outcome.error or "error").splitlines()[0]), "type": "error"},
        )
        error.text = _clean(outcome.error)
    elif outcome.status == "skipped":
        ET.SubElement(case, "skipped", {"message": _clean(outcome.error or "skipped")})
    elif outcome.status == "xfailed":
        note = f"expected failure: {outcome.error}" if outcome.error else "expected failure"
        skipped = ET.SubElement(case, "skipped", {"message": _clean(note)})
        skipped.text = _clean("\n".join(outcome.reasons()))
    notes = []
    if outcome.status == "xpassed" and _strict(outcome, verdict):
        message = "XPASS(strict): marked xfail, and passed; strict suites fail the gate on it"
        ET.SubElement(case, "failure", {"message": message, "type": "agentbench.xpass_strict"})
    elif outcome.status == "xpassed":
        notes.append("passed unexpectedly (XPASS: the case is marked xfail)")
    notes += _drift_notes(outcome)
    if notes:
        ET.SubElement(case, "system-out").text = _clean("\n".join(notes))
    return case


def _drift_notes(outcome: TrialOutcome) -> list[str]:
    """What replaying the recording showed, when it did not fail the trial by itself."""
    notes = []
    drift = drift_text(outcome, 200)
    if drift is not None:
        failed_by_it = outcome.drift_failed
        counted = "" if failed_by_it else " (reported, not counted: --allow-drift)"
        if outcome.continued_live:
            counted = " (reported, not counted: continued live)"
        notes.append(f"request drift{counted}: {drift}")
        verdict = outcome.divergence_verdict()
        if verdict is not None:
            notes.append(verdict)
    return notes


def _strict(outcome: TrialOutcome, verdict: Verdict | None) -> bool:
    return verdict is not None and verdict.xpass_fails(outcome.suite)


def _counts(outcomes: list[TrialOutcome], verdict: Verdict | None) -> dict[str, int]:
    return {
        "tests": len(outcomes),
        "failures": sum(
            o.status == "failed" or (o.status == "xpassed" and _strict(o, verdict))
            for o in outcomes
        ),
        "errors": sum(o.status == "error" for o in outcomes),
        "skipped": sum(o.status in ("skipped", "xfailed") for o in outcomes),
    }


def _attributes(counts: dict[str, int], ms: float) -> dict[str, str]:
    return {**{k: str(v) for k, v in counts.items()}, "time": _seconds(ms)}


def _gate_case(verdict: Verdict) -> ET.Element:
    """The verdict as a testcase: passing, failing or erring as the command exits."""
    case = ET.Element("testcase", {"classname": "agentbench", "name": "gate", "time": "0.000"})
    if not verdict.passed:
        first = verdict.reasons[0] if verdict.reasons else verdict.basis
        words = "gate failed" if verdict.status == "failed" else "gate error"
        tag = "failure" if verdict.status == "failed" else "error"
        element = ET.SubElement(
            case,
            tag,
            {
                "message": _clean(f"{words} (exit {verdict.exit_code}): {first}"),
                "type": "agentbench.gate",
            },
        )
        element.text = _clean("\n".join(verdict.reasons))
    out = [verdict.line(), f"judged by: {verdict.basis}", *(f"note: {n}" for n in verdict.notes)]
    ET.SubElement(case, "system-out").text = _clean("\n".join(out))
    return case


def junit_xml(
    outcomes: Iterable[TrialOutcome],
    *,
    suite_name: str = "agentbench",
    root: Path | None = None,
    verdict: Verdict | None = None,
) -> bytes:
    """The JUnit document (UTF-8 bytes with an XML declaration); with `verdict`, its `gate`
    testcase last."""
    items = sorted(outcomes, key=lambda o: (o.suite, o.case_id, o.trial))
    totals = _counts(items, verdict)
    if verdict is not None:
        totals["tests"] += 1
        totals["failures"] += verdict.status == "failed"
        totals["errors"] += verdict.status == "error"
    time_ms = sum(o.duration_ms for o in items)
    top = ET.Element("testsuites", {"name": _clean(suite_name), **_attributes(totals, time_ms)})
    for suite in sorted({o.suite for o in items}):
        mine = [o for o in items if o.suite == suite]
        counts = _attributes(_counts(mine, verdict), sum(o.duration_ms for o in mine))
        element = ET.SubElement(top, "testsuite", {"name": _clean(suite), **counts})
        element.extend(_testcase(o, root, verdict) for o in mine)
    if verdict is not None:
        failed = verdict.status == "failed"
        counts = {"tests": 1, "failures": int(failed), "errors": int(verdict.status == "error")}
        element = ET.SubElement(
            top, "testsuite", {"name": GATE_SUITE, **_attributes({**counts, "skipped": 0}, 0.0)}
        )
        element.append(_gate_case(verdict))
    ET.indent(top)
    document = ET.tostring(top, encoding="utf-8", xml_declaration=True).decode()
    return Redactor().document(document).encode()


def write_junit(
    path: str | Path,
    run_outcomes: Iterable[TrialOutcome],
    *,
    suite_name: str = "agentbench",
    root: Path | None = None,
    verdict: Verdict | None = None,
) -> Path:
    """Write the JUnit file (creating its folder); returns the path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(junit_xml(run_outcomes, suite_name=suite_name, root=root, verdict=verdict))
    return target
