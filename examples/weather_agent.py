"""A small agent with two tools, run three ways.

    python examples/weather_agent.py            # ScriptedModel: no network, no key
    python examples/weather_agent.py --server   # the real openai SDK against the bundled
                                                # OpenAI-compatible server on 127.0.0.1
    python examples/weather_agent.py --live     # a real endpoint: OPENAI_API_KEY, optional
                                                # OPENAI_BASE_URL and OPENAI_MODEL
    python examples/weather_agent.py --live --stream   # the same, answers streamed

Every event of the run is printed as it happens, then the stop reason and the answer.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from typing import Literal

from agentbench import (
    Agent,
    BusinessFailure,
    ChatModel,
    ModelSettings,
    OpenAIModel,
    Runner,
    ScriptedModel,
    ToolCall,
    tool,
)
from agentbench.testing import OpenAICompatibleServer

CITIES = {"paris": 21.0, "oslo": 4.5, "cairo": 33.0}


@tool(effect="read_only", timeout_s=5, idempotent=True)
def get_weather(city: str) -> dict[str, float | str]:
    """Current temperature of a city, in Celsius.

    Args:
        city: City name, e.g. "Paris".
    """
    temp = CITIES.get(city.lower())
    if temp is None:
        raise BusinessFailure(f"no weather station for {city!r}", data={"known": sorted(CITIES)})
    return {"city": city, "celsius": temp}


@tool(effect="read_only", idempotent=True)
def convert(celsius: float, to: Literal["fahrenheit", "kelvin"]) -> float:
    """Convert a Celsius temperature.

    Args:
        celsius: Temperature in Celsius.
        to: Target unit.
    """
    return round(celsius * 9 / 5 + 32, 1) if to == "fahrenheit" else round(celsius + 273.15, 2)


agent = Agent(
    name="weather",
    instructions="You answer weather questions for {{ user }}. Use the tools; be brief.",
    tools=[get_weather, convert],
    # OpenAI's default when tools are offered; llama.cpp ignores the tools unless it is sent.
    model_settings=ModelSettings(tool_choice="auto"),
)

SCRIPT = [
    ToolCall("get_weather", {"city": "Paris"}),
    ToolCall("convert", {"celsius": 21.0, "to": "fahrenheit"}),
    "It is 21 °C (69.8 °F) in Paris.",
]


def show(event) -> None:
    detail = {
        "model_response": lambda e: f"tokens={e.usage.total_tokens} latency={e.latency_ms:.1f}ms",
        "tool_started": lambda e: f"{e.tool}({e.arguments})",
        "tool_finished": lambda e: f"{e.tool} → {e.result.kind}: {e.result.observation()[:60]}",
        "text_delta": lambda e: repr(e.text),
        "run_finished": lambda e: f"stop_reason={e.stop_reason}",
    }.get(event.kind, lambda e: "")
    print(f"  #{event.seq:<2} {event.kind:<15} {detail(event)}")


async def main(mode: str, stream: bool = False) -> None:
    question = "How warm is it in Paris, in Fahrenheit?"
    if stream:
        agent.model_settings = agent.model_settings.model_copy(update={"stream": True})
    if mode == "scripted":
        model: ChatModel = ScriptedModel(SCRIPT)
        result = await Runner.run(
            agent, question, model=model, context={"user": "Ada"}, hooks=[show]
        )
    elif mode == "server":
        with OpenAICompatibleServer(SCRIPT) as server:
            print(f"bundled server at {server.base_url}")
            async with OpenAIModel("test-model", base_url=server.base_url) as model:
                result = await Runner.run(
                    agent, question, model=model, context={"user": "Ada"}, hooks=[show]
                )
    else:
        async with OpenAIModel(os.environ.get("OPENAI_MODEL", "gpt-4o-mini")) as model:
            result = await Runner.run(
                agent, question, model=model, context={"user": "Ada"}, hooks=[show]
            )
    print(f"\nstop reason: {result.stop_reason}\nanswer: {result.output}")
    print(f"tokens: {result.usage.total_tokens} over {result.iterations} model calls")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--server", action="store_const", dest="mode", const="server")
    group.add_argument("--live", action="store_const", dest="mode", const="live")
    parser.add_argument("--stream", action="store_true", help="stream the model's answers")
    args = parser.parse_args()
    asyncio.run(main(args.mode or "scripted", args.stream))
