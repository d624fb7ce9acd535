"""Per-step replay cost: agentbench's ReplayModel against a pure-Python floor and the SDK path.

    python benchmarks/replay_speed.py [--steps 300] [--repeat 5]

One cassette of STEPS model calls (each a tool call, then a final answer) is recorded through
the real record path. Then, in the same process:

* floor — what a replayed step cannot avoid: a dict lookup, parsing the recorded response
  with orjson, a trivial tool call, appending a row;
* agentbench — `Runner.run` against `ReplayModel` (the loop, events, request fingerprint and
  drift check, response parse, the tool);
* sdk+vcrpy — the same requests sent through the openai SDK (`AsyncOpenAI`) into an httpx
  transport that answers from the same cassette file with vcrpy's own `Cassette`, matching on
  method, uri and body as vcrpy users do (the SDK runs on httpx2, which vcrpy cannot patch, so
  the transport calls vcrpy's matcher directly).

Printed: microseconds per step for each, and the ratios agentbench/floor and
sdk+vcrpy/agentbench. No timings are asserted anywhere; machines here are shared and noisy.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import httpx2
import orjson
from openai import AsyncOpenAI
from vcr import matchers
from vcr.cassette import Cassette as VcrCassette
from vcr.request import Request as VcrRequest

from agentbench import Agent, Limits, Runner, ScriptedModel, ToolCall, tool
from agentbench.replay.cassette import Cassette
from agentbench.replay.models import RecordingModel, ReplayModel


@tool(effect="read_only")
def step(n: int) -> int:
    """Trivial tool."""
    return n + 1


def agent(steps: int) -> Agent:
    return Agent(
        name="bench",
        instructions="Count.",
        tools=[step],
        state_summary=False,
        limits=Limits(max_iterations=steps + 1, repeat_warn_at=steps + 2, repeat_stop_at=steps + 3),
    )


async def record(path: Path, steps: int) -> Cassette:
    script = [ToolCall("step", {"n": i}) for i in range(steps)] + ["done"]
    recorder = RecordingModel(ScriptedModel(script, name="bench-model"))
    result = await Runner.run(agent(steps), "count", model=recorder)
    assert result.completed, result.error
    recorder.cassette.save(path)
    return Cassette.load(path)


def floor(cassette: Cassette) -> float:
    bodies = {i: it.response_body for i, it in enumerate(cassette.interactions)}
    rows: list[object] = []
    started = time.perf_counter()
    for index in range(len(bodies)):
        parsed = orjson.loads(bodies[index])
        call = parsed["choices"][0]["message"].get("tool_calls")
        if call:
            rows.append(step.fn(**orjson.loads(call[0]["function"]["arguments"])))
        rows.append(parsed)
    return time.perf_counter() - started


async def agentbench_replay(cassette: Cassette, steps: int) -> float:
    model = ReplayModel(cassette)
    started = time.perf_counter()
    result = await Runner.run(agent(steps), "count", model=model)
    elapsed = time.perf_counter() - started
    assert result.completed and not model.drifts, (result.error, model.drifts[:1])
    return elapsed


async def sdk_vcrpy(path: Path, cassette: Cassette) -> float:
    vcr_cassette = VcrCassette.load(
        path=str(path), match_on=(matchers.method, matchers.uri, matchers.body)
    )

    def handler(request: httpx2.Request) -> httpx2.Response:
        recorded = VcrRequest(
            request.method, str(request.url), request.content, dict(request.headers)
        )
        response = vcr_cassette.play_response(recorded)
        return httpx2.Response(
            response["status"]["code"],
            headers={"content-type": "application/json"},
            content=response["body"]["string"],
        )

    requests = [interaction.request for interaction in cassette.interactions]
    uri = cassette.interactions[0].uri
    client = AsyncOpenAI(
        api_key="unused",
        base_url=uri.removesuffix("/chat/completions"),
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )
    started = time.perf_counter()
    for body in requests:
        # Sent with the recorded body's exact bytes, so vcrpy's body matcher can find it.
        await client.post(
            "/chat/completions", body=orjson.loads(orjson.dumps(body)), cast_to=object
        )
    elapsed = time.perf_counter() - started
    await client.close()
    return elapsed


async def main(steps: int, repeat: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "bench.yaml"
        cassette = await record(path, steps)
        calls = len(cassette.interactions)
        timings: dict[str, list[float]] = {"floor": [], "agentbench": [], "sdk+vcrpy": []}
        for _ in range(repeat):
            timings["floor"].append(floor(cassette))
            timings["agentbench"].append(await agentbench_replay(cassette, steps))
            timings["sdk+vcrpy"].append(await sdk_vcrpy(path, cassette))
    per_step = {name: statistics.median(values) / calls * 1e6 for name, values in timings.items()}
    print(f"replay of one session with {calls} model calls, median of {repeat} runs")
    for name, micros in per_step.items():
        print(f"  {name:<11} {micros:10.1f} µs per step")
    print(f"  agentbench / floor      = {per_step['agentbench'] / per_step['floor']:8.1f}x")
    print(f"  sdk+vcrpy / agentbench  = {per_step['sdk+vcrpy'] / per_step['agentbench']:8.1f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=5)
    options = parser.parse_args()
    asyncio.run(main(options.steps, options.repeat))
