"""A retry policy for tests of retries: no waiting, and a record of what asked to wait."""

from __future__ import annotations

from dataclasses import dataclass, field

from agentbench.runtime.retry import RetryPolicy


@dataclass(frozen=True)
class NoWaitRetryPolicy(RetryPolicy):
    """A RetryPolicy that does not wait; remembers which attempts asked for a backoff."""

    asked: list[int] = field(default_factory=list)

    def backoff(self, attempt: int, retry_after: float | None = None) -> float:
        self.asked.append(attempt)
        return 0.0
