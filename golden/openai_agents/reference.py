"""Reference policy for the Agents SDK help desk suite: the help desk and its network specialist.

The requests arrive chat-shaped (the Responses API's `instructions` as the system message, its
function calls and outputs as tool calls and tool messages). Which agent is asking is told by
its tools: the help desk offers `transfer_to_network_specialist`, the specialist `vpn_sessions`.
The SDK sends a tool's dict or list result as Python's `str()` of it (single quotes), not JSON,
so results are read with `ast.literal_eval`; `ping_host`'s failures read "ping failed: ...".
"""

from __future__ import annotations

import ast
import re
from typing import Any

from agentbench import ToolCall
from golden._reference import Observation, call, last_user, results_of

SERVICES = ("email", "vpn", "wiki")
HOST = re.compile(r"\b([\w-]+\.corp)\b")
NETWORK_TROUBLE = re.compile(r"drop|disconnect|slow connection|reach|ping|unreachable", re.I)


def _failed(observation: Observation) -> bool:
    return observation.content.startswith("ping failed:")


def _result(observation: Observation) -> Any:
    return ast.literal_eval(observation.content)


def _mentioned(text: str) -> list[str]:
    return [s for s in SERVICES if re.search(rf"\b{s}\b", text, re.I)]


def _status(request: dict[str, Any], services: list[str]) -> Any:
    seen = results_of(request, "service_status")
    if not seen:
        # Every service asked about at once: parallel calls in one answer.
        return [call("service_status", service=s) for s in services]
    lines = []
    for observation in seen:
        found = _result(observation)
        note = f" ({found['note']})" if "note" in found else ""
        lines.append(f"{found['service']} is {found['status']} since {found['since']}{note}.")
    return " ".join(line[0].upper() + line[1:] for line in lines)


def _ticket(request: dict[str, Any]) -> Any:
    seen = results_of(request, "open_ticket")
    if seen:
        ticket = _result(seen[-1])
        return f"I opened {ticket['ticket']} ({ticket['priority']} priority) for you."
    # What the ticket is about: the service the conversation was about.
    earlier = " ".join(str(m.get("content") or "") for m in request["messages"][1:])
    services = _mentioned(earlier) or ["unknown"]
    degraded = re.search(r"is degraded since [^(]*\(([^)]*)\)", earlier)
    summary = f"{services[0]} degraded: {degraded.group(1)}" if degraded else f"{services[0]} issue"
    return call("open_ticket", summary=summary, priority="normal")


def _desk(request: dict[str, Any]) -> Any:
    question = last_user(request)
    if NETWORK_TROUBLE.search(question):
        return call("transfer_to_network_specialist")
    if re.search(r"\bticket\b", question, re.I):
        return _ticket(request)
    services = _mentioned(question)
    if services:
        return _status(request, services)
    return "I can help with email, the VPN and the wiki: what is not working?"


def _specialist(request: dict[str, Any]) -> Any:
    question = last_user(request)
    host = HOST.search(question)
    if host:
        pings = results_of(request, "ping_host")
        if not pings:
            return call("ping_host", host=host.group(1))
        if _failed(pings[-1]):
            return f"I can't reach {host.group(1)}: it is not a host I know. Check the name."
        found = _result(pings[-1])
        return f"{found['host']} answers in {found['round_trip_ms']} ms, so the network is fine."
    sessions = results_of(request, "vpn_sessions")
    if not sessions:
        return call("vpn_sessions")
    rows = _result(sessions[-1])
    drops = [r for r in rows if r["drop"]]
    if not drops:
        return "Your VPN sessions look healthy: none dropped today."
    reasons = sorted({r["drop"] for r in drops})
    return (
        f"Your VPN dropped {len(drops)} times today on {drops[0]['gateway']}, each by "
        f"{' and '.join(reasons)}. Turn off the client's power saving so the idle timer stops."
    )


def respond(request: dict[str, Any]) -> Any:
    names = {t["function"]["name"] for t in request.get("tools", ())}
    answer = _specialist(request) if "vpn_sessions" in names else _desk(request)
    # The specialist carries the help desk's conversation on, so one count serves both.
    return _pinned(request, answer, "call")


def _pinned(request: dict[str, Any], answer: Any, prefix: str) -> Any:
    """The answer with its tool calls' ids pinned (`<prefix>_<n>`, counted through the
    conversation): the agent sends them back in every later request, so a re-recorded
    cassette's requests stay the same."""
    calls = [answer] if isinstance(answer, ToolCall) else answer
    if not (isinstance(calls, list) and calls):
        return answer
    seen = sum(len(m.get("tool_calls") or ()) for m in request["messages"])
    pinned = [
        ToolCall(c.name, c.arguments, id=f"{prefix}_{seen + n}") for n, c in enumerate(calls, 1)
    ]
    return pinned if isinstance(answer, list) else pinned[0]
