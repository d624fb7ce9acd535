"""A travel assistant under a tight memory policy: pinned facts, summaries and drops.

The policy lets at most 8 messages reach the model, so a long conversation or a run with many
lookups has to be compacted: tool exchanges are summarized, the oldest turns dropped, while the
first request and the facts a tool pinned stay in front of the model.
"""

from __future__ import annotations

from agentbench import Agent, BusinessFailure, MemoryPolicy, RunContext, tool

WEATHER = {
    "lisbon": "Lisbon: 24°C, sunny, light wind from the north-west",
    "oslo": "Oslo: 6°C, rain showers, strong wind from the south",
    "rome": "Rome: 27°C, clear skies, hot in the afternoon",
    "vienna": "Vienna: 15°C, overcast, chance of drizzle in the evening",
    "madrid": "Madrid: 29°C, hot and dry, clear all day",
}


@tool(effect="read_only", idempotent=True)
def weather(city: str) -> str:
    """Today's weather in a city.

    Args:
        city: City name, e.g. "Lisbon".
    """
    report = WEATHER.get(city.lower())
    if report is None:
        raise BusinessFailure(f"no weather for {city!r}", data={"known": sorted(WEATHER)})
    return report


NEWS = {
    "lisbon": (
        "Lisbon city news. The municipal choir rehearses in the cathedral on Thursday evening; "
        "the fish market on the riverfront has new opening hours; a local bakery won a prize "
        "for its custard tarts; the football club signed a goalkeeper from Porto; a photo "
        "exhibition on old shop signs opens at the city museum; the tram museum repainted two "
        "historic cars; the botanical garden closes a greenhouse for repairs until spring; "
        "street artists were invited to paint the walls of an old warehouse in the east. "
        "Last line of the bulletin: tram 28 is back on its usual route."
    ),
}


@tool(effect="read_only", idempotent=True)
def travel_news(city: str) -> str:
    """Today's local news bulletin for a city (mostly local chatter).

    Args:
        city: City name, e.g. "Lisbon".
    """
    return NEWS.get(city.lower(), f"No news from {city} today.")


@tool(effect="write", idempotent=True)
def remember(ctx: RunContext, fact: str) -> str:
    """Keep a fact about the traveller in mind for the rest of the conversation.

    Args:
        fact: The fact, as one short sentence.
    """
    ctx.pin(fact)
    return f"noted: {fact}"


travel_agent = Agent(
    name="travel",
    description="A travel assistant that remembers what matters about the traveller.",
    instructions=(
        "You are a travel assistant. Look the weather up with the tool; never guess it. When "
        "the traveller tells you something that matters for the whole trip (an allergy, a "
        "budget), keep it with the remember tool. Answer in one or two sentences."
    ),
    tools=[weather, travel_news, remember],
    memory=MemoryPolicy(max_messages=8, keep_recent=2),
    # Memory summarizes and drops tool exchanges here, so the instructions keep a line per
    # result ("State so far") in front of the model: the suite checks what survives.
    state_summary=True,
)
