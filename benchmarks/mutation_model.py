"""What a mutation is, how it is applied to a copy of the tree, and how its outcome is scored.

A mutation is one exact substitution `old -> new` in one file. It either changes behaviour (it
names the cases that must be flagged and, for each, the class and step the first divergence
must report — or, for a change no trajectory shows, such as an expected failure that passes or
a cost that grew, the kind the comparison must give the case, with no step) or is `equivalent`
(a rewrite that must not be flagged at all).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Expect:
    """A case the mutation must flag, and where its first divergence must be named; with no
    `step`, `cls` is the comparison kind it must be flagged with (`xpassed`,
    `budget_regression`, …): what changed is not a step of the trajectory."""

    case: str  # suite/case_id
    cls: str
    step: int | None = None

    def met_by(self, flag: Flag | None) -> bool:
        if flag is None:
            return False
        if self.step is None:
            return flag.kind == self.cls
        return flag.first == (self.cls, self.step)

    def at_step(self, flag: Flag | None) -> bool:
        if flag is None:
            return False
        if self.step is None:
            return flag.kind == self.cls
        return flag.first is not None and flag.first[1] == self.step

    def describe(self) -> str:
        return self.cls if self.step is None else f"{self.cls}@{self.step}"


@dataclass(frozen=True)
class Mutation:
    id: str
    file: str  # relative to the repository root
    old: str
    new: str
    why: str
    expect: tuple[Expect, ...] = ()
    equivalent: bool = False

    def __post_init__(self) -> None:
        if self.equivalent == bool(self.expect):
            raise ValueError(
                f"mutation {self.id}: give either equivalent=True or the expected detection"
            )


class MutationNotApplicableError(RuntimeError):
    """The text a mutation replaces is not in its file exactly once."""


def apply(mutation: Mutation, root: Path) -> str:
    """Substitute in the copy at `root`; return the original text so it can be restored."""
    path = root / mutation.file
    if not path.is_file():
        raise MutationNotApplicableError(f"mutation {mutation.id}: no file {mutation.file}")
    original = path.read_text()
    count = original.count(mutation.old)
    if count != 1:
        raise MutationNotApplicableError(
            f"mutation {mutation.id}: {mutation.file} holds the text to replace {count} times "
            f"(must be exactly once): {mutation.old!r}"
        )
    write_source(path, original.replace(mutation.old, mutation.new))
    return original


def write_source(path: Path, text: str) -> None:
    """Write a module and drop its compiled copies: a .pyc is trusted on mtime (in seconds)
    and size, so an equal-length edit within the same second would otherwise run stale code."""
    path.write_text(text)
    for cached in (path.parent / "__pycache__").glob(f"{path.stem}.*.pyc"):
        cached.unlink()


@dataclass
class Flag:
    """One case the comparison did not call unchanged."""

    case: str
    kind: str
    first: tuple[str, int] | None  # class and step of the first divergence
    reasons: list[str] = field(default_factory=list)

    def describe(self) -> str:
        where = f" {self.first[0]}@{self.first[1]}" if self.first else ""
        return f"{self.case}[{self.kind}{where}]"


def flags(document: dict[str, Any]) -> list[Flag]:
    """Every case of a `run --baseline --json` document that is not `unchanged`, plus a flag
    per suite that could not run (a mutation that breaks loading is caught, not ignored)."""
    found = []
    comparison = document.get("comparison") or {}
    for case in comparison.get("cases", ()):
        if case["kind"] == "unchanged":
            continue
        divergences = case.get("divergences") or []
        first = (divergences[0]["class"], divergences[0]["step"]) if divergences else None
        found.append(
            Flag(f"{case['suite']}/{case['case_id']}", case["kind"], first, case.get("reasons", []))
        )
    for error in document.get("suite_errors") or ():
        found.append(Flag("suite", "suite_error", None, [str(error)]))
    return found


@dataclass
class Outcome:
    mutation: Mutation
    flagged: list[Flag]
    error: str | None = None  # the run itself failed (no JSON): caught, with this as the reason
    gate_failed: bool | None = None  # whether the run's gate failed (None: no run document)

    @property
    def caught(self) -> bool:
        return bool(self.flagged) or self.error is not None

    @property
    def localised(self) -> bool:
        by_case = {f.case: f for f in self.flagged}
        return all(e.met_by(by_case.get(e.case)) for e in self.mutation.expect)

    @property
    def right_step(self) -> bool:
        """Caught, and every expected case's first divergence is at the expected step (its
        class may differ): a miss of the name, not of the place."""
        by_case = {f.case: f for f in self.flagged}
        return self.caught and all(e.at_step(by_case.get(e.case)) for e in self.mutation.expect)

    def got(self, case: str) -> str:
        flag = next((f for f in self.flagged if f.case == case), None)
        if flag is None:
            return "not flagged"
        if flag.first:
            return f"{flag.first[0]}@{flag.first[1]}"
        return flag.kind if flag.kind != "unchanged" else f"{flag.kind}, no divergence"

    def line(self) -> str:
        m = self.mutation
        flagged = ", ".join(f.describe() for f in self.flagged) or "-"
        if self.error:
            flagged = f"run failed: {self.error}"
        if m.equivalent:
            verdict = "FALSE POSITIVE" if self.caught else "ok (not flagged)"
            return f"{m.id:<28} equivalent  {verdict:<18} flagged: {flagged}"
        where = "; ".join(f"{e.case} want {e.describe()} got {self.got(e.case)}" for e in m.expect)
        gate = {True: "FAILED", False: "passed", None: "-"}[self.gate_failed]
        return (
            f"{m.id:<28} caught={'yes' if self.caught else 'no ':<3} "
            f"localised={'yes' if self.localised and self.caught else 'no ':<3} gate={gate} "
            f"{where} | flagged: {flagged}"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.mutation.id,
            "file": self.mutation.file,
            "why": self.mutation.why,
            "equivalent": self.mutation.equivalent,
            "caught": self.caught,
            "localised": self.localised and self.caught,
            "right_step": self.right_step,
            "expected": [
                {"case": e.case, "class": e.cls, "step": e.step, "got": self.got(e.case)}
                for e in self.mutation.expect
            ],
            "flagged": [
                {"case": f.case, "kind": f.kind, "first": f.first, "reasons": f.reasons}
                for f in self.flagged
            ],
            "error": self.error,
            "gate_failed": self.gate_failed,
        }
