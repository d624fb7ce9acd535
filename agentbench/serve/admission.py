"""Admission: at most `concurrency` runs at once, at most `queue` more waiting, the rest 429.

A request past the queue bound is refused at once with a `Retry-After` estimated from how
long runs have been taking, rather than left to pile up: a client that retries later is
served, and the server's memory and latency stay bounded under any load. Admission is
decided when the request arrives (so `POST /v1/runs` can answer 429 instead of 202); the
slot itself is awaited by the run.
"""

from __future__ import annotations

import asyncio
import math
from types import TracebackType


class Overloaded(Exception):  # noqa: N818 - reads as the state it reports
    """No slot and no room to wait: the client should come back after `retry_after` s."""

    def __init__(self, retry_after: int, waiting: int) -> None:
        super().__init__(f"server busy: {waiting} requests already waiting for a slot")
        self.retry_after = retry_after
        self.waiting = waiting


class Admission:
    def __init__(self, concurrency: int, queue: int) -> None:
        self.concurrency = concurrency
        self.queue = queue
        self._slots = asyncio.Semaphore(concurrency)
        self.running = 0
        self.waiting = 0
        # Moving average of how long a slot is held, for Retry-After.
        self._mean_s = 1.0

    def admit(self) -> Ticket:
        """A place in the queue, or Overloaded when every slot is taken and the queue is full."""
        if self.running + self.waiting >= self.concurrency + self.queue:
            raise Overloaded(self.retry_after(), self.waiting)
        self.waiting += 1
        return Ticket(self)

    def retry_after(self) -> int:
        """Seconds until a place is likely free: the queue ahead, drained `concurrency` at a
        time, at the recent time a run holds its slot."""
        rounds = (self.waiting + 1) / self.concurrency
        return max(1, math.ceil(rounds * self._mean_s))

    def _held(self, seconds: float) -> None:
        self._mean_s = 0.8 * self._mean_s + 0.2 * seconds


class Ticket:
    """`async with ticket:` waits for a slot and holds it; a ticket given up waiting (its
    request cancelled) leaves the queue."""

    def __init__(self, admission: Admission) -> None:
        self._admission = admission
        self._queued = True
        self._started = 0.0

    async def __aenter__(self) -> None:
        admission = self._admission
        try:
            await admission._slots.acquire()
        finally:
            self._leave_queue()
        admission.running += 1
        self._started = asyncio.get_running_loop().time()

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        admission = self._admission
        admission.running -= 1
        admission._slots.release()
        admission._held(asyncio.get_running_loop().time() - self._started)

    def abandon(self) -> None:
        """Give the place back without ever running (the run was cancelled before it began)."""
        self._leave_queue()

    def _leave_queue(self) -> None:
        if self._queued:
            self._queued = False
            self._admission.waiting -= 1
