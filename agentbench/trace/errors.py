"""Errors of the trace store. Each names the store file and what was expected."""

from __future__ import annotations

from pathlib import Path

from agentbench.errors import AgentbenchError, RecordingError, UsageError


class TraceStoreError(AgentbenchError):
    """The trace store cannot be used (CLI exit code 3; a missing store is 2, see below)."""


class StoreBusyError(TraceStoreError):
    """Another process held the store's write lock for longer than we were willing to wait."""


class StoreFormatError(TraceStoreError):
    """The file is not an agentbench trace store (corrupt, foreign, or from a newer version)."""


class StoreDamagedError(StoreFormatError):
    """An agentbench trace store with part of it gone: cut short, or a table missing."""


def damaged(path: Path, what: str) -> StoreDamagedError:
    """The one message for a damaged store: what is wrong with which file, and what to do."""
    return StoreDamagedError(
        f"trace store {path} is damaged: {what}. Move it aside (mv {path} {path}.damaged, "
        f"and {path.name}.wal beside it if there is one); the next run makes a new store "
        f"there and stores what the journals in {path.name}.spool/ still hold. "
        f"`agentbench traces doctor --db {path}` lists what they can rebuild; older runs come "
        "back from a backup or a Parquet export (`agentbench traces import DIR`)"
    )


class StorageFaultError(TraceStoreError, RecordingError):
    """The store's disk refused a write: it is full, or the store is read-only (CLI exit code
    3). `store` is the store file, `file` the file the write was for (the store, its write-ahead
    log, a journal), `reason` the system's word for it; the message is the fault, then any
    notes on what it cost, then what to do (see `storage.faults`)."""

    def __init__(
        self,
        headline: str,
        *,
        store: Path,
        file: Path | None,
        reason: str,
        advice: str,
        notes: tuple[str, ...] = (),
    ) -> None:
        self.headline, self.advice, self.notes = headline, advice, notes
        self.store, self.file, self.reason = store, file, reason
        super().__init__("; ".join((headline, *notes, advice)))

    def __reduce__(self) -> tuple[object, ...]:  # keyword arguments survive a pickle
        fields = (self.headline, self.store, self.file, self.reason, self.advice, self.notes)
        return _rebuild_fault, (type(self), *fields)

    def adding(self, note: str, *, advice: str | None = None) -> StorageFaultError:
        """The same fault with `note` (what it cost) before what to do (or `advice`)."""
        return type(self)(
            self.headline,
            store=self.store,
            file=self.file,
            reason=self.reason,
            advice=advice or self.advice,
            notes=(*self.notes, note),
        )


def _rebuild_fault(
    kind: type[StorageFaultError],
    headline: str,
    store: Path,
    file: Path | None,
    reason: str,
    advice: str,
    notes: tuple[str, ...],
) -> StorageFaultError:
    return kind(headline, store=store, file=file, reason=reason, advice=advice, notes=notes)


class StoreFullError(StorageFaultError):
    """No room for the store's writes: no space left, a quota used up, a file size limit."""


class StoreReadOnlyError(StorageFaultError):
    """The store (its file, its folder or its filesystem) cannot be written by this process."""


class JournalError(TraceStoreError):
    """The spool folder beside a store cannot hold this process's journal."""


class StoreNotFoundError(TraceStoreError, UsageError):
    """Nothing has been recorded at this path yet (CLI exit code 2).

    Also a UsageError: reading a store before anything was recorded into it, or from a
    mistyped --db, is the caller's to fix, not a broken harness.
    """


class StorePathError(TraceStoreError, UsageError):
    """No store can be made at this path: its folder cannot be created (CLI exit code 2)."""


class RunNotFoundError(UsageError):
    """No run with that id (or id prefix) in the store (CLI exit code 2)."""


class NoSuchRunError(RunNotFoundError):
    """Nothing in the store has that id, nor starts with it."""

    def __init__(self, wanted: str, path: Path, stored: int, *, what: str = "run") -> None:
        self.wanted, self.path, self.stored, self.what = wanted, path, stored, what
        hint = "`agentbench traces list` shows them"
        if what != "run":
            hint = (
                "`agentbench traces list` shows runs, "
                '`agentbench traces sql "SELECT eval_id FROM evals"` evals'
            )
        super().__init__(f"no {what} {wanted!r} in {path} ({stored} runs stored); {hint}")

    def naming(self, what: str) -> NoSuchRunError:
        """The same error for a command whose argument may also be something else, such as
        `diff`, which takes two evals or two runs: "no eval or run 'x'"."""
        return NoSuchRunError(self.wanted, self.path, self.stored, what=what)
