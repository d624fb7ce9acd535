"""Errors of the trace store. Each names the store file and what was expected."""

from __future__ import annotations

from agentbench.errors import AgentbenchError, UsageError


class TraceStoreError(AgentbenchError):
    """The trace store cannot be used (CLI exit code 3)."""


class StoreBusyError(TraceStoreError):
    """Another process held the store's write lock for longer than we were willing to wait."""


class StoreFormatError(TraceStoreError):
    """The file is not an agentbench trace store (corrupt, foreign, or from a newer version)."""


class StoreNotFoundError(TraceStoreError):
    """Nothing has been recorded at this path yet."""


class RunNotFoundError(UsageError):
    """No run with that id (or id prefix) in the store (CLI exit code 2)."""
