"""Compare two stored evals: per-case changes, the pass-rate delta with its uncertainty, the gate.

`compare_evals(store, baseline, current)` reads both evals' results from the trace store, folds
each case's trials into one side per eval (`case_changes`), classifies the change, aligns the
stored trajectories of every case (so a newly failing case shows the first step where it
behaved differently, and a case whose scores did not move but whose trajectory did is
`behaviour_changed`), and tests whether the pass rate dropped (`significance`). When both
evals replayed their cassettes, it also checks, for each case whose tokens or cost moved,
whether both sides were served the same recorded usage (`recorded_usage`): only then is the
change the code's, and the gate's to judge. The result is a `comparison.Comparison`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import orjson

from agentbench.errors import UsageError
from agentbench.evals.comparing.baseline import stored_evals
from agentbench.evals.comparing.case_changes import (
    CaseChange,
    CaseSide,
    classify,
    fold,
    mark_behaviour_changed,
    sort_key,
)
from agentbench.evals.comparing.comparison import Comparison
from agentbench.evals.comparing.gate import StrictXfail, gate
from agentbench.evals.comparing.significance import (
    CaseCounts,
    bootstrap_delta_ci,
    pooled_delta,
    sign_test_p,
)
from agentbench.evals.comparing.stats import TrialOutcome
from agentbench.evals.storage import results_store
from agentbench.replay.convert import conversations
from agentbench.replay.diff import Divergence, align, by_cause
from agentbench.replay.drift import Change
from agentbench.replay.stored_events import events_of
from agentbench.replay.trajectory import Step, model_call_position, trajectory
from agentbench.trace._json import loads
from agentbench.trace.schema import RunTrace


def compare_evals(
    store: Any,
    baseline_eval_id: str,
    current_eval_id: str,
    *,
    budget_pct: float = 20.0,
    latency_floor_ms: float = 500.0,
    fail_under: float | None = None,
    fail_on_change: bool = False,
    strict_xfail: bool = False,
    resamples: int = 2000,
    seed: int = 0,
) -> Comparison:
    """Compare `current_eval_id` with `baseline_eval_id`, both stored in `store`.

    Latency is judged against the budget only when both evals called a live model, and then
    only an increase of more than `latency_floor_ms` too: live cases on a shared two-core
    machine vary by a few hundred milliseconds between identical runs. Tokens and cost are
    judged more closely when neither did (see `case_changes`). `fail_under`,
    `fail_on_change` and `strict_xfail` (every suite's XPASS fails; the current eval's
    strict suites always do) are passed on to the gate.
    """
    sides: dict[str, dict[tuple[str, str], CaseSide]] = {}
    for eval_id in (baseline_eval_id, current_eval_id):
        if not results_store.eval_exists(store, eval_id):
            raise UsageError(f"no eval {eval_id!r} in {store.path}")
        sides[eval_id] = _folded(results_store.stored_outcomes(store, eval_id).values())
    before, after = sides[baseline_eval_id], sides[current_eval_id]
    # Cases of a suite that only one eval ran are not compared (nor listed case by case):
    # running one suite against a baseline of four does not remove the other three.
    suites_before, suites_after = {s for s, _ in before}, {s for s, _ in after}
    shared = suites_before & suites_after
    configs = [results_store.eval_config(store, e) for e in (baseline_eval_id, current_eval_id)]
    judge_latency = all(config.get("live") is True for config in configs)
    replayed = not any(config.get("live") is True for config in configs)
    changes = [
        classify(
            suite,
            case_id,
            before.get((suite, case_id)),
            after.get((suite, case_id)),
            budget_pct=budget_pct,
            latency_floor_ms=latency_floor_ms,
            judge_latency=judge_latency,
            judge_usage=replayed,
        )
        for suite, case_id in sorted(before.keys() | after.keys())
        if suite in shared
    ]
    _attach_trajectories(store, changes, usage=replayed)
    for change in changes:
        mark_behaviour_changed(change)
        if change.kind == "unchanged":  # the same steps twice: nothing to show
            change.baseline_steps, change.current_steps = [], []
    changes.sort(key=sort_key)
    paired = [c for c in changes if _counted(c.baseline) and _counted(c.current)]
    # Rates, delta and test over the cases both evals ran: an added or removed case moves
    # neither side's rate (added ones are listed, and gate only through --fail-under).
    both = [c for c in changes if c.baseline is not None and c.current is not None]
    paired_counts = [_counts(c) for c in both]
    comparison = Comparison(
        baseline_eval=baseline_eval_id,
        current_eval=current_eval_id,
        baseline_rate=_rate(c.baseline for c in both),
        current_rate=_rate(c.current for c in both),
        delta=pooled_delta(paired_counts),
        ci95=bootstrap_delta_ci(paired_counts, resamples=resamples, seed=seed),
        p_value=sign_test_p([_fraction_delta(c) for c in paired]) if paired else None,
        paired_cases=len(paired),
        cases=changes,
        suites_only_in_baseline=sorted(suites_before - suites_after),
        suites_only_in_current=sorted(suites_after - suites_before),
        baseline_version=_code_version(store, baseline_eval_id),
        replayed=replayed,
    )
    comparison.gate_failed, comparison.gate_reasons = gate(
        comparison,
        fail_under=fail_under,
        fail_on_change=fail_on_change,
        current_pass_rate=_rate(after.values()),  # --fail-under is about the whole eval
        strict_xfail=StrictXfail.of(strict_xfail, configs[1]),
    )
    return comparison


def _code_version(store: Any, eval_id: str) -> str | None:
    return next((e.code_version for e in stored_evals(store) if e.eval_id == eval_id), None)


def _folded(outcomes: Iterable[TrialOutcome]) -> dict[tuple[str, str], CaseSide]:
    by_case: dict[tuple[str, str], list[TrialOutcome]] = defaultdict(list)
    for outcome in outcomes:
        by_case[outcome.key].append(outcome)
    return {key: fold(trials) for key, trials in by_case.items()}


def _counted(side: CaseSide | None) -> bool:
    return side is not None and side.trials > 0


def _fraction_delta(change: CaseChange) -> float:
    assert change.baseline is not None and change.current is not None
    return (change.current.fraction or 0.0) - (change.baseline.fraction or 0.0)


def _counts(change: CaseChange) -> CaseCounts:
    base, cur = change.baseline, change.current
    return CaseCounts(
        base.passed_trials if base else 0,
        base.trials if base else 0,
        cur.passed_trials if cur else 0,
        cur.trials if cur else 0,
    )


def _rate(sides: Iterable[CaseSide | None]) -> float | None:
    present = [s for s in sides if s is not None]
    trials = sum(s.trials for s in present)
    return sum(s.passed_trials for s in present) / trials if trials else None


def _runs(side: CaseSide | None) -> list[str]:
    """The root run of each turn of the side's trial."""
    if side is None or side.run_id is None:
        return []
    return side.turn_runs or [side.run_id]


def _attach_trajectories(store: Any, changes: list[CaseChange], *, usage: bool = False) -> None:
    """Each case's steps on both sides (every turn, in order), aligned; read in one go. With
    `usage`, a case whose tokens or cost moved learns whether both sides were served the same
    recorded usage."""
    wanted = {run for c in changes for side in (c.baseline, c.current) for run in _runs(side)}
    # A run that is not in the store (results imported without their traces) is left out; a
    # stored run that cannot be read back is an error, never silently "no divergence".
    traces = conversations(store, sorted(wanted), missing_ok=True) if wanted else {}
    steps = {
        run_id: trajectory([e for t in found for e in events_of(t)])
        for run_id, found in traces.items()
    }
    for change in changes:
        if usage and (change.usage or change.budget):
            before, after = (
                recorded_usage(_runs(s), traces) for s in (change.baseline, change.current)
            )
            change.same_recorded_usage = before is not None and before == after
            if not change.same_recorded_usage:
                change.reasons.append(
                    "the two evals replayed recordings whose usage differs (or is not known): "
                    "reported, not gated"
                )
        turns = [list(steps.get(r, ())) for r in _runs(change.current)]
        change.baseline_steps = [s for r in _runs(change.baseline) for s in steps.get(r, ())]
        change.current_steps = [s for turn in turns for s in turn]
        if change.baseline_steps and change.current_steps:
            change.divergences = align(change.baseline_steps, change.current_steps)
        if change.current is not None and change.current.drifts:
            # Replayed answers keep the steps alike when only the prompt changed: the drifted
            # request is then where the runs diverged.
            change.divergences = _drift_divergences(change) + change.divergences
        change.divergences = by_cause(change.divergences)
        if len(turns) > 1:
            _name_turns(change.divergences, turns)


def recorded_usage(runs: list[str], traces: dict[str, list[RunTrace]]) -> str | None:
    """What the recording said the model calls of these runs (each turn's, with the runs it
    handed off to) used: the `usage` of every recorded response body, in order, as one text.
    Two sides with the same text were served the same recorded usage, so whatever their
    tokens and cost differ by is the code's. None when a call's recorded body is not kept
    (a run stored without it, or not stored at all): then nothing can be established."""
    found: list[Any] = []
    for run in runs:
        if run not in traces:
            return None
        for trace in traces[run]:
            for call in sorted(trace.llm_calls, key=lambda c: c.seq):
                response = loads(call.response) if call.response else None
                if not isinstance(response, dict) or not isinstance(response.get("raw"), dict):
                    return None
                found.append([call.purpose, _usage_of(response["raw"])])
    return orjson.dumps(found, option=orjson.OPT_SORT_KEYS).decode() if runs else None


def _usage_of(raw: dict[str, Any]) -> Any:
    """The usage a recorded body reports: its `usage`, or a stream's chunks' usages."""
    if "usage" in raw:
        return raw["usage"]
    chunks = raw.get("chunks")
    if isinstance(chunks, list):
        return [c["usage"] for c in chunks if isinstance(c, dict) and c.get("usage")]
    return None


def _name_turns(divergences: list[Divergence], turns: list[list[Step]]) -> None:
    """Step numbers restart with each turn of a conversation: say which turn a difference is
    in, so a turn-1 cause is not read as a step of the last turn."""
    ends, total = [], 0
    for turn in turns:
        total += len(turn)
        ends.append(total)
    for divergence in divergences:
        turn = next((i for i, end in enumerate(ends, 1) if divergence.position < end), len(ends))
        divergence.label = f"{divergence.label}, turn {turn} of {len(turns)}"


def _drift_divergences(change: CaseChange) -> list[Divergence]:
    """The current side's drifted requests, less those the baseline drifted in the same way:
    a case that drifts from its cassette identically in both evals behaved the same in both."""
    steps = change.current_steps
    already = [_drift_key(d) for d in change.baseline.drifts] if change.baseline else []
    found = []
    for drift in change.current.drifts if change.current else ():
        if _drift_key(drift) in already:
            continue
        position = model_call_position(steps, drift["call"])
        found.append(
            Divergence(
                "request_drift",
                position,
                drift.get("agent") or "?",
                drift.get("step") or 0,
                f"model call #{drift['call']}",
                changes=[Change(**c) for c in drift.get("changes", ())],
            )
        )
    return found


def _drift_key(drift: dict[str, Any]) -> tuple[Any, ...]:
    return (drift.get("call"), drift.get("agent"), repr(drift.get("changes")))
