"""Reference policy for the resilience suite: a currency desk, and a primary model that is down.

The policy answers for both models of the agent's chain. For the case whose user says the main
model is down, the primary answers HTTP 503 to everything, so the recording holds the
FallbackModel's real path (primary failed after its retries, backup answered) — the same path
that case's scripted faults make the served replay take.
"""

from __future__ import annotations

import re
from typing import Any

from agentbench.testing import HTTPFault
from golden._reference import call, last_user, results_of, route

PRIMARY = "reference-resilience"


def _rate(match: re.Match[str], request: dict[str, Any]) -> Any:
    code = match.group(1).upper()
    seen = results_of(request, "exchange_rate")
    if not seen:
        return call("exchange_rate", currency=code)
    if seen[-1].failed:
        reason = seen[-1].content.splitlines()[0].split("] ", 1)[-1]
        return f"I cannot quote {code}: {reason}."
    rate = seen[-1].json()
    return f"1 EUR = {rate['per_euro']} {code} ({rate['source']})."


def respond(request: dict[str, Any]) -> Any:
    if request.get("model") == PRIMARY and "main model is down" in last_user(request):
        return HTTPFault(503, "the primary model is overloaded")
    return route(
        request,
        [(r"\b(USD|GBP|CHF|JPY|XYZ)\b", _rate)],
        "Which currency would you like a euro rate for?",
    )
