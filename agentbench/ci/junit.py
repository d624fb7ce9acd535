"""JUnit XML for CI test reporters (GitLab, GitHub JUnit actions, Jenkins).

One `<testsuite>` per agentbench suite and one `<testcase>` per case and trial
(`classname` = suite, `name` = `case_id[trial N]`, `time` in seconds, `file` and `line` of the
case), inside one `<testsuites>`. A failed trial is a `<failure>` whose message is the first
scorer reason and whose body lists them all; a trial that could not run is an `<error>`; a
skipped case or an expected failure is `<skipped>`. An unexpected pass is a passing testcase
with a note in `<system-out>`. Characters XML 1.0 cannot carry are dropped, and the document
is redacted as a whole before anyone writes it.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from pathlib import Path

from agentbench.ci.paths import split_source
from agentbench.evals.compare_text import drift_text
from agentbench.evals.stats import TrialOutcome
from agentbench.trace.redact import Redactor

# Control characters (other than tab and newlines) and lone surrogates are invalid in XML 1.0.
_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _clean(text: str | None) -> str:
    return _INVALID_XML.sub("", text or "")


def _seconds(ms: float) -> str:
    return f"{ms / 1000:.3f}"


def _testcase(outcome: TrialOutcome, root: Path | None) -> ET.Element:
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
    if outcome.status == "xpassed":
        notes.append("passed unexpectedly (the case is marked xfail)")
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
    if notes:
        ET.SubElement(case, "system-out").text = _clean("\n".join(notes))
    return case


def _counts(outcomes: list[TrialOutcome]) -> dict[str, str]:
    return {
        "tests": str(len(outcomes)),
        "failures": str(sum(o.status == "failed" for o in outcomes)),
        "errors": str(sum(o.status == "error" for o in outcomes)),
        "skipped": str(sum(o.status in ("skipped", "xfailed") for o in outcomes)),
        "time": _seconds(sum(o.duration_ms for o in outcomes)),
    }


def junit_xml(
    outcomes: Iterable[TrialOutcome], *, suite_name: str = "agentbench", root: Path | None = None
) -> bytes:
    """The JUnit document (UTF-8 bytes with an XML declaration)."""
    items = sorted(outcomes, key=lambda o: (o.suite, o.case_id, o.trial))
    top = ET.Element("testsuites", {"name": _clean(suite_name), **_counts(items)})
    for suite in sorted({o.suite for o in items}):
        mine = [o for o in items if o.suite == suite]
        element = ET.SubElement(top, "testsuite", {"name": _clean(suite), **_counts(mine)})
        element.extend(_testcase(o, root) for o in mine)
    ET.indent(top)
    document = ET.tostring(top, encoding="utf-8", xml_declaration=True).decode()
    return Redactor().document(document).encode()


def write_junit(
    path: str | Path,
    run_outcomes: Iterable[TrialOutcome],
    *,
    suite_name: str = "agentbench",
    root: Path | None = None,
) -> Path:
    """Write the JUnit file (creating its folder); returns the path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(junit_xml(run_outcomes, suite_name=suite_name, root=root))
    return target
