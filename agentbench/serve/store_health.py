"""Whether the server's store can keep runs now, asked before a run starts: a request the
store could not keep is refused (503, `Retry-After`) rather than run — tools and all — and
then lost.

A served run is kept once its journal line is written (see `agentbench.trace.journal.spool`), so the
store can keep runs while its journal folder takes writes. A filesystem turned read-only is
seen before any run starts (`statvfs`, a few microseconds a request); a full disk, a used-up
quota or a folder made unwritable is seen when a run's record is refused. From then on new
runs are refused until a probe journal write succeeds again, tried at most once every
`RECHECK_S` while requests come. What a client is told names the fault, never the server's
paths; the server's log says where.
"""

from __future__ import annotations

import errno
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

from agentbench.trace.errors import StorageFaultError, StoreFullError, TraceStoreError
from agentbench.trace.journal.spool import spool_dir, try_journal
from agentbench.trace.storage.faults import storage_fault

log = logging.getLogger("agentbench")

RETRY_AFTER_S = 5  # what a refused client is told to wait
RECHECK_S = 1.0  # the most often a refusing server tries the store again


def fault_code(fault: StorageFaultError) -> str:
    """The `code` of an answer the fault decided: `store_full` or `store_read_only`."""
    return "store_full" if isinstance(fault, StoreFullError) else "store_read_only"


def told_to_clients(fault: StorageFaultError) -> str:
    """The fault in a client's words: what is wrong with the store, not where it is."""
    what = "has no room" if isinstance(fault, StoreFullError) else "is read-only"
    return f"the server's trace store {what} ({fault.reason})"


class StoreHealth:
    """The store's last known fault, for a server that checks it before each run."""

    def __init__(self, store: Path | None, clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.clock = clock
        self.fault: StorageFaultError | None = None
        self._checked = 0.0

    def saw(self, fault: StorageFaultError) -> None:
        """A run's record was refused: refuse new runs until the store takes writes again."""
        if self.fault is None:
            log.error("%s; new runs are refused (503) until it can keep them", fault)
        self.fault = fault
        self._checked = self.clock()

    def refusal(self) -> StorageFaultError | None:
        """Why no run may start now (the store cannot keep it), or None."""
        if self.store is None:
            return None
        if self.fault is None:
            fault = self._read_only_filesystem()
            if fault is not None:
                self.saw(fault)
            return fault
        if self.clock() - self._checked >= RECHECK_S:
            self._checked = self.clock()
            if self._probe() is None:
                log.warning("the store %s takes writes again: runs are served", self.store)
                self.fault = None
        return self.fault

    def _read_only_filesystem(self) -> StorageFaultError | None:
        if self.store is None:
            return None
        spool = spool_dir(self.store)
        folder = spool if spool.is_dir() else spool.parent
        try:
            read_only = bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
        except OSError:
            return None  # not there (yet): the run's own write says what is wrong
        if not read_only:
            return None
        refused = OSError(errno.EROFS, os.strerror(errno.EROFS), str(folder))
        return storage_fault(self.store, refused)

    def _probe(self) -> StorageFaultError | None:
        """The fault a journal write meets now, or None when one is written."""
        fault = self._read_only_filesystem()
        if fault is not None or self.store is None:
            return fault
        try:
            try_journal(spool_dir(self.store))
        except StorageFaultError as refused:
            return refused
        except TraceStoreError:
            return self.fault  # not a disk fault, and not what we are waiting on
        return None
