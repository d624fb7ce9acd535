"""The "compared with baseline" view: a comparison dict made safe and ready to draw.

The comparison comes from the gating code as plain data; every key but `baseline_eval`,
`current_eval` and `cases` may be missing, so this module reads it defensively and hands the
template complete objects. Each changed case gets its two trajectories aligned row by row
(difflib over step signatures, as `replay.diff.align` does), each differing row classed, and
the first divergent row marked. Every difference names its changed fields with the paths
the terminal prints (`result.total: 42.5 → 40.5`, from `replay.diff.value_changes` and the
stored request-drift changes), so the page never shows two whole blobs to compare by eye.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any

from agentbench.replay.diff import value_changes
from agentbench.replay.drift import Change, around_difference
from agentbench.replay.trajectory import Step
from agentbench.report.timeline import clip
from agentbench.trace._json import dumps

# Newly failing cases first: they are why a gate fails.
KIND_ORDER = (
    ("could_not_run", "Could not run now (not judged)"),
    ("newly_failing", "Newly failing"),
    ("xpassed", "XPASS: marked xfail, and passed"),
    ("score_changed", "Score changed"),
    ("budget_regression", "Budget regressions"),
    ("flaky", "Flaky"),
    ("behaviour_changed", "Behaviour changed (scores equal)"),
    ("usage_changed", "Tokens or cost changed (replayed)"),
    ("newly_passing", "Newly passing"),
    ("added", "Added cases"),
    ("removed", "Removed cases"),
)
_DETAIL_CHARS = 600
_FIELD_WIDTH = 96  # characters of each side of a changed field, as the terminal shows them
_FIELDS_SHOWN = 12


@dataclass
class FieldChange:
    """One changed field: its path (`result.total`) and the change (`42.5 → 40.5`)."""

    path: str
    text: str


@dataclass
class StepCell:
    index: int
    label: str
    agent: str
    step: Any
    detail: str


@dataclass
class AlignedRow:
    left: StepCell | None
    right: StepCell | None
    cls: str | None = None  # the divergence class of this row; None: the same on both sides
    first: bool = False
    fields: list[FieldChange] = field(default_factory=list)  # what differs, by path


@dataclass
class CaseChange:
    key: str
    suite: str
    case_id: str
    kind: str
    baseline: dict[str, Any] | None
    current: dict[str, Any] | None
    score_delta: float | None
    reasons: list[str]
    divergences: list[dict[str, Any]]
    rows: list[AlignedRow] = field(default_factory=list)
    first: AlignedRow | None = None


@dataclass
class Group:
    kind: str
    title: str
    cases: list[CaseChange]


@dataclass
class ComparisonView:
    baseline_eval: str
    current_eval: str
    baseline_rate: float | None
    current_rate: float | None
    delta: float | None
    ci95: tuple[float, float] | None
    p_value: float | None
    significant_drop: bool
    gate_failed: bool | None
    gate_reasons: list[str]
    groups: list[Group]
    unchanged: int


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def comparison_view(comparison: dict[str, Any]) -> ComparisonView:
    rates = comparison.get("pass_rate") or {}
    ci = rates.get("ci95")
    ci95 = None
    if isinstance(ci, list | tuple) and len(ci) == 2 and all(_float(v) is not None for v in ci):
        ci95 = (float(ci[0]), float(ci[1]))
    gate = comparison.get("gate") or {}
    changes = [
        _case(c, i) for i, c in enumerate(comparison.get("cases") or ()) if isinstance(c, dict)
    ]
    groups = []
    known = {kind for kind, _ in KIND_ORDER} | {"unchanged"}
    for kind, title in (*KIND_ORDER, ("other", "Other changes")):
        if kind == "other":
            mine = [c for c in changes if c.kind not in known]
        else:
            mine = [c for c in changes if c.kind == kind]
        if mine:
            groups.append(Group(kind, title, mine))
    return ComparisonView(
        baseline_eval=str(comparison["baseline_eval"]),
        current_eval=str(comparison["current_eval"]),
        baseline_rate=_float(rates.get("baseline")),
        current_rate=_float(rates.get("current")),
        delta=_float(rates.get("delta")),
        ci95=ci95,
        p_value=_float(comparison.get("p_value")),
        significant_drop=bool(comparison.get("significant_drop")),
        gate_failed=bool(gate["failed"]) if "failed" in gate else None,
        gate_reasons=[str(r) for r in gate.get("reasons") or ()],
        groups=groups,
        unchanged=sum(c.kind == "unchanged" for c in changes),
    )


def _case(data: dict[str, Any], index: int) -> CaseChange:
    steps = data.get("steps") or {}
    divergences = [d for d in data.get("divergences") or () if isinstance(d, dict)]
    rows = align_rows(
        list(steps.get("baseline") or ()), list(steps.get("current") or ()), divergences
    )
    return CaseChange(
        key=f"change-{index}",
        suite=str(data.get("suite", "")),
        case_id=str(data.get("case_id", "")),
        kind=str(data.get("kind", "other")),
        baseline=data.get("baseline") if isinstance(data.get("baseline"), dict) else None,
        current=data.get("current") if isinstance(data.get("current"), dict) else None,
        score_delta=_float(data.get("score_delta")),
        reasons=[str(r) for r in data.get("reasons") or ()],
        divergences=[
            {
                "class": str(d.get("class", "")),
                "step": d.get("step"),
                "agent": str(d.get("agent", "")),
                "label": str(d.get("label", "")),
                "old": clip(d.get("old"), _DETAIL_CHARS),
                "new": clip(d.get("new"), _DETAIL_CHARS),
                "fields": divergence_fields(d),
            }
            for d in divergences
        ],
        rows=rows,
        first=next((row for row in rows if row.first), None),
    )


def field_changes(old: Any, new: Any) -> list[FieldChange]:
    """What differs between two values, by path: JSON-aware when both are structured; two
    texts cut around where they first differ otherwise."""
    if isinstance(old, dict | list) and isinstance(new, dict | list):
        return _shown(value_changes(old, new))
    if old == new:
        return []
    if isinstance(old, str) and isinstance(new, str):
        before, after = around_difference(old, new, _FIELD_WIDTH)
        return [FieldChange("(text)", f"{before} → {after}")]
    return _shown([Change("(value)", "changed", old, new)])


def divergence_fields(divergence: dict[str, Any]) -> list[FieldChange]:
    """A stored divergence's changed fields: its request-drift changes when it has them,
    else the difference of its old and new values."""
    stored = [c for c in divergence.get("changes") or () if isinstance(c, dict) and "path" in c]
    if stored:
        return _shown(
            [
                Change(str(c["path"]), c.get("kind", "changed"), c.get("old"), c.get("new"))
                for c in stored
            ]
        )
    if divergence.get("class") in ("missing_step", "extra_step"):
        return []
    return field_changes(divergence.get("old"), divergence.get("new"))


def _shown(changes: list[Change]) -> list[FieldChange]:
    fields = []
    for change in changes[:_FIELDS_SHOWN]:
        text = change.describe(_FIELD_WIDTH)  # "path: old → new", secrets masked
        fields.append(FieldChange(change.path, text.removeprefix(f"{change.path}: ")))
    if len(changes) > _FIELDS_SHOWN:
        fields.append(FieldChange("…", f"and {len(changes) - _FIELDS_SHOWN} more changes"))
    return fields


def _cell(index: int, data: Any) -> StepCell:
    if not isinstance(data, dict):
        return StepCell(index, "?", "", None, clip(data, _DETAIL_CHARS) or "")
    try:
        label = Step.from_dict(data).label()
    except (KeyError, TypeError, IndexError, ValueError):
        label = str(data.get("kind", "step")).replace("_", " ")
    return StepCell(
        index,
        label,
        str(data.get("agent", "")),
        data.get("step"),
        clip(data.get("detail"), _DETAIL_CHARS) or "",
    )


def _signature(step: Any) -> str:
    return dumps(step.get("signature") if isinstance(step, dict) else step)


def align_rows(
    baseline: list[Any], current: list[Any], divergences: list[dict[str, Any]]
) -> list[AlignedRow]:
    """The two trajectories side by side: same steps on one row, differences classed."""
    named = {
        d.get("position"): str(d.get("class"))
        for d in divergences
        if d.get("class") not in ("missing_step", "extra_step")
    }
    matcher = difflib.SequenceMatcher(
        a=[_signature(s) for s in baseline], b=[_signature(s) for s in current], autojunk=False
    )
    rows: list[AlignedRow] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            for offset in range(i2 - i1):
                old, new = baseline[i1 + offset], current[j1 + offset]
                same = _detail(old) == _detail(new)
                cls = None if same else named.get(j1 + offset, "changed")
                fields = [] if same else field_changes(_detail(old), _detail(new))
                rows.append(
                    AlignedRow(_cell(i1 + offset, old), _cell(j1 + offset, new), cls, False, fields)
                )
            continue
        paired = min(i2 - i1, j2 - j1) if tag == "replace" else 0
        for offset in range(paired):
            old, new = baseline[i1 + offset], current[j1 + offset]
            rows.append(
                AlignedRow(
                    _cell(i1 + offset, old),
                    _cell(j1 + offset, new),
                    _replaced(old, new),
                    False,
                    field_changes(_detail(old), _detail(new)),
                )
            )
        rows.extend(
            AlignedRow(_cell(i, baseline[i]), None, "missing_step") for i in range(i1 + paired, i2)
        )
        rows.extend(
            AlignedRow(None, _cell(j, current[j]), "extra_step") for j in range(j1 + paired, j2)
        )
    for row in rows:
        if row.cls is not None:
            row.first = True
            break
    return rows


def _detail(step: Any) -> Any:
    return step.get("detail") if isinstance(step, dict) else step


def _replaced(old: Any, new: Any) -> str:
    kinds = {s.get("kind") if isinstance(s, dict) else None for s in (old, new)}
    if kinds == {"handoff"}:
        return "handoff_changed"
    if kinds == {"run_end"}:
        return "stop_reason_changed"
    return "missing_step + extra_step"
