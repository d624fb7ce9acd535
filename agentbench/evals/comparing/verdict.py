"""The one verdict on an eval: passed, failed or error, the reasons, and the exit code.

`decide` reaches it once, from everything that can decide it, worst first: suites that could
not be loaded (an error, exit 2), a comparison that could not be made (exit 2 or 3), an eval
that did not finish or lacks trials it planned (exit 3, naming the `--resume` command), trials
that could not run (an error, exit 3; `--fail-under` counts them as failures instead, and a
note says so, except a trial whose live model failed: an outage is never the code's), then
the gate — the shards the eval lacks, and the baseline comparison's gate (`evals.comparing.gate`)
or, without a baseline, the eval's own rule (every counted trial passes, or the pass rate reaches
`--fail-under`), with an unexpected pass (XPASS) of a strict suite failing either. Every
output renders this object and none re-derives it: the terminal's `gate: …` line, `--json`'s
`verdict`, the JUnit `gate` testcase, the Markdown heading, the HTML banner, the exit code.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentbench.errors import UsageError, one_line
from agentbench.evals.comparing.gate import StrictXfail, clip, gate, xpass_reason

if TYPE_CHECKING:
    from agentbench.evals.comparing.comparison import Comparison
    from agentbench.evals.comparing.stats import Summary, TrialOutcome
    from agentbench.evals.running.completion import Completion
    from agentbench.evals.running.shards import Shard, ShardSet

EXIT_OK, EXIT_GATE, EXIT_USAGE, EXIT_INFRA = 0, 1, 2, 3
PASSED, FAILED, ERROR = "passed", "failed", "error"
MAX_REASONS = 50  # per kind of reason; the rest are counted in one more sentence
MAX_SHOWN = 20  # reasons a text rendering lists; the rest are counted


@dataclass(frozen=True)
class GateRules:
    """The options a gate is run with (shared by `run` and `gate`)."""

    fail_under: float | None = None
    fail_on_change: bool = False
    strict_xfail: StrictXfail = field(default_factory=StrictXfail)


@dataclass
class Verdict:
    """The answer every output gives. `comparison` and `failure` travel with it for the
    renderers (the comparison's cases) and the command (the exception to raise last)."""

    status: str  # passed | failed | error
    exit_code: int
    reasons: list[str]
    basis: str  # what the eval was judged by: a baseline, or the rule without one
    notes: list[str] = field(default_factory=list)  # said beside it, never deciding it
    strict_xfail: StrictXfail = field(default_factory=StrictXfail)
    comparison: Comparison | None = None
    failure: Exception | None = None

    @property
    def passed(self) -> bool:
        return self.status == PASSED

    @property
    def words(self) -> str:
        """`passed`, `FAILED` or `ERROR`: the verdict as every output spells it."""
        return {PASSED: "passed", FAILED: "FAILED", ERROR: "ERROR"}[self.status]

    def line(self) -> str:
        """The terminal's one line: `gate: passed (…)`, `gate: FAILED` or `gate: ERROR (exit 2)`."""
        if self.passed:
            return f"gate: passed ({self.basis})"
        if self.status == ERROR:
            return f"gate: ERROR (exit {self.exit_code})"
        return "gate: FAILED"

    def text(self) -> str:
        """The line, then each reason (the first MAX_SHOWN), then the notes."""
        lines = [self.line()]
        lines.extend(f"  - {reason}" for reason in self.reasons[:MAX_SHOWN])
        if len(self.reasons) > MAX_SHOWN:
            lines.append(f"  … and {len(self.reasons) - MAX_SHOWN} more")
        if not self.passed:
            lines.append(f"  judged by: {self.basis}")
        lines.extend(f"  note: {note}" for note in self.notes)
        return "\n".join(lines)

    def xpass_fails(self, suite: str) -> bool:
        """An XPASS of this suite's is a failure (strict), not a note."""
        return self.strict_xfail.applies(suite)

    def as_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "exit_code": self.exit_code,
            "reasons": list(self.reasons),
            "basis": self.basis,
            "notes": list(self.notes),
            "strict_xfail": self.strict_xfail.as_data(),
        }


def decide(
    summary: Summary,
    outcomes: Iterable[TrialOutcome],
    *,
    rules: GateRules,
    suite_errors: Sequence[str] = (),
    comparison: Comparison | None = None,
    baseline_note: str | None = None,
    failure: Exception | None = None,
    shards: ShardSet | None = None,
    part: Shard | None = None,
    completion: Completion | None = None,
) -> Verdict:
    """The verdict on an eval (see the module docstring). `part` is the shard `run --shard`
    ran: its own trials are judged, by the rule without a baseline, and the verdict says so;
    `shards` are the shards a stored eval holds (`gate`), partial ones failing it;
    `completion` what it planned against what it holds, an unfinished eval being an error."""
    seen = _Seen.of(outcomes, rules.strict_xfail)
    errors = [f"suite error: {clip(error)}" for error in suite_errors]
    if failure is not None:
        errors.append(f"the comparison with the baseline could not be made: {one_line(failure)}")
    unfinished = completion.problem() if completion is not None else None
    if unfinished is not None:
        errors.append(unfinished)
    notes = [baseline_note] if baseline_note else []
    if rules.fail_under is None:
        infra, said = seen.errors, seen.keys["errors"]
    else:
        # --fail-under counts a trial that could not run as a failure of the rate, and says
        # so; an outage of the live model is never the code's, so it stays an error.
        infra, said = seen.outages, seen.keys["outages"]
        if seen.counted_errors:
            notes.append(_counted_errors_note(seen.counted_errors))
    reasons = errors + infra
    if shards is not None and part is None:
        reasons += [f"The eval is partial: {problem}." for problem in shards.problems()]
    if comparison is not None:
        # The comparison's gate, but for the cases named above as errors already.
        reasons += gate(
            comparison,
            fail_under=rules.fail_under,
            fail_on_change=rules.fail_on_change,
            strict_xfail=rules.strict_xfail,
            said=said,
        )[1]
    elif rules.fail_under is not None:
        reasons += gate(None, fail_under=rules.fail_under, current_pass_rate=summary.pass_rate)[1]
        reasons += seen.strict_xpasses
    else:
        reasons += seen.failing + seen.strict_xpasses
    if suite_errors:
        status, code = ERROR, EXIT_USAGE
    elif failure is not None:
        status, code = ERROR, EXIT_USAGE if isinstance(failure, UsageError) else EXIT_INFRA
    elif infra or unfinished:
        status, code = ERROR, EXIT_INFRA
    else:
        status, code = (FAILED, EXIT_GATE) if reasons else (PASSED, EXIT_OK)
    return Verdict(
        status,
        code,
        reasons,
        _basis(part, comparison, rules.fail_under),
        notes,
        rules.strict_xfail,
        comparison=comparison,
        failure=failure,
    )


def _basis(part: Shard | None, comparison: Comparison | None, fail_under: float | None) -> str:
    """What the eval was judged by."""
    if part is not None:
        return (
            f"shard {part} alone, by the rule without a baseline: {_own_rule(fail_under)}; "
            "`agentbench merge` the shards, then `agentbench gate` compares the whole eval "
            "with its baseline"
        )
    if comparison is not None:
        return f"compared with baseline {comparison.baseline_eval}"
    return f"no baseline compared: {_own_rule(fail_under)}"


def _counted_errors_note(sentences: list[str]) -> str:
    shown = "; ".join(sentences[:3])
    more = f"; and {len(sentences) - 3} more" if len(sentences) > 3 else ""
    return (
        f"{len(sentences)} case(s) could not run, and --fail-under counts their trials as "
        f"failures: {shown}{more}"
    )


def _own_rule(fail_under: float | None) -> str:
    if fail_under is not None:
        return f"the pass rate must reach {fail_under:.0%}"
    return "every counted trial must pass"


@dataclass
class _Seen:
    """What the eval's own trials say, in one pass (they may be streamed from disk): the
    failing cases, the cases whose trials could not run (`errors`: all of them; `outages`:
    those whose live model failed; `counted_errors`: the others), the strict suites'
    XPASSes."""

    failing: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    outages: list[str] = field(default_factory=list)
    counted_errors: list[str] = field(default_factory=list)
    strict_xpasses: list[str] = field(default_factory=list)
    keys: dict[str, set[tuple[str, str]]] = field(default_factory=lambda: defaultdict(set))

    @classmethod
    def of(cls, outcomes: Iterable[TrialOutcome], strict: StrictXfail) -> _Seen:
        seen = cls()
        counts = dict.fromkeys(("failing", "errors", "outages", "counted_errors"), 0)
        counts["strict_xpasses"] = 0
        for outcome in outcomes:
            for kind in _kinds(outcome, strict):
                if outcome.key in seen.keys[kind]:
                    continue
                seen.keys[kind].add(outcome.key)
                counts[kind] += 1
                if counts[kind] <= MAX_REASONS:
                    getattr(seen, kind).append(_sentence(kind, outcome))
        for kind, count in counts.items():
            if count > MAX_REASONS:
                getattr(seen, kind).append(f"… and {count - MAX_REASONS} more such case(s).")
        return seen


def _kinds(outcome: TrialOutcome, strict: StrictXfail) -> tuple[str, ...]:
    if outcome.status == "failed":
        return ("failing",)
    if outcome.status == "error":
        return ("errors", "outages" if outcome.live_model_failed else "counted_errors")
    if outcome.status == "xpassed" and strict.applies(outcome.suite):
        return ("strict_xpasses",)
    return ()


def _sentence(kind: str, outcome: TrialOutcome) -> str:
    name = f"{outcome.suite}/{outcome.case_id}"
    where = f" ({outcome.source})" if outcome.source else ""
    if kind == "strict_xpasses":
        return xpass_reason(name, outcome.source)
    if kind in ("errors", "outages", "counted_errors"):
        first = (outcome.error or "error").strip().splitlines()[0]
        return f"{name}{where} could not run (trial {outcome.trial}): {clip(first)}"
    reasons = outcome.reasons()
    detail = f": {clip(reasons[0])}" if reasons else ""
    sentence = f"{name}{where} fails{detail}"
    return sentence if sentence.endswith(("…", ".")) else sentence + "."
