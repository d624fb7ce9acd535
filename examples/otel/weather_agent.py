"""`examples/otel/plain_app.py` as an agentbench agent: the same prompt, tool and model.

A session the plain program recorded through OpenTelemetry, imported and promoted, replays
against this agent (`agentbench replay CASSETTE --agent examples/otel/weather_agent.py:agent`):
unchanged it behaves as recorded; change `get_weather` and the replay names the step where
the tool's result, and so the conversation, diverged.
"""

from __future__ import annotations

import json

from agentbench import Agent, ModelSettings, tool

SYSTEM = "You answer weather questions. Use get_weather; never guess."
CELSIUS = {"paris": 21.0, "oslo": 4.5, "cairo": 33.0}


@tool(effect="read_only", idempotent=True)
def get_weather(city: str) -> str:
    """Current temperature of a city, in Celsius."""
    # The plain program sends `json.dumps(result)` back to the model: so does this tool.
    return json.dumps({"city": city, "celsius": CELSIUS.get(city.lower())})


agent = Agent(
    name="weather-app",
    instructions=SYSTEM,
    tools=[get_weather],
    model_settings=ModelSettings(model="gpt-4o-mini", temperature=0),
    state_summary=False,  # the plain program's system prompt is only its instructions
)
