"""A suite's cases, read from their files as a run reaches them rather than all held at once.

Loading checks every case file (so one run of the loader lists every problem) but keeps the
cases of only the last files it read, up to `KEPT_CASES`: a suite of that size or less is
never read twice, while a suite of 100,000 cases no longer costs ~4.5 KB of memory a case
for the whole run (its parsed YAML and pydantic models). A case file is read again when a run
(or anyone iterating `suite.cases`) gets to it; its text must be the one that was checked —
a file edited since is an error naming it, never a silent mix of two versions of a suite.
"""

from __future__ import annotations

import bisect
import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, overload

from agentbench.errors import UsageError
from agentbench.evals.suites.case_models import Case

# Cases kept in memory across the most recently read files (always the last file, whatever
# its size): ~4.5 KB each, so ~9 MB at most.
KEPT_CASES = 2000


def text_digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


@dataclass(frozen=True)
class CaseFile:
    """A checked case file: where it is, what its text was, how many cases it holds."""

    path: Path
    digest: bytes
    count: int


class CaseBrief(NamedTuple):
    """What planning a run needs of a case — selecting it (id, tags), its trials, its cassette
    (a shard's weight) — kept for every case: ~200 bytes, against ~4.5 KB for the case. It
    stands in for the case until a trial runs, which takes `suite.cases[index]`."""

    id: str
    tags: tuple[str, ...]
    trials: int | None
    cassette: str | None
    index: int  # of the case in `suite.cases`

    @classmethod
    def of(cls, case: Case, index: int) -> CaseBrief:
        return cls(case.id, tuple(case.tags), case.trials, case.cassette, index)


# Reads one case file again: its cases, and the digest of the text they came from (None when
# it no longer reads cleanly: it changed).
Reread = Callable[[Path], tuple[list[Case], bytes | None]]


class SuiteCases(Sequence[Case]):
    """A suite's cases — those written inline in suite.yaml, then each case file's, in the
    loader's order — as a sequence that reads case files back on demand."""

    def __init__(self, inline: list[Case], reread: Reread) -> None:
        self._inline = inline
        self._briefs = [CaseBrief.of(case, index) for index, case in enumerate(inline)]
        self._files: list[CaseFile] = []
        self._ends: list[int] = []  # the index after each file's last case
        self._reread = reread
        self._kept: OrderedDict[int, list[Case]] = OrderedDict()
        self._kept_count = 0
        self._ids: dict[str, int] | None = None  # case id → index, made when looked up
        self._lock = threading.Lock()

    def add_file(self, path: Path, digest: bytes, cases: list[Case]) -> None:
        """A checked file and its cases (the loader's; kept while they fit)."""
        start = len(self)
        self._briefs += [CaseBrief.of(case, start + offset) for offset, case in enumerate(cases)]
        self._files.append(CaseFile(path, digest, len(cases)))
        self._ends.append(start + len(cases))
        self._keep(len(self._files) - 1, cases)

    def briefs(self) -> list[CaseBrief]:
        """Every case's brief, in order (a copy of the list; the briefs are immutable)."""
        return list(self._briefs)

    def __len__(self) -> int:
        return self._ends[-1] if self._ends else len(self._inline)

    @overload
    def __getitem__(self, index: int) -> Case: ...

    @overload
    def __getitem__(self, index: slice) -> list[Case]: ...

    def __getitem__(self, index: int | slice) -> Case | list[Case]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("case index out of range")
        if index < len(self._inline):
            return self._inline[index]
        number = bisect.bisect_right(self._ends, index)
        start = self._ends[number - 1] if number else len(self._inline)
        return self._cases_of(number)[index - start]

    def __iter__(self) -> Iterator[Case]:
        yield from self._inline
        for number in range(len(self._files)):
            yield from self._cases_of(number)

    def by_id(self, case_id: str) -> Case | None:
        """The case with this id (its file read, if it is not kept), or None."""
        if self._ids is None:
            # From the briefs, ~100 bytes a case, made only when a case is looked up by id.
            self._ids = {brief.id: brief.index for brief in self._briefs}
        index = self._ids.get(case_id)
        return None if index is None else self[index]

    def _cases_of(self, number: int) -> list[Case]:
        with self._lock:
            return self._load(number)

    def _load(self, number: int) -> list[Case]:
        kept = self._kept.get(number)
        if kept is not None:
            self._kept.move_to_end(number)
            return kept
        file = self._files[number]
        cases, digest = self._reread(file.path)
        if digest != file.digest or len(cases) != file.count:
            raise UsageError(
                f"{file.path}: changed since the suite was loaded (its cases are read again "
                "as the run reaches them); run again to use the new version"
            )
        self._keep(number, cases)
        return cases

    def _keep(self, number: int, cases: list[Case]) -> None:
        self._kept[number] = cases
        self._kept_count += len(cases)
        while self._kept_count > KEPT_CASES and len(self._kept) > 1:
            _, dropped = self._kept.popitem(last=False)
            self._kept_count -= len(dropped)

    def __repr__(self) -> str:
        return f"SuiteCases({len(self)} cases, {len(self._files)} files)"

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, Sequence):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]
