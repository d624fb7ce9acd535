"""Per-step replay cost: agentbench's ReplayModel against two floors and the SDK paths.

    python benchmarks/replay_speed.py [--steps 10,100,1000] [--repeat 5] [--samples 8]
                                      [--vcr-samples 4] [--vcr-repeat 1]

For each length, one session of STEPS model calls (each a tool call, then a final answer) is
recorded through the real record path (`RecordingModel`), with the request fingerprints a
saved cassette carries. Then, in the same process, interleaved, median of REPEAT rounds:

* bare floor — a dict lookup, parsing the recorded response with orjson, a trivial tool
  call, appending a row;
* realistic floor — what a replayed step cannot avoid doing: building the request (model,
  a window on system message + conversation, tools), hashing the conversation incrementally
  (only the messages new since the last step), parsing the response, validating the tool's
  arguments with its pydantic model, calling it, appending the assistant and tool messages;
* agentbench — `Runner.run` against `ReplayModel` (the loop, events, request fingerprint and
  drift check, response parse, the tool), once with the trivial tool as a plain `def`, once
  as `async def`, and once declared `blocking=False` where this version has that option;
* sdk, n-th answer — the same recorded requests through the openai SDK (`AsyncOpenAI`,
  `chat.completions.create`, typed response) into an httpx transport that serves the n-th
  recorded answer without matching: the SDK's own cost (it re-transforms every message of
  every request), no loop, no tools;
* sdk+vcrpy — the same, the transport answering with vcrpy's own `Cassette`, matching on
  method, uri and body as vcrpy users do (the SDK runs on httpx2, which vcrpy cannot patch,
  so the transport calls vcrpy's `play_response` directly), in `--vcr-repeat` rounds.

Both SDK rows cost more per call the longer the session (the SDK transforms every message
sent; vcrpy compares a request with every recorded one before it), so for sessions of more
than 200 calls they are timed on `--samples` (vcrpy: `--vcr-samples`) calls spread evenly
over the session, each served exactly as in sequence, and the mean is scaled to the session:
an estimate (for vcrpy, whose cost grows with the square of the index, a few samples
overstate it by up to a fifth — beside a gap of four orders of magnitude).

Agent settings: the runtime's defaults, but for `Limits(max_iterations=steps + 1,
repeat_warn_at=steps + 2, repeat_stop_at=steps + 3)`, raised past the session's length so
every session runs to its end.

Printed per length: wall and CPU microseconds per model call for each (CPU is the whole
process's, all threads, so it leaves out time spent waiting for a thread or for a core on a
busy machine), and the ratios agentbench/floors and sdk/agentbench. Runs against the code
before issue #15 too (`PYTHONPATH=/tmp/before`). No timings are asserted anywhere; machines
here are shared and noisy.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import inspect
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx2
import orjson
from openai import AsyncOpenAI
from vcr import matchers
from vcr.cassette import Cassette as VcrCassette
from vcr.request import Request as VcrRequest

from agentbench import Agent, Limits, Runner, ToolCall, tool
from agentbench.replay.cassette import Cassette
from agentbench.replay.drift import FINGERPRINT_VERSION, Fingerprinter
from agentbench.replay.models import RecordingModel, ReplayModel
from agentbench.runtime.models import ChatResponse, Usage
from agentbench.runtime.tools import Tool

Timing = tuple[float, float]  # (wall seconds, CPU seconds of the process, all its threads)
MODEL = "bench-model"
INSTRUCTIONS = "Count."
_SAMPLE_ABOVE = 200


def _add_one(n: int) -> int:
    """Trivial tool."""
    return n + 1


async def _add_one_async(n: int) -> int:
    """Trivial tool."""
    return n + 1


def _tools() -> dict[str, Tool]:
    variants = {
        "sync tool": tool(name="step", effect="read_only")(_add_one),
        "async tool": tool(name="step", effect="read_only")(_add_one_async),
    }
    # `blocking=False` (issue #15): a sync tool that cannot block runs on the event loop.
    if "blocking" in inspect.signature(Tool).parameters:
        variants["blocking=False"] = tool(name="step", effect="read_only", blocking=False)(_add_one)
    return variants


TOOLS = _tools()
STEP = TOOLS["sync tool"]


def agent(steps: int, step: Tool = STEP) -> Agent:
    return Agent(
        name="bench",
        instructions=INSTRUCTIONS,
        tools=[step],
        limits=Limits(max_iterations=steps + 1, repeat_warn_at=steps + 2, repeat_stop_at=steps + 3),
    )


class _Counting:
    """Answers call n with `step(n)`, then "done": a model without any per-call copying, so
    recording a long session costs what the runtime costs, not what a test double does."""

    name = MODEL

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.calls = 0

    async def complete(self, request: dict[str, Any], **_: Any) -> ChatResponse:
        index = self.calls
        self.calls += 1
        usage = Usage(input_tokens=10, output_tokens=5)
        if index < self.steps:
            call = ToolCall("step", {"n": index})
            return ChatResponse(tool_calls=[call], finish_reason="tool_calls", usage=usage)
        return ChatResponse(text="done", finish_reason="stop", usage=usage)


async def record(steps: int) -> Cassette:
    recorder = RecordingModel(_Counting(steps))
    result = await Runner.run(agent(steps), "count", model=recorder)
    assert result.completed, result.error
    cassette = recorder.cassette
    # What `Cassette.save` stores beside the requests, so replay compares by fingerprint.
    fingerprinter = Fingerprinter()
    cassette.update_info(
        fingerprint_version=FINGERPRINT_VERSION,
        fingerprints=[fingerprinter(i.request) for i in cassette.interactions],
    )
    return cassette


def _clock() -> Timing:
    return time.perf_counter(), time.process_time()


def _since(start: Timing, scale: float = 1.0) -> Timing:
    wall, cpu = _clock()
    return (wall - start[0]) * scale, (cpu - start[1]) * scale


def bare_floor(cassette: Cassette) -> Timing:
    bodies = {i: it.response_body for i, it in enumerate(cassette.interactions)}
    rows: list[object] = []
    started = _clock()
    for index in range(len(bodies)):
        parsed = orjson.loads(bodies[index])
        call = parsed["choices"][0]["message"].get("tool_calls")
        if call:
            rows.append(_add_one(**orjson.loads(call[0]["function"]["arguments"])))
        rows.append(parsed)
    return _since(started)


def realistic_floor(cassette: Cassette) -> Timing:
    bodies = {i: it.response_body for i, it in enumerate(cassette.interactions)}
    system = {"role": "system", "content": INSTRUCTIONS}
    tools = [STEP.openai_schema()]
    args_model = STEP.args_model
    messages: list[dict[str, Any]] = [{"role": "user", "content": "count"}]
    state = hashlib.blake2b(digest_size=16)
    hashed = 0
    digests: list[str] = []
    started = _clock()
    for index in range(len(bodies)):
        # The conversation as a window (system message, list, length), not a copy: a copy
        # per step would make the floor itself grow with the session.
        request = {"model": MODEL, "messages": (system, messages, len(messages)), "tools": tools}
        for message in messages[hashed:]:
            state.update(orjson.dumps(message, option=orjson.OPT_SORT_KEYS))
        hashed = len(messages)
        digests.append(state.copy().hexdigest())
        reply = orjson.loads(bodies[index])["choices"][0]["message"]
        messages.append(reply)
        for call in reply.get("tool_calls") or ():
            valid = args_model.model_validate(orjson.loads(call["function"]["arguments"]))
            result = _add_one(**valid.model_dump())
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call["id"],
                    "content": orjson.dumps(result).decode(),
                }
            )
        assert request["messages"]
    return _since(started)


async def agentbench_replay(cassette: Cassette, replayed: Agent) -> Timing:
    # The agent is built once, outside the timing, as users build theirs.
    model = ReplayModel(cassette)
    started = _clock()
    result = await Runner.run(replayed, "count", model=model)
    elapsed = _since(started)
    assert result.completed and not model.drifts, (result.error, model.drifts[:1])
    return elapsed


Handler = Callable[[httpx2.Request], httpx2.Response]


def _response(status: int, body: str | bytes) -> httpx2.Response:
    return httpx2.Response(status, headers={"content-type": "application/json"}, content=body)


async def _through_sdk(cassette: Cassette, handler: Handler, indices: list[int]) -> Timing:
    """Send the recorded requests at `indices`, in order, through the SDK: the time it took,
    scaled to the whole session when `indices` are a sample of it."""
    uri = cassette.interactions[0].uri
    client = AsyncOpenAI(
        api_key="unused",
        base_url=uri.removesuffix("/chat/completions"),
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )
    # Copies made outside the timing, so each call gets the recorded body's exact bytes.
    bodies = [orjson.loads(orjson.dumps(cassette.interactions[i].request)) for i in indices]
    started = _clock()
    for body in bodies:
        await client.chat.completions.create(**body)
    elapsed = _since(started, len(cassette.interactions) / len(indices))
    await client.close()
    return elapsed


def _calls(cassette: Cassette, samples: int) -> list[int]:
    """Every call of a short session; `samples` calls spread evenly over a long one."""
    calls = len(cassette.interactions)
    if calls <= _SAMPLE_ABOVE:
        return list(range(calls))
    return sorted({round(i * (calls - 1) / (samples - 1)) for i in range(samples)})


async def sdk_nth(cassette: Cassette, samples: int) -> Timing:
    indices = _calls(cassette, samples)
    answers = iter([cassette.interactions[i].response_body for i in indices])

    def handler(request: httpx2.Request) -> httpx2.Response:
        return _response(200, next(answers))

    return await _through_sdk(cassette, handler, indices)


def _vcr_cassette(cassette: Cassette) -> VcrCassette:
    """The session as vcrpy holds a loaded cassette: its requests' bodies as sent."""
    vcr = VcrCassette("replay-speed", match_on=(matchers.method, matchers.uri, matchers.body))
    for interaction in cassette.interactions:
        body = orjson.dumps(interaction.request)
        request = VcrRequest("POST", interaction.uri, body, {"content-type": "application/json"})
        answer = {"status": {"code": 200, "message": "OK"}}
        vcr.append(request, {**answer, "body": {"string": interaction.response_body}})
    return vcr


async def sdk_vcrpy(cassette: Cassette, samples: int) -> Timing:
    """SDK + vcrpy; a call's cost grows with the square of its index (it is compared with
    every earlier one, bodies growing too), so even a few samples take minutes at 1,000."""
    vcr = _vcr_cassette(cassette)

    def handler(request: httpx2.Request) -> httpx2.Response:
        recorded = VcrRequest(
            request.method, str(request.url), request.content, dict(request.headers)
        )
        response = vcr.play_response(recorded)
        return _response(response["status"]["code"], response["body"]["string"])

    # Call k is compared with the k recorded calls before it whatever was played before, so
    # a sample of calls costs what those calls cost in sequence.
    return await _through_sdk(cassette, handler, _calls(cassette, samples))


async def _timed(make: Callable[[], Awaitable[Timing]] | Callable[[], Timing]) -> Timing:
    value = make()
    return await value if inspect.isawaitable(value) else value  # type: ignore[return-value]


async def measure(
    steps: int, repeat: int, samples: int, vcr_samples: int, vcr_repeat: int
) -> dict[str, Timing]:
    """Median wall and CPU µs per model call of each way to serve the session."""
    cassette = await record(steps)
    calls = len(cassette.interactions)
    agents = {label: agent(steps, made) for label, made in TOOLS.items()}
    runs: dict[str, Callable[[], Any]] = {
        "bare floor": lambda: bare_floor(cassette),
        "realistic floor": lambda: realistic_floor(cassette),
        **{
            f"agentbench, {label}": (lambda a=a: agentbench_replay(cassette, a))
            for label, a in agents.items()
        },
        "sdk, n-th answer": lambda: sdk_nth(cassette, samples),
    }
    for make in runs.values():  # warm-up: imports, template compile, first-call caches
        await _timed(make)
    timings: dict[str, list[Timing]] = {name: [] for name in runs}
    for _ in range(repeat):
        for name, make in runs.items():
            timings[name].append(await _timed(make))
    # vcrpy's quadratic matching makes it thousands of times slower than the rest: fewer
    # rounds say as much.
    timings["sdk+vcrpy"] = [await sdk_vcrpy(cassette, vcr_samples) for _ in range(vcr_repeat)]
    return {
        name: (
            statistics.median(wall for wall, _ in values) / calls * 1e6,
            statistics.median(cpu for _, cpu in values) / calls * 1e6,
        )
        for name, values in timings.items()
    }


def report(steps: int, repeat: int, per_call: dict[str, Timing]) -> None:
    print(f"\n{steps} steps ({steps + 1} model calls), median of {repeat} rounds")
    print(f"  {'µs per model call':<28} {'wall':>12} {'cpu':>12}")
    for name, (wall, cpu) in per_call.items():
        print(f"  {name:<28} {wall:12.1f} {cpu:12.1f}")
    floor, bare = per_call["realistic floor"], per_call["bare floor"]
    print(f"  {'ratios (wall, cpu)':<44}")

    def ratio(label: str, top: Timing, bottom: Timing) -> None:
        print(f"  {label:<44} {top[0] / bottom[0]:9.1f}x {top[1] / bottom[1]:9.1f}x")

    for label in TOOLS:
        ours = per_call[f"agentbench, {label}"]
        ratio(f"agentbench ({label}) / realistic floor", ours, floor)
    sync = per_call["agentbench, sync tool"]
    ratio("agentbench (sync tool) / bare floor", sync, bare)
    ratio("sdk, n-th answer / agentbench (sync tool)", per_call["sdk, n-th answer"], sync)
    ratio("sdk+vcrpy / agentbench (sync tool)", per_call["sdk+vcrpy"], sync)


async def main(options: argparse.Namespace) -> None:
    print(f"tool variants: {', '.join(TOOLS)}")
    for steps in [int(part) for part in options.steps.split(",")]:
        per_call = await measure(
            steps,
            options.repeat,
            max(2, options.samples),
            max(2, options.vcr_samples),
            options.vcr_repeat,
        )
        report(steps, options.repeat, per_call)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", default="10,100,1000", help="comma-separated lengths")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--samples", type=int, default=8, help="SDK calls timed past 200")
    parser.add_argument("--vcr-samples", type=int, default=4, help="vcrpy calls timed past 200")
    parser.add_argument("--vcr-repeat", type=int, default=1)
    asyncio.run(main(parser.parse_args()))
