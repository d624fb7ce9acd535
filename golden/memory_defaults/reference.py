"""Reference policy for the memory_defaults suite: a hiking guide reading what memory left.

It answers only from the request: trail figures from the reports still in view or from the
lines a summary kept of them, and the route from the part of the guide memory let through.
"""

from __future__ import annotations

import re
from typing import Any

from golden._reference import call, last_user, results_of, route

TRAILS = ("Ridge", "Lake", "Forest", "Canyon", "Glacier", "Valley")
MUD = re.compile(r"\b([A-Z][a-z]+) trail: mud (\d+)/10")


def _everything(request: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content") or "") for m in request["messages"])


def _driest(match: re.Match[str], request: dict[str, Any]) -> Any:
    # One lookup per step, in the order asked, then an answer from every figure still in view.
    wanted = [t for t in TRAILS if t.lower() in last_user(request).lower()]
    figures = {name: int(mud) for name, mud in MUD.findall(_everything(request))}
    pending = [t for t in wanted if t not in figures]
    if pending:
        return call("trail_conditions", trail=pending[0])
    driest = min(wanted, key=lambda t: figures[t])
    listed = ", ".join(f"{t} {figures[t]}/10" for t in wanted)
    return f"The {driest} trail is the driest at mud {figures[driest]}/10 ({listed})."


def _guide(match: re.Match[str], request: dict[str, Any]) -> Any:
    seen = results_of(request, "trail_guide")
    if not seen:
        return call("trail_guide", trail=match.group(1))
    text = seen[-1].content
    water = re.search(r"Last water before the summit: ([^.]+)\.", text)
    if water is None:
        return "The guide I was shown does not say where the last water is; carry enough."
    return f"Last water before the summit: {water.group(1)}."


RULES = [
    (r"\bdriest\b", _driest),
    (r"guide for the (\w+) trail", _guide),
]


def respond(request: dict[str, Any]) -> Any:
    return route(request, RULES, "Which trail are you thinking of?")
