"""Trip desk: a travel-booking assistant written on the bare openai SDK, as its users write it.

A plain chat-completions loop: the model asks for tools (flight search, hotel availability,
booking; deterministic in-module data), the loop runs each one and sends its result back, until
the model answers in text. Travel-policy questions go to a second model call with instructions
of its own (a sub-agent used as a tool). With `stream: true` in the case's context every model
call streams (server-sent events) and the loop puts the answer together from its deltas.

agentbench calls `trip_desk(input, target)` once per user turn: `target.base_url` is its own
record/replay server, `target.model` the suite's model name, `target.variables` the case's
context (the traveller's name, whether to stream).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from openai import OpenAI

if TYPE_CHECKING:  # agentbench is needed only to test the agent, not to run it
    from agentbench import TargetContext

SYSTEM_PROMPT = (
    "You are a trip desk booking business travel for {traveller}. Use the tools to look up "
    "flights and hotels; never invent a flight, a price or a booking reference. Ask the "
    "travel-policy checker before recommending anything the policy may not allow."
)
POLICY_PROMPT = (
    "You check business trips against the company travel policy and answer in one sentence.\n"
    "Policy: flights in economy class only. Hotels: at most 150 EUR a night. A trip costing "
    "more than 800 EUR in total needs a manager's approval."
)
MAX_MODEL_CALLS = 8

FLIGHTS: dict[tuple[str, str], list[dict[str, Any]]] = {
    ("LIS", "OPO"): [
        {"flight": "TP1940", "departs": "07:10", "arrives": "08:05", "price_eur": 89},
        {"flight": "TP1946", "departs": "18:30", "arrives": "19:25", "price_eur": 64},
    ],
    ("LIS", "MAD"): [
        {"flight": "IB3107", "departs": "09:45", "arrives": "12:00", "price_eur": 112},
        {"flight": "TP1018", "departs": "13:20", "arrives": "15:35", "price_eur": 138},
    ],
}
HOTELS: dict[str, list[dict[str, Any]]] = {
    "Lisbon": [
        {"hotel": "Alfama Rooms", "price_per_night_eur": 120, "rooms_left": 3},
        {"hotel": "Palacio Chiado", "price_per_night_eur": 240, "rooms_left": 5},
    ],
    "Porto": [
        {"hotel": "Ribeira House", "price_per_night_eur": 95, "rooms_left": 1},
        {"hotel": "Douro Grand", "price_per_night_eur": 180, "rooms_left": 8},
    ],
}


def search_flights(origin: str, destination: str, date: str) -> dict[str, Any]:
    flights = FLIGHTS.get((origin.upper(), destination.upper()))
    if not flights:
        return {"error": f"no flights from {origin} to {destination} on {date}"}
    cheapest_first = sorted(flights, key=lambda f: f["price_eur"])
    return {"date": date, "flights": cheapest_first}


def hotel_availability(city: str, nights: int) -> dict[str, Any]:
    hotels = HOTELS.get(city.title())
    if not hotels:
        return {"error": f"no hotels on file in {city}"}
    offers = [{**h, "total_eur": h["price_per_night_eur"] * nights} for h in hotels]
    return {"city": city.title(), "nights": nights, "hotels": offers}


def book_flight(flight: str, passenger: str) -> dict[str, Any]:
    if not any(f["flight"] == flight for route in FLIGHTS.values() for f in route):
        return {"error": f"unknown flight {flight}"}
    initials = "".join(part[0] for part in passenger.split()).upper()
    return {"booking_ref": f"BK-{flight}-{initials}", "flight": flight, "status": "confirmed"}


TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "search_flights",
            "description": "Flights between two airports on a date, cheapest first.",
            "parameters": {
                "type": "object",
                "properties": {
                    "origin": {"type": "string", "description": "IATA airport code, e.g. LIS"},
                    "destination": {"type": "string", "description": "IATA airport code"},
                    "date": {"type": "string", "description": "Day of travel, YYYY-MM-DD"},
                },
                "required": ["origin", "destination", "date"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "hotel_availability",
            "description": "Hotels with free rooms in a city, with the price for the stay.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "nights": {"type": "integer", "minimum": 1},
                },
                "required": ["city", "nights"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "book_flight",
            "description": "Book a seat on a flight; returns the booking reference.",
            "parameters": {
                "type": "object",
                "properties": {
                    "flight": {"type": "string", "description": "Flight number, e.g. TP1946"},
                    "passenger": {"type": "string", "description": "Full name"},
                },
                "required": ["flight", "passenger"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "ask_policy",
            "description": "Ask the travel-policy checker whether something is allowed.",
            "parameters": {
                "type": "object",
                "properties": {"question": {"type": "string"}},
                "required": ["question"],
            },
        },
    },
]


@dataclass
class Call:
    """One tool call the model asked for."""

    id: str
    name: str
    arguments: str


class Desk:
    """The chat loop: model calls and tool runs until the model answers in text."""

    def __init__(self, client: OpenAI, model: str, *, stream: bool = False) -> None:
        self.client = client
        self.model = model
        self.stream = stream

    def run(self, messages: list[Any]) -> str:
        for _ in range(MAX_MODEL_CALLS):
            message, calls = self.complete(messages, tools=TOOLS)
            messages.append(message)
            if not calls:
                return _content(message)
            for call in calls:
                messages.append(
                    {"role": "tool", "tool_call_id": call.id, "content": self.run_tool(call)}
                )
        raise RuntimeError(f"no answer after {MAX_MODEL_CALLS} model calls")

    def run_tool(self, call: Call) -> str:
        functions = {
            "search_flights": search_flights,
            "hotel_availability": hotel_availability,
            "book_flight": book_flight,
            "ask_policy": self.ask_policy,
        }
        try:
            result = functions[call.name](**json.loads(call.arguments or "{}"))
        except Exception as exc:  # the model sees what went wrong and can correct itself
            result = {"error": f"{type(exc).__name__}: {exc}"}
        return result if isinstance(result, str) else json.dumps(result)

    def ask_policy(self, question: str) -> str:
        """The policy checker: another model call, with its own instructions and no tools."""
        message, _ = self.complete(
            [{"role": "system", "content": POLICY_PROMPT}, {"role": "user", "content": question}]
        )
        return _content(message)

    def complete(self, messages: list[Any], **options: Any) -> tuple[Any, list[Call]]:
        """The model's next message (as it goes back into `messages`) and its tool calls."""
        if self.stream:
            return self._complete_streamed(messages, **options)
        response = self.client.chat.completions.create(
            model=self.model, messages=messages, **options
        )
        message = response.choices[0].message
        asked = message.tool_calls or []
        calls = [Call(c.id, c.function.name, c.function.arguments) for c in asked]
        return message, calls

    def _complete_streamed(self, messages: list[Any], **options: Any) -> tuple[Any, list[Call]]:
        stream = self.client.chat.completions.create(
            model=self.model,
            messages=messages,
            stream=True,
            stream_options={"include_usage": True},
            **options,
        )
        text: list[str] = []
        calls: dict[int, Call] = {}
        for chunk in stream:
            if not chunk.choices:  # the usage chunk at the end
                continue
            delta = chunk.choices[0].delta
            if delta.content:
                text.append(delta.content)
            for piece in delta.tool_calls or []:
                call = calls.setdefault(piece.index, Call("", "", ""))
                call.id = piece.id or call.id
                if piece.function is not None:
                    call.name += piece.function.name or ""
                    call.arguments += piece.function.arguments or ""
        message: dict[str, Any] = {"role": "assistant", "content": "".join(text) or None}
        ordered = [calls[index] for index in sorted(calls)]
        if ordered:
            message["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in ordered
            ]
        return message, ordered


def _content(message: Any) -> str:
    content = message["content"] if isinstance(message, dict) else message.content
    return content or ""


def trip_desk(input: str | list[dict[str, Any]], target: TargetContext) -> str:
    """One user turn: `input` is the question, or the conversation so far from turn 2 on."""
    traveller = target.variables.get("traveller", "the traveller")
    conversation = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
    system = {"role": "system", "content": SYSTEM_PROMPT.format(traveller=traveller)}
    # Closed with the turn: its kept-alive connection is not left for the garbage collector.
    with OpenAI(base_url=target.base_url, api_key=target.api_key) as client:
        desk = Desk(client, target.model, stream=bool(target.variables.get("stream")))
        return desk.run([system, *conversation])
