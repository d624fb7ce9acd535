"""Errors of the trace store. Each names the store file and what was expected."""

from __future__ import annotations

from pathlib import Path

from agentbench.errors import AgentbenchError, UsageError


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
