"""Errors of golden suites and scorers: each names the file, line, column and field at fault.

A `Problem` is one thing wrong in one place; a `SuiteError` collects every problem of one suite,
so a user fixes them all in one pass instead of one per run. `ScorerConfigError` is a scorer's
parameters being wrong, before any file is involved; the suite loader turns it into a
`Problem` by adding where the parameters were written. All are usage errors (CLI exit code 2).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from agentbench.errors import UsageError
from agentbench.evals.suites.validation import FieldProblem


@dataclass(frozen=True)
class Problem:
    """One thing wrong in a suite file: where it is and what was expected instead."""

    file: Path
    message: str
    line: int | None = None  # 1-based
    column: int | None = None  # 1-based
    field: str = ""  # e.g. "cases[3].expect[1].tool_called.args"

    @property
    def where(self) -> str:
        where = str(self.file)
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        return where

    def __str__(self) -> str:
        field = f" {self.field}:" if self.field else ""
        return f"{self.where}:{field} {self.message}"


class SuiteError(UsageError):
    """A suite could not be loaded; `problems` lists everything wrong with it."""

    def __init__(self, suite: Path, problems: list[Problem]) -> None:
        self.suite = suite
        self.problems = problems
        count = len(problems)
        lines = [f"suite {suite}: {count} problem{'s' if count != 1 else ''}"]
        lines += [f"  {problem}" for problem in problems]
        super().__init__("\n".join(lines))


class ScorerConfigError(UsageError):
    """A scorer's name or parameters are wrong; `field` names the parameter at fault.

    `loc` is the same path as a tuple (`("args", "city")`), so a loader can find the line the
    parameter was written on; `problems` lists every mistake found, this one first.
    """

    def __init__(
        self,
        message: str,
        *,
        field: str = "",
        scorer: str = "",
        loc: tuple[str | int, ...] = (),
        problems: list[FieldProblem] | None = None,
    ) -> None:
        self.message = message
        self.field = field
        self.scorer = scorer
        self.loc = loc
        self.problems = problems or [FieldProblem(loc, message)]
        where = ".".join(part for part in (scorer, field) if part)
        super().__init__(f"{where}: {message}" if where else message)


class UnknownScorerError(ScorerConfigError):
    """No scorer type is registered under `name`; `known` lists those that are, closest first."""

    def __init__(self, name: str, known: list[str], hint: str = "") -> None:
        self.name = name
        self.known = known
        self.hint = hint  # empty when the name looks like a typo of a known one
        super().__init__(
            f"unknown scorer {name!r}; expected one of: {', '.join(known)}{hint}", scorer=name
        )


class ExpectationError(ScorerConfigError):
    """A loaded expectation whose scorer cannot be built, told where it was written.

    Scorers are built when the harness runs, long after the suite loaded: a custom scorer's
    function may not import, and the person fixing it needs the file and line, not the name.
    """

    def __init__(self, cause: ScorerConfigError, problem: Problem) -> None:
        super().__init__(
            cause.message,
            field=cause.field,
            scorer=cause.scorer,
            loc=cause.loc,
            problems=cause.problems,
        )
        self.problem = problem

    def __str__(self) -> str:
        return str(self.problem)
