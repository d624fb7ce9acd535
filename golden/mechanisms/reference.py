"""Reference policy for the mechanisms suite: a model with habits real models have.

It wraps tool arguments in a code fence or in a sentence, reads a log that comes back cut,
searches without end, and escalates a ticket to another agent.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agentbench import ToolCall
from golden._reference import call, results_of, route


def _agent(request: dict[str, Any]) -> str:
    names = {t["function"]["name"] for t in request.get("tools", ())}
    return "desk" if "open_escalation" in names else "escalations"


def _log(match: re.Match[str], request: dict[str, Any]) -> Any:
    seen = results_of(request, "fetch_log")
    if not seen:
        return call("fetch_log", service="checkout")
    text = seen[-1].content
    cut = re.search(r"…\[truncated ([\d,]+) of ([\d,]+) chars\]", text)
    last = [line for line in text.splitlines() if line[:4].isdigit()][-1]
    if cut is None:
        return f"The whole log is in view; its last line is {last!r}."
    return (
        f"The log was cut ({cut.group(1)} of {cut.group(2)} characters not shown); "
        f"the last line I can see is {last!r}."
    )


def _endless_search(match: re.Match[str], request: dict[str, Any]) -> Any:
    # Never satisfied: a new wording each time, so only max_iterations stops it.
    tried = len(results_of(request, "search_kb"))
    return call("search_kb", query=f"intermittent 502 errors variant {tried + 1}")


def _ticket_arguments(ticket: str) -> dict[str, Any]:
    return {"ticket_id": ticket, "include_history": True}


def _fenced(match: re.Match[str], request: dict[str, Any]) -> Any:
    seen = results_of(request, "lookup_ticket")
    if not seen:
        body = json.dumps(_ticket_arguments(match.group(1).upper()), indent=2)
        return ToolCall("lookup_ticket", f"```json\n{body}\n```")
    return _ticket_answer(seen[-1].json())


def _prose(match: re.Match[str], request: dict[str, Any]) -> Any:
    seen = results_of(request, "lookup_ticket")
    if not seen:
        body = json.dumps(_ticket_arguments(match.group(1).upper()))
        return ToolCall("lookup_ticket", f"Sure, here are the arguments: {body}")
    return _ticket_answer(seen[-1].json())


def _ticket_answer(ticket: Any) -> str:
    if not isinstance(ticket, dict):
        return f"I could not read the ticket: {ticket}"
    history = " → ".join(ticket.get("history", []))
    return f"{ticket['ticket_id']} ({ticket['title']}) is {ticket['status']}; history: {history}."


def _escalate(match: re.Match[str], request: dict[str, Any]) -> Any:
    ticket = match.group(1).upper()
    if not results_of(request, "open_escalation"):
        return call("open_escalation", ticket_id=ticket)
    return call(
        "transfer_to_escalations",
        reason="the customer asked for an escalation",
        summary=f"Ticket {ticket} needs the escalation team.",
    )


def _escalations(request: dict[str, Any]) -> str:
    system = request["messages"][0]["content"]
    ticket = re.search(r"The ticket is (T-\d+)", system)
    token = re.search(r"Escalation token: (\S+)\.", system)
    owner = f"The escalation team now owns {ticket.group(1) if ticket else 'the ticket'}"
    return owner + (f" (token {token.group(1)})." if token else ".")


RULES = [
    (r"\blog\b", _log),
    (r"502", _endless_search),
    (r"look up ticket (T-\d+)", _fenced),
    (r"status of ticket (T-\d+)", _prose),
    (r"escalate (T-\d+)", _escalate),
]


def respond(request: dict[str, Any]) -> Any:
    if _agent(request) == "escalations":
        return _escalations(request)
    return route(request, RULES, "How can I help?")
