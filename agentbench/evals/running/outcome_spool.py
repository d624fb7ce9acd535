"""An eval's scored trials, kept on disk as they finish and read back in order on demand.

The harness hands each finished trial to the store (its `results` row) and to the outputs
made after the eval — the summary, the gate, JUnit, the report. Held in a list, those
outcomes made the driver grow by about 3 KB a trial (scores with their reasons, drifts,
divergences): a 1,000,000-trial eval would need gigabytes before writing a line. Here each
outcome is pickled to an unnamed temporary file the moment it finishes, and only its sort key
and where it lies are kept, so iterating reads them back one at a time, in (suite, case,
trial) order, as often as the outputs need.

The file is created already unlinked (`tempfile.TemporaryFile`): nothing is left behind by a
killed process. What is written is what the store keeps: outcomes are redacted before the
harness hands them over, so no secret reaches this file that would not reach the store.
"""

from __future__ import annotations

import pickle
import tempfile
from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import IO, overload

from agentbench.evals.comparing.stats import TrialOutcome


class OutcomeSpool(Sequence[TrialOutcome]):
    """Trials appended as they finish; a sequence in (suite, case id, trial) order."""

    def __init__(self) -> None:
        self._file: IO[bytes] | None = None  # made by the first outcome
        self._keys: list[tuple[str, str, int]] = []
        self._where = array("q")  # offset, length of each outcome, in appending order
        self._order: list[int] | None = []  # reading order; None: to be sorted again
        self._end = 0
        self._at_end = True  # the file's position is `_end`
        self.sealed = False  # no more outcomes will come: summaries of it may be kept

    def append(self, outcome: TrialOutcome) -> None:
        if self.sealed:
            raise ValueError("this eval's outcomes are complete; nothing can be added")
        if self._file is None:
            # Open for the spool's life (closed by `close`), not for one block.
            self._file = tempfile.TemporaryFile(prefix="agentbench-outcomes-")  # noqa: SIM115
        data = pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL)
        if not self._at_end:  # a read moved the position (a seek is a system call: skipped)
            self._file.seek(self._end)
        self._file.write(data)
        self._at_end = True
        key = (outcome.suite, outcome.case_id, outcome.trial)
        if self._order is not None:
            if self._keys and key < self._keys[self._order[-1]]:
                self._order = None  # finished out of order: sorted when next read
            else:
                self._order.append(len(self._keys))
        self._keys.append(key)
        self._where.extend((self._end, len(data)))
        self._end += len(data)

    def extend(self, outcomes: Iterable[TrialOutcome]) -> None:
        for outcome in outcomes:
            self.append(outcome)

    def seal(self) -> None:
        self.sealed = True

    def __len__(self) -> int:
        return len(self._keys)

    def __bool__(self) -> bool:
        return bool(self._keys)

    @overload
    def __getitem__(self, index: int) -> TrialOutcome: ...

    @overload
    def __getitem__(self, index: slice) -> list[TrialOutcome]: ...

    def __getitem__(self, index: int | slice) -> TrialOutcome | list[TrialOutcome]:
        order = self._reading_order()
        if isinstance(index, slice):
            return [self._read(i) for i in order[index]]
        return self._read(order[index])

    def __iter__(self) -> Iterator[TrialOutcome]:
        order = self._reading_order()
        # A copy while outcomes may still come: an append may re-sort the order meanwhile.
        for index in order if self.sealed else list(order):
            yield self._read(index)

    def _reading_order(self) -> list[int]:
        if self._order is None:
            keys = self._keys
            self._order = sorted(range(len(keys)), key=keys.__getitem__)
        return self._order

    def _read(self, index: int) -> TrialOutcome:
        assert self._file is not None
        offset, length = self._where[2 * index], self._where[2 * index + 1]
        # Seek before every read: another iteration of the spool may have moved the file's
        # position since this one last read. Unpickling is safe here: only this process
        # wrote the (unnamed) file.
        self._file.seek(offset)
        self._at_end = False
        outcome: TrialOutcome = pickle.loads(self._file.read(length))
        return outcome

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        self._keys.clear()
        del self._where[:]
        self._order = []
        self._end = 0
        self._at_end = True

    def __del__(self) -> None:
        file = getattr(self, "_file", None)
        if file is not None:
            file.close()
