"""Serving overhead and robustness: an agent behind `agentbench serve` against the same agent
in-process, and slow clients against the server.

    python benchmarks/serve_load.py [--clients 1,8,64] [--requests 400] [--slowloris 300]
    python benchmarks/serve_load.py --clients 50 --requests 2000 --slowloris 300   # issue 34

The agent has a scripted model (a function of the request: look the order up, then answer)
and one tool, so what is measured is the serving path, not a model. For each number of
concurrent clients, REQUESTS requests are made:

* in-process — `Runner.run(agent, question, store=TraceStore(...))` from that many asyncio
  tasks, the store recording every run as the server's does;
* served — the openai SDK (`AsyncOpenAI`, one client per caller, that many tasks taking
  turns between two callers' keys) against `agentbench serve --keys FILE` started as users
  start it, in its own process on 127.0.0.1 (`--concurrency` set to the number of clients,
  so no request waits for a slot: the overhead, not the queue).

Agent settings: the runtime's defaults (a name, instructions, the tool and the scripted
model), the same agent in-process and served.

Printed per row: requests/s, p50 and p99 latency in ms, and served/in-process ratios; for the
served side also the requests that failed (an exception or a wrong answer) and how many runs
the store holds afterwards, each under the caller that made it. Both sides share this
machine's two cores (the client's SDK work competes with the server), so the ratio is an
upper bound on the serving overhead. `--slowloris N` then opens N connections that send
half a request's headers and nothing more, while a client keeps asking: printed are how long
the server held them (its --header-timeout, 2 s here) and the client's p99 meanwhile. No
timings are asserted anywhere.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import openai
import orjson

from agentbench import Agent, Runner, ToolCall, tool
from agentbench.runtime.models import FunctionModel
from agentbench.trace import TraceStore

HERE = Path(__file__).resolve()


@tool(effect="read_only")
def order_status(order_id: str) -> dict[str, Any]:
    """The status of an order."""
    return {"order_id": order_id, "status": "delivered", "days_ago": 12}


def _answer(request: dict[str, Any]) -> Any:
    last = request["messages"][-1]
    if last["role"] == "tool":
        return f"Order A17 is {orjson.loads(last['content'])['status']}."
    return ToolCall("order_status", {"order_id": "A17"})


AGENT = Agent(
    name="desk",
    instructions="You answer questions about orders. Look the order up first.",
    tools=[order_status],
    model=FunctionModel(_answer, name="scripted"),
)
QUESTION = "Where is my order A17?"
# The served side's callers (a key file): requests take turns between them.
CALLERS = {"alice": "alice-benchmark-key-0123456789", "bob": "bob-benchmark-key-9876543210"}
WARM_BY_CALLER = {"alice": 10, "bob": 10}  # the 20 warm-up requests, stored too


def _percentiles(latencies: list[float]) -> tuple[float, float]:
    ordered = sorted(latencies)
    return (
        statistics.median(ordered) * 1000,
        ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000,
    )


async def _load(clients: int, requests: int, one: Any) -> tuple[float, float, float, int]:
    """Requests/s, p50 and p99 ms, and failures, of `requests` calls of `one(i)` from
    `clients` tasks (a call fails by raising)."""
    latencies: list[float] = []
    failures = 0
    remaining = iter(range(requests))

    async def client() -> None:
        nonlocal failures
        for index in remaining:
            started = time.perf_counter()
            try:
                await one(index)
            except Exception:
                failures += 1
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    elapsed = time.perf_counter() - started
    return (requests / elapsed, *_percentiles(latencies), failures)


async def in_process(clients: int, requests: int, db: Path) -> tuple[float, float, float]:
    store = TraceStore(db)
    store.settle()

    async def one(index: int) -> None:
        result = await Runner.run(AGENT, QUESTION, store=store)
        if not result.completed:
            raise RuntimeError(result.error)

    figures = await _load(clients, requests, one)
    store.close()
    return figures[:3]


def serve_command(clients: int, db: Path, keys: Path | None = None, *extra: str) -> list[str]:
    """`agentbench serve` of this file's agent, as users start it: any free port, the store
    at `db`, `clients` runs at once and a queue no request waits in for a slot."""
    return [
        sys.executable,
        "-m",
        "agentbench",
        "serve",
        f"{HERE}:AGENT",
        "--port",
        "0",
        "--db",
        str(db),
        *(["--keys", str(keys)] if keys is not None else []),
        "--concurrency",
        str(clients),
        "--queue",
        "10000",
        *extra,
    ]


def _start_server(clients: int, db: Path, keys: Path, *extra: str) -> tuple[Any, str]:
    process = subprocess.Popen(
        serve_command(clients, db, keys, *extra),
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    assert process.stderr is not None
    for line in process.stderr:
        found = re.search(r"on (http://127\.0\.0\.1:\d+/v1)", line)
        if found:
            return process, found.group(1)
    raise RuntimeError("agentbench serve did not start")


def _stop(process: Any) -> None:
    process.terminate()
    process.wait(60)
    if process.stderr is not None:
        process.stderr.close()


def _key_file(folder: Path) -> Path:
    keys = folder / "serve-keys"
    keys.write_text("".join(f"{name}: {key}\n" for name, key in CALLERS.items()))
    return keys


def _stored(db: Path) -> dict[str, int]:
    """Root runs in the store, by caller."""
    rows = (
        TraceStore(db)
        .sql("SELECT caller, count(*) FROM runs WHERE parent_run_id IS NULL GROUP BY caller")
        .rows
    )
    return {str(caller): count for caller, count in rows}


async def served(
    clients: int, requests: int, folder: Path
) -> tuple[float, float, float, int, dict[str, int]]:
    db = folder / f"served-{clients}.duckdb"
    process, url = _start_server(clients, db, _key_file(folder))
    callers = [
        openai.AsyncOpenAI(base_url=url, api_key=key, max_retries=0) for key in CALLERS.values()
    ]
    messages = [{"role": "user", "content": QUESTION}]

    async def one(index: int) -> None:
        answer = await callers[index % len(callers)].chat.completions.create(
            model="desk", messages=messages
        )
        if answer.choices[0].message.content != "Order A17 is delivered.":
            raise RuntimeError(f"wrong answer: {answer.choices[0].message.content!r}")

    try:
        await _load(clients, min(20, requests), one)  # warm: connections, imports
        figures = await _load(clients, requests, one)
    finally:
        for caller in callers:
            await caller.close()
        _stop(process)
    stored = {name: count - WARM_BY_CALLER.get(name, 0) for name, count in _stored(db).items()}
    return (*figures, stored)


async def slowloris(count: int, folder: Path) -> tuple[float, float, float, int]:
    """`count` connections that send half a request's headers, against a server with a 2 s
    header timeout, while one client keeps asking: the longest a connection was held, the
    client's p99 and requests/s meanwhile, and its failures."""
    process, url = _start_server(
        4, folder / "slowloris.duckdb", _key_file(folder), "--header-timeout", "2"
    )
    host, port = url.removeprefix("http://").removesuffix("/v1").split(":")
    client = openai.AsyncOpenAI(base_url=url, api_key=CALLERS["alice"], max_retries=0)
    messages = [{"role": "user", "content": QUESTION}]
    held: list[float] = []

    async def slow_one() -> None:
        reader, writer = await asyncio.open_connection(host, int(port))
        opened = time.perf_counter()
        writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\nx-slow: ")
        await writer.drain()
        await reader.read()  # until the server closes it
        held.append(time.perf_counter() - opened)
        writer.close()

    async def one(index: int) -> None:
        await client.chat.completions.create(model="desk", messages=messages)

    try:
        slow = asyncio.gather(*(slow_one() for _ in range(count)))
        rate, _, p99, failures = await _load(1, 200, one)
        await asyncio.wait_for(slow, 120)
    finally:
        await client.close()
        _stop(process)
    return max(held), p99, rate, failures


async def main(clients_list: list[int], requests: int, slow: int) -> None:
    print(f"serving overhead: {requests} requests per row, scripted model, store on, 2 keys")
    print(
        "clients   in-process req/s  p50 ms  p99 ms |  served req/s  p50 ms  p99 ms  errors"
        "  stored |  req/s ratio  p50 ratio"
    )
    with tempfile.TemporaryDirectory(prefix="agentbench-serve-") as tmp:
        await in_process(1, 20, Path(tmp) / "warm.duckdb")
        for clients in clients_list:
            local = await in_process(clients, requests, Path(tmp) / f"local-{clients}.duckdb")
            remote = await served(clients, requests, Path(tmp))
            stored = sum(remote[4].values())
            print(
                f"{clients:7d}   {local[0]:16.0f} {local[1]:7.2f} {local[2]:7.2f} |"
                f" {remote[0]:12.0f} {remote[1]:7.2f} {remote[2]:7.2f} {remote[3]:7d}"
                f" {stored:7d} | {local[0] / remote[0]:11.2f}x {remote[1] / local[1]:9.2f}x"
            )
            print(f"          stored by caller: {remote[4]}")
        if slow:
            longest, p99, rate, failures = await slowloris(slow, Path(tmp))
            print(
                f"slowloris: {slow} half-sent requests held at most {longest:.1f} s "
                f"(--header-timeout 2); meanwhile one client: {rate:.0f} req/s, p99 "
                f"{p99:.1f} ms, {failures} errors"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", default="1,8,64", help="comma-separated client counts")
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument(
        "--slowloris", type=int, default=0, help="half-sent requests to open (0: none)"
    )
    options = parser.parse_args()
    asyncio.run(
        main([int(n) for n in options.clients.split(",")], options.requests, options.slowloris)
    )
