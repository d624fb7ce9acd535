"""Reference policy for the TypeScript parcel desk (golden/typescript_agent/agent.ts).

Tool-call ids are pinned (`call_<n>`, counted through the conversation): the agent sends them
back in every later request, so a re-recorded cassette's requests stay the same.
"""

from __future__ import annotations

import re
from typing import Any

from agentbench import ToolCall
from golden._reference import last_user, results_of

PARCEL = re.compile(r"\bPX-\d{4}\b", re.IGNORECASE)
DATE = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")
POSTCODE = re.compile(r"\b(\d{4}-\d{3})\b")
WINDOWS = {"morning": "09:00-12:00", "afternoon": "14:00-17:00", "evening": "18:00-21:00"}


def _calls(request: dict[str, Any], *wanted: tuple[str, dict[str, Any]]) -> list[ToolCall]:
    seen = sum(len(m.get("tool_calls") or ()) for m in request["messages"])
    return [
        ToolCall(name, arguments, id=f"call_{seen + n}")
        for n, (name, arguments) in enumerate(wanted, 1)
    ]


def _said(request: dict[str, Any]) -> str:
    """Everything the customer and the desk said, for what an earlier turn named."""
    return " ".join(
        str(m.get("content") or "")
        for m in request["messages"]
        if m["role"] in ("user", "assistant")
    )


def _track(question: str, request: dict[str, Any]) -> Any:
    parcels = [p.upper() for p in PARCEL.findall(question)]
    seen = results_of(request, "track_parcel")
    if not seen:
        return _calls(request, *(("track_parcel", {"tracking_id": p}) for p in parcels))
    lines = []
    for result in (o.json() for o in seen):
        if "error" in result:
            lines.append(f"I could not find that parcel: {result['error']}.")
        else:
            lines.append(
                f"{result['tracking_id']} is {result['status']} ({result['location']}), "
                f"expected on {result['eta']}."
            )
    return " ".join(lines)


def _slots(question: str, request: dict[str, Any]) -> Any:
    postcode, date = POSTCODE.search(question), DATE.search(question)
    if postcode is None or date is None:
        return "Which postcode, and on which day?"
    seen = results_of(request, "delivery_slots")
    if not seen:
        arguments = {"postcode": postcode.group(1), "date": date.group(1)}
        return _calls(request, ("delivery_slots", arguments))
    result = seen[-1].json()
    if "error" in result:
        return f"Sorry: {result['error']}."
    return f"Free slots in {result['postcode']} on {result['date']}: {', '.join(result['slots'])}."


def _reschedule(question: str, request: dict[str, Any]) -> Any:
    parcels = PARCEL.findall(question) or PARCEL.findall(_said(request))
    date = DATE.search(question)
    window = next((w for w in WINDOWS if w in question.lower()), None)
    if not parcels or date is None or window is None:
        return "Which parcel, which day, and morning, afternoon or evening?"
    parcel = parcels[-1].upper()
    moved = results_of(request, "reschedule_delivery")
    if not moved:
        arguments = {"tracking_id": parcel, "date": date.group(1), "slot": WINDOWS[window]}
        return _calls(request, ("reschedule_delivery", arguments))
    result = moved[-1].json()
    if "error" in result:
        return f"I could not move {parcel}: {result['error']}."
    return (
        f"Done: {parcel} now arrives on {result['date']} between {result['slot']} "
        f"(reference {result['reference']})."
    )


def respond(request: dict[str, Any]) -> Any:
    question = last_user(request)
    if re.search(r"\b(move|reschedule|instead)\b", question, re.I):
        return _reschedule(question, request)
    if re.search(r"\bslots?\b", question, re.I):
        return _slots(question, request)
    if PARCEL.search(question):
        return _track(question, request)
    return "I can track parcels, list delivery slots and move deliveries."
