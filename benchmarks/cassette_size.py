"""Cassette bytes and load time by session length: linear, or quadratic?

    python benchmarks/cassette_size.py [--steps 10,100,1000] [--quick]

An agent with the runtime's default settings (`Agent(name=..., tools=[lookup])`: no state
summary) but for `Limits(max_iterations=steps + 1, timeout_s=None)`, raised so a long session
runs to its end, is recorded through the real record path (`record_session`: the recording
model, the cassette writer and its redactor) for sessions of STEPS tool-calling steps, each
step one `lookup` call and its result, then the final answer. Printed per length:

* bytes per step of the cassette file, and its ratio to the floor: the bytes of what is new
  in each step (the step's model answer and tool message as JSON), which any recording must
  keep at least once;
* the time of its first load (`Cassette.load`: parsed, as on a machine that never saw it;
  the parsed-cassette cache is a folder of the run's own), and of a replay after it
  (`Replayer(...).replay`, strict: the cache warm, as on any later run);
* whether vcrpy itself reads it (`vcr.persisters.filesystem.FilesystemPersister`).

Targets (issue 39): <= 4 KB a step at 1,000 steps, flat in the session's length, and a
1,000-step cassette loading in <= 1 s. `--quick` records 5 steps, to check the script works.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentbench import Agent, Limits, ScriptedModel, ToolCall, tool  # noqa: E402
from agentbench.replay.cassette import Cassette  # noqa: E402
from agentbench.replay.replayer import Replayer  # noqa: E402
from agentbench.replay.session import record_session  # noqa: E402


@tool(effect="read_only")
def lookup(item: int) -> dict[str, Any]:
    """Look an item up in the catalogue."""
    return {"item": item, "name": f"part {item}", "in_stock": item % 17, "bin": f"R{item % 9}"}


def agent(steps: int) -> Agent:
    # Each call asks for another item, so no repeat brake would fire; the step limit is raised.
    limits = Limits(max_iterations=steps + 1, timeout_s=None)
    return Agent(name="catalogue", tools=[lookup], limits=limits)


def script(steps: int) -> list[Any]:
    return [ToolCall("lookup", {"item": i}) for i in range(steps)] + ["all looked up"]


def floor_bytes(steps: int) -> int:
    """What is new in each step, as JSON: the answer that asks and the result sent back."""
    total = 0
    for i in range(steps):
        call = {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": f"call_{i}",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": orjson.dumps({"item": i}).decode()},
                }
            ],
        }
        result = {"role": "tool", "tool_call_id": f"call_{i}",
                  "content": orjson.dumps(lookup.fn(i)).decode()}  # fmt: skip
        total += len(orjson.dumps(call)) + len(orjson.dumps(result))
    return total


def vcrpy_reads(path: Path) -> bool:
    from vcr.persisters.filesystem import FilesystemPersister
    from vcr.serializers import yamlserializer

    loaded = FilesystemPersister.load_cassette(str(path), yamlserializer)
    requests, responses = loaded[0], loaded[1]  # (and the metadata, in the vcrpy here)
    return len(requests) == len(responses) > 0


async def measure(steps: int, folder: Path) -> None:
    path = folder / f"s{steps}.yaml"
    model = ScriptedModel(script(steps))
    await record_session(agent(steps), "look everything up", model=model, path=path)
    size = path.stat().st_size
    started = time.perf_counter()
    Cassette.load(path)  # the first load of this text: parsed (then kept in the cache)
    load_s = time.perf_counter() - started
    started = time.perf_counter()
    report = await Replayer(agent(steps), strict=True).replay(path)
    replay_s = time.perf_counter() - started
    assert not report.diverged, report.render()
    floor = floor_bytes(steps)
    print(
        f"{steps:>6} steps  {size / steps:8,.0f} B/step  {size / floor:5.1f}x floor  "
        f"file {size / 1e6:7.2f} MB  load {load_s:6.2f} s  replay {replay_s:6.2f} s "
        f"vcrpy reads it: {'yes' if vcrpy_reads(path) else 'no'}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", default="10,100,1000")
    parser.add_argument("--quick", action="store_true")
    options = parser.parse_args()
    lengths = [5] if options.quick else [int(s) for s in options.steps.split(",")]
    with tempfile.TemporaryDirectory() as folder:
        os.environ["AGENTBENCH_CACHE_DIR"] = str(Path(folder) / "cache")
        for steps in lengths:
            asyncio.run(measure(steps, Path(folder)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
