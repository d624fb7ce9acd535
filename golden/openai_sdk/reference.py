"""Reference policy for the bare openai-SDK trip desk and its travel-policy checker.

The checker is the call offered no tools; every call of the desk offers them.
Tool-call ids are pinned (`call_<n>`, counted through the conversation): the agent sends them
back in every later request, so a re-recorded cassette's requests stay the same.
"""

from __future__ import annotations

import re
from typing import Any

from agentbench import ToolCall
from golden._reference import last_user, results_of

AIRPORTS = {"lisbon": "LIS", "porto": "OPO", "madrid": "MAD", "tokyo": "NRT"}
CITIES = ("Lisbon", "Porto")
FLIGHT = re.compile(r"\b([A-Z]{2}\d{3,4})\b")
DATE = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")
NIGHTS = re.compile(r"(\d+) nights?")


def _calls(request: dict[str, Any], *wanted: tuple[str, dict[str, Any]]) -> list[ToolCall]:
    seen = sum(len(m.get("tool_calls") or ()) for m in request["messages"])
    return [
        ToolCall(name, arguments, id=f"call_{seen + n}")
        for n, (name, arguments) in enumerate(wanted, 1)
    ]


def _traveller(request: dict[str, Any]) -> str:
    found = re.search(r"business travel for ([^.]+)\.", request["messages"][0]["content"])
    return found.group(1) if found else "the traveller"


def _flights(question: str, request: dict[str, Any]) -> Any:
    places = [AIRPORTS[w] for w in re.findall(r"[a-z]+", question.lower()) if w in AIRPORTS]
    date = DATE.search(question)
    if len(places) < 2 or date is None:
        return "Where from, where to, and on which day?"
    seen = results_of(request, "search_flights")
    if not seen:
        arguments = {"origin": places[0], "destination": places[1], "date": date.group(1)}
        return _calls(request, ("search_flights", arguments))
    found = seen[-1].json()
    if "error" in found:
        return f"I found no flights from {places[0]} to {places[1]} on {date.group(1)}."
    best = found["flights"][0]
    return (
        f"The cheapest flight is {best['flight']}, leaving at {best['departs']} "
        f"for {best['price_eur']} EUR."
    )


def _book(request: dict[str, Any]) -> Any:
    earlier = " ".join(
        str(m.get("content") or "") for m in request["messages"] if m["role"] == "assistant"
    )
    flights = FLIGHT.findall(last_user(request)) or FLIGHT.findall(earlier)
    if not flights:
        return "Which flight should I book?"
    booked = results_of(request, "book_flight")
    if not booked:
        arguments = {"flight": flights[-1], "passenger": _traveller(request)}
        return _calls(request, ("book_flight", arguments))
    result = booked[-1].json()
    if "error" in result:
        return f"I could not book {flights[-1]}: {result['error']}."
    reference = result["booking_ref"]
    return f"Booked {result['flight']} for {_traveller(request)}: reference {reference}."


def _hotels(question: str, request: dict[str, Any]) -> Any:
    cities = [c for c in CITIES if c.lower() in question.lower()]
    nights = NIGHTS.search(question)
    count = int(nights.group(1)) if nights else 1
    seen = results_of(request, "hotel_availability")
    if not seen:
        wanted = [("hotel_availability", {"city": c, "nights": count}) for c in cities]
        return _calls(request, *wanted)
    cheapest = []
    for result in (o.json() for o in seen):
        best = min(result["hotels"], key=lambda h: h["total_eur"])
        cheapest.append(f"in {result['city']} {best['hotel']}, {best['total_eur']} EUR")
    return f"Cheapest for {count} night{'s' if count > 1 else ''}: " + "; ".join(cheapest) + "."


def _within_policy(question: str, request: dict[str, Any]) -> Any:
    hotel = re.search(r"the ([A-Z]\w+ [A-Z]\w+)", question)
    city = next((c for c in CITIES if c.lower() in question.lower()), None)
    if hotel is None or city is None:
        return "Which hotel, in which city?"
    name = hotel.group(1)
    seen = results_of(request, "hotel_availability")
    if not seen:
        return _calls(request, ("hotel_availability", {"city": city, "nights": 1}))
    offers = seen[-1].json()["hotels"]
    offer = next((h for h in offers if h["hotel"] == name), None)
    if offer is None:
        return f"{name} has no free rooms in {city}."
    verdict = results_of(request, "ask_policy")
    if not verdict:
        price = offer["price_per_night_eur"]
        question = f"{name} in {city} costs {price} EUR a night. Is that within the policy?"
        return _calls(request, ("ask_policy", {"question": question}))
    cheaper = min(offers, key=lambda h: h["price_per_night_eur"])
    return f"Policy check on {name}: {verdict[-1].content} {cheaper['hotel']} is the cheapest."


def _desk(request: dict[str, Any]) -> Any:
    question = last_user(request)
    if re.search(r"\bbook\b", question, re.I):
        return _book(request)
    if re.search(r"policy|allowed", question, re.I):
        return _within_policy(question, request)
    if re.search(r"hotel", question, re.I):
        return _hotels(question, request)
    if re.search(r"flight", question, re.I):
        return _flights(question, request)
    return "I can search flights and hotels and book flights."


def _policy_checker(request: dict[str, Any]) -> str:
    cap = re.search(r"at most (\d+) EUR a night", request["messages"][0]["content"])
    price = re.search(r"(\d+) EUR a night", last_user(request))
    if cap is None or price is None:
        return "I cannot tell from the policy."
    if int(price.group(1)) <= int(cap.group(1)):
        return f"Allowed: {price.group(1)} EUR is within the {cap.group(1)} EUR nightly cap."
    return f"Not allowed: hotels are capped at {cap.group(1)} EUR a night."


def respond(request: dict[str, Any]) -> Any:
    # The desk always offers its tools; the checker is asked without any.
    return _desk(request) if request.get("tools") else _policy_checker(request)
