"""A tiny weather suite shared by the harness and comparison tests: agent, suite, policy.

`respond` stands in for a model: it calls get_weather for the city asked about, then
answers from the tool result, so recording the suite needs no real endpoint.
"""

from __future__ import annotations

import orjson

from agentbench import ToolCall

AGENT = '''
from agentbench import Agent, tool

TEMPERATURES = {"Paris": 21, "Oslo": 4}

@tool(effect="read_only")
def get_weather(city: str) -> dict:
    """Current temperature.

    Args:
        city: City name.
    """
    return {"city": city, "celsius": TEMPERATURES[city]}

agent = Agent(name="weather", instructions="Answer briefly.", tools=[get_weather])
'''

SUITE = """
name: mini
agent: agent.py:agent
model: {name: mini-model}
cassettes: cassettes
scorers:
  - stop_reason: completed
"""


def respond(request: dict) -> object:
    question = request["messages"][-1]
    if question["role"] == "tool":
        data = orjson.loads(question["content"])
        return f"{data['city']}: {data['celsius']} degrees."
    city = "Paris" if "Paris" in question["content"] else "Oslo"
    return ToolCall("get_weather", {"city": city})
