"""Reference policy for the MCP time suite: what a capable model would do, deterministically."""

from __future__ import annotations

import re
from typing import Any

from golden._reference import call, results_of, route


def _answer(conversion: Any, source: str, time: str, target: str) -> str:
    if isinstance(conversion, str) or conversion.get("target") is None:
        return f"{source} is not a time zone I can convert from ({conversion})."
    at = conversion["target"]["datetime"][11:16]
    return f"{time} in {source} is {at} in {target} ({conversion['time_difference']})."


def _convert(match: re.Match[str], request: dict[str, Any]) -> Any:
    time, source, target = match.group(1), _zone(match.group(2)), _zone(match.group(3))
    seen = results_of(request, "time_convert_time")
    if not seen:
        return call("time_convert_time", source_timezone=source, time=time, target_timezone=target)
    if seen[-1].failed:
        return f"{source} is not a time zone the time server knows, so I cannot convert {time}."
    return _answer(seen[-1].json(), source, time, target)


def _colleagues(match: re.Match[str], request: dict[str, Any]) -> Any:
    time, first, second = match.groups()
    zones = {o.arguments["person"]: o for o in results_of(request, "office_timezone")}
    for person in (first, second):
        if person not in zones:
            return call("office_timezone", person=person)
    if any(zones[p].failed for p in (first, second)):
        return "I do not know where one of them works."
    source, target = zones[first].content, zones[second].content
    seen = results_of(request, "time_convert_time")
    if not seen:
        return call("time_convert_time", source_timezone=source, time=time, target_timezone=target)
    at = seen[-1].json()["target"]["datetime"][11:16]
    return f"When it is {time} for {first} ({source}), it is {at} for {second} ({target})."


CITIES = {"new york": "America/New_York", "berlin": "Europe/Berlin"}


def _zone(name: str) -> str:
    return CITIES.get(name.strip().lower(), name.strip())


def respond(request: dict[str, Any]) -> Any:
    return route(
        request,
        [
            (r"when it is (\d\d:\d\d) for (\w+), what time is it for (\w+)", _colleagues),
            (r"what time is (\d\d:\d\d) in ([\w/ ]+?) in ([\w/ ]+?)\?", _convert),
        ],
        "I can convert times between time zones and tell you a colleague's office time.",
    )
