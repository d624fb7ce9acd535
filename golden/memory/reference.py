"""Reference policy for the memory suite: a travel assistant that reads what memory left it.

It answers only from what is in the request, so what memory kept, summarized or dropped decides
the answer: the warmest city comes from the summary of earlier lookups plus the recent ones, the
snack advice from the pinned facts in the instructions.
"""

from __future__ import annotations

import re
from typing import Any

from golden._reference import call, last_user, results_of, route

CITIES = ("Lisbon", "Oslo", "Rome", "Vienna", "Madrid")
REPORT = re.compile(r"\b([A-Z][a-z]+): (-?\d+)°C")
ALLERGY = re.compile(r"allergic to (\w+)", re.I)
CAPITALS = {"portugal": "Lisbon", "norway": "Oslo", "italy": "Rome", "austria": "Vienna"}


def _everything(request: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content") or "") for m in request["messages"])


def _compare(match: re.Match[str], request: dict[str, Any]) -> Any:
    # One lookup per step, in the order asked, then an answer from every report still in view
    # (results in full, or the lines memory summarized them to).
    wanted = [c for c in CITIES if c.lower() in last_user(request).lower()]
    looked_up = {o.arguments.get("city") for o in results_of(request, "weather")}
    reports = dict(REPORT.findall(_everything(request)))
    pending = [c for c in wanted if c not in looked_up and c not in reports]
    if pending:
        return call("weather", city=pending[0])
    known = {city: int(t) for city, t in reports.items() if city in wanted}
    if not known:
        return "I could not find the weather for those cities."
    warmest = max(known, key=lambda c: known[c])
    listed = ", ".join(f"{c} {t}°C" for c, t in known.items())
    return f"{warmest} is the warmest at {known[warmest]}°C ({listed})."


def _noisy(match: re.Match[str], request: dict[str, Any]) -> Any:
    # A sloppy model: it reads an irrelevant news bulletin first, then calls the weather tool
    # with a wrong argument name, then looks each city up. Each step follows from what is
    # still in view (tool results, or the lines a summary kept of them), as for a model.
    wanted = [c for c in CITIES if c.lower() in last_user(request).lower()]
    seen = _everything(request)
    if "city news" not in seen and "travel_news(" not in seen:
        return call("travel_news", city=wanted[0])
    if "weather" not in _called(request) and "weather(" not in seen:
        return call("weather", town=wanted[0])
    return _compare(match, request)


def _called(request: dict[str, Any]) -> set[str]:
    return {c["function"]["name"] for m in request["messages"] for c in m.get("tool_calls") or ()}


def _remember(match: re.Match[str], request: dict[str, Any]) -> Any:
    if not results_of(request, "remember"):
        return call("remember", fact=f"The traveller is allergic to {match.group(1).lower()}.")
    return "Noted, I will keep that in mind for the whole trip."


def _snack(match: re.Match[str], request: dict[str, Any]) -> Any:
    system = request["messages"][0]["content"]
    allergy = ALLERGY.search(system)
    if allergy is None:
        return "Pack some trail mix with peanuts and raisins."
    return f"Pack rice crackers and fruit; nothing with {allergy.group(1).rstrip('.')}."


def _weather(match: re.Match[str], request: dict[str, Any]) -> Any:
    city = match.group(1).capitalize()
    seen = results_of(request, "weather")
    if not seen:
        return call("weather", city=city)
    return f"Today in {seen[-1].content}."


def _capital(match: re.Match[str], request: dict[str, Any]) -> Any:
    capital = CAPITALS.get(match.group(1).lower())
    return f"The capital is {capital}." if capital else "I don't know that one."


RULES = [
    (r"\bany news\b", _noisy),
    (r"\bcompare\b", _compare),
    (r"allergic to (\w+)", _remember),
    (r"snack", _snack),
    (r"weather in (\w+)", _weather),
    (r"capital of (\w+)", _capital),
]


def respond(request: dict[str, Any]) -> Any:
    return route(request, RULES, "Happy to help with your trip.")
