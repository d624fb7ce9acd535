"""Replay cost per model call of a boundary target, against the same agent on a canned transport.

    python benchmarks/boundary_replay.py [--calls 10,100] [--repeat 7] [--round-calls 100]
                                         [--agents sync,async,pydantic-ai] [--quick]

The agents are a user's own: a bare openai-SDK tool-calling loop (`chat.completions.create`,
run each tool asked for, send its result back, until the model answers in text), written once
and run as a sync function on `OpenAI` and as an async one on `AsyncOpenAI`, and the same
counting agent on pydantic-ai (`Agent`, `OpenAIChatModel`) when it is installed. Each builds
its client once, as an application does, and points a copy at the turn's base URL
(`client.with_options(base_url=target.base_url)`). For each session length an agent is
recorded once through the real record path (`run_boundary_case`, record mode `all`,
forwarding to the bundled OpenAI-compatible server); then, in the same process, in REPEAT
interleaved rounds (each replaying whole sessions of at least ROUND_CALLS (100) model calls in
all, every way in turn), the session is replayed four ways:

* floor — the same agent code, its openai client given an in-process canned transport
  (`http_client=httpx2.Client(transport=httpx2.MockTransport(...))`, the async pair for the
  async agents) serving the recorded response bodies in order: no agentbench, no socket, no
  matching; what the framework and the agent's own loop cost;
* loopback — the function called as a boundary target is (a worker thread for the sync one),
  its client talking over HTTP to a loopback server on the loop that sends the recorded bodies
  back in order and reads nothing: the HTTP hop alone, most of it the client's own HTTP
  stack (httpcore2, h11, anyio), no agentbench replay;
* boundary — `agentbench.evals.running.boundary_case.run_boundary_case`, the case planned as
  `agentbench run` plans it: the cassette loaded from its file (the cassette cache warm, as on
  any run after the first), the case's loopback server, each request normalized, matched,
  drift-checked and turned into events; with no store, and with the store `agentbench run`
  opens by default (`TraceStore(recording_process=True)` on a machine of two or more cores:
  the runs' events are encoded here and stored by a child process, whose CPU is printed on a
  line of its own).

Agent settings: the openai clients are made with `max_retries=0` (a failed call fails at once),
otherwise with the SDK's defaults; the pydantic-ai agent has its defaults but for
`UsageLimits(request_limit=None)`, since its default limit of 50 requests a run would stop a
100-call session.

Printed per agent and length: wall and CPU microseconds per model call (CPU of this process,
all its threads; medians over the rounds), and each way's CPU ratio to the floor (the median
of the rounds' ratios, and their range), then agentbench's replay over the bare hop
(boundary with the store / loopback). The target is boundary with the store <= 1.5x the
floor's CPU. `--quick` replays one 3-call session once per agent, to check the script works
(the tests run it so). No timings are asserted anywhere; machines here are shared and noisy.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
from cpu_clock import recording_process_cpu
from openai import AsyncOpenAI, OpenAI

from agentbench import ToolCall
from agentbench.boundary.server import BoundaryServer
from agentbench.boundary.target import CallableTarget, TargetContext
from agentbench.boundary.wire import Wire
from agentbench.evals.running.boundary_case import run_boundary_case
from agentbench.evals.running.case_trial import CasePlan
from agentbench.replay.cassette import Cassette, RecordMode
from agentbench.replay.tool_policy import ToolPolicies
from agentbench.runtime.openai_model import OpenAIModel
from agentbench.testing import OpenAICompatibleServer
from agentbench.trace import TraceStore

Timing = tuple[float, float]  # (wall seconds, CPU seconds of this process, all its threads)
MODEL = "bench-model"
PROMPT = "You count, one tool call at a time, and say when you are done."
CANNED_URL = "http://canned.invalid/v1"
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "step",
            "description": "Count one step.",
            "parameters": {
                "type": "object",
                "properties": {"n": {"type": "integer"}},
                "required": ["n"],
            },
        },
    }
]


# -- the user's agents ------------------------------------------------------------------------


def step(n: int) -> dict[str, int]:
    """Count one step."""
    return {"n": n + 1}


def _start(turn_input: Any) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": PROMPT}]
    if isinstance(turn_input, str):
        return [*messages, {"role": "user", "content": turn_input}]
    return [*messages, *turn_input]


def _act(messages: list[dict[str, Any]], message: Any) -> bool:
    """Run the tools the model asked for; False when it answered instead."""
    if not message.tool_calls:
        return False
    calls = [c.model_dump() for c in message.tool_calls]
    messages.append({"role": "assistant", "content": None, "tool_calls": calls})
    for call in message.tool_calls:
        result = step(**json.loads(call.function.arguments))
        messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)})
    return True


def sync_session(client: OpenAI, model: str, turn_input: Any) -> str:
    messages = _start(turn_input)
    while True:
        answer = client.chat.completions.create(model=model, messages=messages, tools=TOOLS)
        message = answer.choices[0].message
        if not _act(messages, message):
            return message.content or ""


async def async_session(client: AsyncOpenAI, model: str, turn_input: Any) -> str:
    messages = _start(turn_input)
    while True:
        answer = await client.chat.completions.create(model=model, messages=messages, tools=TOOLS)
        message = answer.choices[0].message
        if not _act(messages, message):
            return message.content or ""


# Built once, as an application builds its client; each turn points a copy of it at the
# turn's base URL (`with_options` shares the HTTP client: httpx2 loads the CA bundle for every
# client it builds, ~40 ms here, which an agent building its client per turn pays in
# production too; `client per turn` below says what that adds).
SYNC_CLIENT = OpenAI(api_key="unset", base_url=CANNED_URL, max_retries=0)
ASYNC_CLIENT = AsyncOpenAI(api_key="unset", base_url=CANNED_URL, max_retries=0)


def sync_agent(turn_input: Any, target: TargetContext) -> str:
    client = SYNC_CLIENT.with_options(base_url=target.base_url, api_key=target.api_key)
    return sync_session(client, target.model, turn_input)


async def async_agent(turn_input: Any, target: TargetContext) -> str:
    client = ASYNC_CLIENT.with_options(base_url=target.base_url, api_key=target.api_key)
    return await async_session(client, target.model, turn_input)


def _pydantic_ai() -> tuple[Callable[..., Any], Callable[..., Any]] | None:
    """The counting agent on pydantic-ai: (boundary function, run on a given openai client),
    or None when pydantic-ai is not installed."""
    try:
        from pydantic_ai import Agent
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider
        from pydantic_ai.usage import UsageLimits
    except ImportError:
        return None
    counter = Agent(instructions=PROMPT, name="counter")
    counter.tool_plain(name="step")(step)
    unlimited = UsageLimits(request_limit=None)

    async def run(client: AsyncOpenAI, model: str, turn_input: Any) -> str:
        chat = OpenAIChatModel(model, provider=OpenAIProvider(openai_client=client))
        result = await counter.run(turn_input, model=chat, usage_limits=unlimited)
        return str(result.output)

    async def pydantic_ai_agent(turn_input: Any, target: TargetContext) -> str:
        client = ASYNC_CLIENT.with_options(base_url=target.base_url, api_key=target.api_key)
        return await run(client, target.model, turn_input)

    return pydantic_ai_agent, run


@dataclass(frozen=True)
class Subject:
    """One agent: the function a suite names, and the same code on a given client."""

    name: str
    function: Callable[..., Any]
    on_client: Callable[[Any, str, Any], Any]  # (client, model, input) -> output
    sync: bool = False

    @functools.cached_property
    def target(self) -> CallableTarget:
        """The suite's agent, as the harness makes it: once, when the suite is loaded."""
        return CallableTarget.of(self.function, where="", model=MODEL)


SUBJECTS: dict[str, Subject] = {
    "sync": Subject("sync", sync_agent, sync_session, sync=True),
    "async": Subject("async", async_agent, async_session),
}
_PYDANTIC_AI = _pydantic_ai()
if _PYDANTIC_AI is not None:
    SUBJECTS["pydantic-ai"] = Subject("pydantic-ai", *_PYDANTIC_AI)


# -- recording --------------------------------------------------------------------------------


def counting(calls: int) -> Callable[[dict[str, Any]], Any]:
    """The stand-in model: `calls - 1` tool calls, one per answer, then the text answer."""

    def answer(request: dict[str, Any]) -> Any:
        done = sum(1 for m in request["messages"] if m.get("role") == "tool")
        if done < calls - 1:
            return ToolCall("step", {"n": done})
        return f"done after {done} steps"

    return answer


def plan(
    subject: Subject, cassette: Path, mode: RecordMode, store: TraceStore | None, **live: Any
) -> CasePlan:
    """The plan `agentbench run` makes for a one-turn case of a suite naming the function."""
    return CasePlan(
        suite="bench",
        case_id=cassette.stem,
        agent=subject.target,
        turns=[prompt(cassette)],
        context=None,
        cassette=cassette,
        record_mode=mode,
        tools=ToolPolicies(),
        store=store.with_labels(eval_id="bench", case_id=cassette.stem, trial=1)
        if store is not None
        else None,
        agent_ref=f"boundary_replay:{subject.function.__name__}",
        **live,
    )


def prompt(cassette: Path) -> str:
    return f"Count, please ({cassette.stem})."


async def record(folder: Path, subject: Subject, calls: int) -> Path:
    cassette = folder / f"{subject.name}-{calls}.yaml"
    with OpenAICompatibleServer(responder=counting(calls), model=MODEL) as server:

        def live() -> OpenAIModel:
            return OpenAIModel(MODEL, base_url=server.base_url, api_key="sk-bench")

        run = await run_boundary_case(
            plan(subject, cassette, RecordMode.ALL, None, live=live, always_live=True)
        )
    if run.result.error is not None or not cassette.is_file():
        raise RuntimeError(f"recording {cassette.name} failed: {run.result.error}")
    return cassette


# -- the ways to replay -----------------------------------------------------------------------


def _clock() -> Timing:
    return time.perf_counter(), time.process_time()


def _since(started: Timing) -> Timing:
    wall, cpu = _clock()
    return wall - started[0], cpu - started[1]


class Canned:
    """The floor's transport: answers each request with the next recorded body, in order."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.served = 0

    def load(self, bodies: list[bytes]) -> None:
        self.bodies, self.served = bodies, 0

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        body = self.bodies[self.served]
        self.served += 1
        return httpx2.Response(200, headers={"content-type": "application/json"}, content=body)


CANNED = Canned()
# The floor's clients: the application's clients as above, given the canned transport.
CANNED_SYNC = OpenAI(
    api_key="unset",
    base_url=CANNED_URL,
    max_retries=0,
    http_client=httpx2.Client(transport=httpx2.MockTransport(CANNED)),
)
CANNED_ASYNC = AsyncOpenAI(
    api_key="unset",
    base_url=CANNED_URL,
    max_retries=0,
    http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(CANNED)),
)


def _done(output: Any) -> None:
    if not str(output).startswith("done"):
        raise RuntimeError(f"the session did not finish as recorded: {output!r}")


async def floor(subject: Subject, bodies: list[bytes], turn_input: str) -> Timing:
    CANNED.load(bodies)
    started = _clock()
    if subject.sync:
        client = CANNED_SYNC.with_options(base_url=CANNED_URL, api_key="unused")
        output = subject.on_client(client, MODEL, turn_input)
    else:
        client_async = CANNED_ASYNC.with_options(base_url=CANNED_URL, api_key="unused")
        output = await subject.on_client(client_async, MODEL, turn_input)
    elapsed = _since(started)
    _done(output)
    if CANNED.served != len(bodies):
        raise RuntimeError(f"the floor served {CANNED.served} of {len(bodies)} answers")
    return elapsed


async def loopback(subject: Subject, bodies: list[bytes], turn_input: str) -> Timing:
    answers = iter(bodies)

    async def answer(wire: Wire, body: dict[str, Any], headers: dict[str, str]) -> Any:
        return 200, "application/json", next(answers)

    target = subject.target
    started = _clock()
    async with BoundaryServer(answer, model=MODEL) as server:
        output = await target.call(turn_input, TargetContext(server.base_url, MODEL))
    elapsed = _since(started)
    _done(output)
    return elapsed


async def boundary(subject: Subject, cassette: Path, store: TraceStore | None) -> Timing:
    started = _clock()
    run = await run_boundary_case(plan(subject, cassette, RecordMode.NONE, store, live=None))
    elapsed = _since(started)
    if not run.replayed or run.drifts or run.result.error is not None:
        raise RuntimeError(f"the replay diverged: {run.result.error or run.drifts[:1]}")
    _done(run.result.output)
    return elapsed


# -- measuring --------------------------------------------------------------------------------

FLOOR, LOOPBACK, BARE, STORED = (
    "floor (canned transport)",
    "loopback (no replay)",
    "boundary, no store",
    "boundary, store",
)


@dataclass
class Figures:
    """Per model call: median wall and CPU seconds of each way, the rounds' CPU ratios to
    the floor and agentbench's replay to the bare hop, and the recording process's CPU."""

    per_call: dict[str, Timing]
    ratios: dict[str, list[float]]
    over_hop: list[float]  # each round's boundary with the store / loopback
    recording: float


def sessions_per_round(calls: int, round_calls: int) -> int:
    """Whole sessions a round replays each way: at least `round_calls` model calls."""
    return max(1, -(-round_calls // calls))


async def measure(
    folder: Path, subject: Subject, calls: int, rounds: tuple[int, int], store: TraceStore
) -> Figures:
    cassette = await record(folder, subject, calls)
    bodies = [i.response_body.encode() for i in Cassette.load(cassette).interactions]
    if len(bodies) != calls:
        raise RuntimeError(f"recorded {len(bodies)} model calls, not {calls}")
    turn_input = prompt(cassette)
    ways: dict[str, Callable[[], Awaitable[Timing]]] = {
        FLOOR: lambda: floor(subject, bodies, turn_input),
        LOOPBACK: lambda: loopback(subject, bodies, turn_input),
        BARE: lambda: boundary(subject, cassette, None),
        STORED: lambda: boundary(subject, cassette, store),
    }
    for make in ways.values():  # warm-up: imports, the cassette cache, first-call caches
        await make()
    store.flush()
    # A round replays each way's session enough times to take a while (one 10-call session
    # is ~50 ms, well within what a busy machine's noise moves), every way in turn.
    repeat, sessions = rounds[0], sessions_per_round(calls, rounds[1])
    timings: dict[str, list[Timing]] = {name: [] for name in ways}
    recording_before = recording_process_cpu(store)
    for _ in range(repeat):
        for name, make in ways.items():
            spent = [await make() for _ in range(sessions)]
            timings[name].append((sum(w for w, _ in spent), sum(c for _, c in spent)))
    store.flush()  # what the rounds' runs cost the recording process, all of it
    calls *= sessions  # per model call from here on
    recording = (recording_process_cpu(store) - recording_before) / repeat / calls
    floors = [cpu for _, cpu in timings[FLOOR]]
    return Figures(
        per_call={
            name: (
                statistics.median(w for w, _ in values) / calls,
                statistics.median(c for _, c in values) / calls,
            )
            for name, values in timings.items()
        },
        ratios={
            name: [cpu / low for (_, cpu), low in zip(timings[name], floors, strict=True)]
            for name in (LOOPBACK, BARE, STORED)
        },
        over_hop=[
            cpu / hop for (_, cpu), (_, hop) in zip(timings[STORED], timings[LOOPBACK], strict=True)
        ],
        recording=recording,
    )


def client_per_turn() -> float:
    """CPU seconds an agent spends building `OpenAI(base_url=...)` for a turn, beyond the
    `with_options` copy these agents make (median of five)."""
    spent = []
    for _ in range(5):
        started = time.process_time()
        OpenAI(api_key="unset", base_url=CANNED_URL, max_retries=0).close()
        built = time.process_time() - started
        started = time.process_time()
        SYNC_CLIENT.with_options(base_url=CANNED_URL, api_key="unset")
        spent.append(built - (time.process_time() - started))
    return statistics.median(spent)


def report(
    subject: Subject, calls: int, rounds: tuple[int, int], figures: Figures, per_turn: float
) -> None:
    repeat, sessions = rounds[0], sessions_per_round(calls, rounds[1])
    print(
        f"\n{subject.name} agent, {calls} model calls a session, {repeat} "
        f"round{'s' if repeat > 1 else ''} of "
        f"{sessions} session{'s' if sessions > 1 else ''} each way"
    )
    print(f"  {'µs per model call':<28} {'wall':>9} {'cpu':>9}   cpu / floor")
    for name, (wall, cpu) in figures.per_call.items():
        ratios = figures.ratios.get(name)
        spread = ""
        if ratios:
            middle = statistics.median(ratios)
            spread = f"   {middle:.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"
        print(f"  {name:<28} {wall * 1e6:9.0f} {cpu * 1e6:9.0f}{spread}")
    print(
        f"  {'recording process':<28} {'':>9} {figures.recording * 1e6:9.0f}"
        "   (the child that stores the runs, on another core; not in the ratios)"
    )
    stored = statistics.median(figures.ratios[STORED])
    verdict = "within" if stored <= 1.5 else "over"
    print(f"  boundary with the store: {stored:.2f}x the floor's CPU, {verdict} the 1.5x target")
    print(
        f"  agentbench's replay over the bare hop (boundary, store / loopback): "
        f"{statistics.median(figures.over_hop):.2f}x"
    )
    print(
        f"  (an agent building OpenAI(base_url=target.base_url) each turn pays "
        f"+{per_turn / calls * 1e6:.0f} µs a call more: a client given no HTTP client loads "
        "the CA bundle, in production too)"
    )


def default_store(path: Path) -> TraceStore:
    """The store `agentbench run` opens: runs recorded by a process of their own when there
    is a second core for it (as `agentbench.commands.run` decides)."""
    usable = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    cores = len(usable) if usable is not None else os.cpu_count() or 1
    store = TraceStore(path, recording_process=cores > 1)
    store.settle()
    store.start_recording()  # its start, once per store, is no model call's cost
    return store


def agent_names(text: str) -> list[str]:
    """The agents `--agents` names; ValueError naming one this script does not have."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    for name in names:
        if name not in SUBJECTS:
            known = ", ".join(SUBJECTS)
            raise ValueError(f"--agents: no agent named {name!r} here (known: {known})")
    return names


async def main(options: argparse.Namespace) -> None:
    names = agent_names(options.agents)
    if "pydantic-ai" not in SUBJECTS:
        print("pydantic-ai is not installed: its agent is left out")
    per_turn = client_per_turn()
    with tempfile.TemporaryDirectory(prefix="agentbench-boundary-") as tmp:
        folder = Path(tmp)
        # A cache of parsed cassettes of this run's own, so the user's is left alone.
        os.environ.setdefault("AGENTBENCH_CACHE_DIR", str(folder / "cache"))
        store = default_store(folder / "runs.duckdb")
        try:
            for calls in [int(part) for part in options.calls.split(",")]:
                for name in names:
                    subject = SUBJECTS[name]
                    rounds = (options.repeat, options.round_calls)
                    figures = await measure(folder, subject, calls, rounds, store)
                    report(subject, calls, rounds, figures, per_turn)
        finally:
            store.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", default="10,100", help="comma-separated session lengths")
    parser.add_argument("--repeat", type=int, default=7, help="interleaved rounds")
    parser.add_argument(
        "--agents", default=",".join(SUBJECTS), help=f"comma-separated: {', '.join(SUBJECTS)}"
    )
    parser.add_argument(
        "--round-calls", type=int, default=100, help="model calls a round replays each way"
    )
    parser.add_argument("--quick", action="store_true", help="one 3-call session, one round")
    parsed = parser.parse_args()
    try:
        agent_names(parsed.agents)
    except ValueError as exc:
        parser.error(str(exc))
    if parsed.quick:
        parsed.calls, parsed.repeat, parsed.round_calls = "3", 1, 1
    asyncio.run(main(parsed))
