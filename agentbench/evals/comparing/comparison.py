"""Two evals compared, as plain data: the pass rates, the delta with its uncertainty, each
case's change and the gate's verdict on them.

`compare.compare_evals` makes one, `gate` judges one, and every renderer (the HTML report,
the markdown summary, `agentbench diff --json`) reads `as_dict()`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentbench.evals.comparing.case_changes import CaseChange

SIGNIFICANCE_LEVEL = 0.05


@dataclass
class Comparison:
    """Two evals compared; `as_dict()` has the shape every renderer reads."""

    baseline_eval: str
    current_eval: str
    baseline_rate: float | None
    current_rate: float | None
    delta: float | None
    ci95: tuple[float, float] | None
    p_value: float | None
    paired_cases: int  # cases with counted trials in both evals: what the test is over
    cases: list[CaseChange] = field(default_factory=list)
    gate_failed: bool = False
    gate_reasons: list[str] = field(default_factory=list)
    suites_only_in_baseline: list[str] = field(default_factory=list)  # not compared
    suites_only_in_current: list[str] = field(default_factory=list)  # not compared
    baseline_version: str | None = None  # the baseline eval's code_version
    replayed: bool = False  # neither eval called a live model: usage comes from recordings

    @property
    def baseline_dirty(self) -> bool:
        """The baseline ran uncommitted code: its failures cannot excuse this eval's."""
        return bool(self.baseline_version and "+" in self.baseline_version)

    @property
    def significant_drop(self) -> bool:
        return (
            self.p_value is not None
            and self.p_value < SIGNIFICANCE_LEVEL
            and self.delta is not None
            and self.delta < 0
        )

    def of_kind(self, *kinds: str) -> list[CaseChange]:
        return [c for c in self.cases if c.kind in kinds]

    def as_dict(self) -> dict[str, Any]:
        return {
            "baseline_eval": self.baseline_eval,
            "current_eval": self.current_eval,
            "pass_rate": {
                "baseline": self.baseline_rate,
                "current": self.current_rate,
                "delta": self.delta,
                "ci95": list(self.ci95) if self.ci95 is not None else None,
            },
            "p_value": self.p_value,
            "significant_drop": self.significant_drop,
            "gate": {"failed": self.gate_failed, "reasons": list(self.gate_reasons)},
            "cases": [c.as_dict() for c in self.cases],
            "baseline_version": self.baseline_version,
            "replayed": self.replayed,
            "not_compared": {
                "suites_only_in_baseline": list(self.suites_only_in_baseline),
                "suites_only_in_current": list(self.suites_only_in_current),
            },
        }
