"""When and how long to wait before retrying a model call.

Transient failures (connection errors, timeouts, 408/409/429 and 5xx) are retried with
exponential backoff and jitter; a server's `Retry-After` (or `retry-after-ms`) wins over our
own schedule but is bounded, so a provider asking for ten minutes fails fast with a message
instead of hanging a CI job. An error answered twice with the same body is deterministic (a
request the server cannot handle, such as llama.cpp's 500 for a request it fails to validate),
so it is not retried a third time. Statuses that speak of time or of the path rather than of
the request (a timeout, a rate limit, a gateway's 502/503/504 page) and answers with
`Retry-After` are exempt: the same page again is no sign the request is at fault.
"""

from __future__ import annotations

import email.utils
import math
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass

RETRYABLE_STATUS = frozenset({408, 409, 429})
# Retryable statuses whose repeated body says nothing about the request (see the docstring).
TIMING_STATUS = frozenset({408, 429, 502, 503, 504})


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 4
    initial_backoff_s: float = 0.5
    max_backoff_s: float = 20.0
    multiplier: float = 2.0
    jitter: float = 0.25  # +/- this fraction of the computed delay
    max_retry_after_s: float = 60.0

    def backoff(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait before attempt `attempt + 1` (attempts count from 1)."""
        if retry_after is not None:
            return max(0.0, min(retry_after, self.max_retry_after_s))
        base = min(self.max_backoff_s, self.initial_backoff_s * self.multiplier ** (attempt - 1))
        spread = base * self.jitter
        return max(0.0, base + random.uniform(-spread, spread))


def is_retryable_status(status: int, headers: Mapping[str, str] | None = None) -> bool:
    should = (headers or {}).get("x-should-retry")
    if should in ("true", "false"):
        return should == "true"
    return status in RETRYABLE_STATUS or status >= 500


# Statuses that say the request itself was wrong (the code under test built it), not that the
# provider or the path to it failed: a malformed body, one too large, one that fails the API's
# validation. Every other failure is the infrastructure's.
REQUEST_STATUS = frozenset({400, 413, 422})


def is_infrastructure_failure(status: int | None) -> bool:
    """Whether a model call that failed with HTTP `status` (None: no answer at all, or a
    timeout) failed because of the provider, the network or the setup (a key, a model name)
    rather than because of the request the agent built."""
    return status is None or status not in REQUEST_STATUS


def repeats_deterministically(previous_body: str | None, body: str | None) -> bool:
    """Whether an error's body is the one the previous attempt got (None: not comparable).

    An empty body says nothing about the request (a proxy's bare 502), so it never counts.
    """
    return bool(body) and body == previous_body


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds from `retry-after-ms` or `retry-after` (seconds or an HTTP date), if present."""
    if not headers:
        return None
    for header, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(header)
        if value is None:
            continue
        try:
            delay = float(value)
        except ValueError:
            continue
        if math.isfinite(delay):
            return max(0.0, delay / divisor)
    value = headers.get("retry-after")
    if value:
        parsed = email.utils.parsedate_tz(value)
        if parsed is not None:
            return max(0.0, float(email.utils.mktime_tz(parsed) - time.time()))
    return None
