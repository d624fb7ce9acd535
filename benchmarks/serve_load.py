"""Serving overhead: an agent behind `agentbench serve` against the same agent in-process.

    python benchmarks/serve_load.py [--clients 1,8,64] [--requests 400]

The agent has a scripted model (a function of the request: look the order up, then answer)
and one tool, so what is measured is the serving path, not a model. For each number of
concurrent clients, REQUESTS requests are made:

* in-process — `Runner.run(agent, question, store=TraceStore(...))` from that many asyncio
  tasks, the store recording every run as the server's does;
* served — the openai SDK (`AsyncOpenAI`, one client, that many tasks) against `agentbench
  serve` started as users start it, in its own process on 127.0.0.1 (`--concurrency` set to
  the number of clients, so no request waits for a slot: the overhead, not the queue).

Printed per row: requests/s, p50 and p99 latency in ms, and served/in-process ratios. Both
sides share this machine's two cores (the client's SDK work competes with the server), so the
ratio is an upper bound on the serving overhead. No timings are asserted anywhere.
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


def _percentiles(latencies: list[float]) -> tuple[float, float]:
    ordered = sorted(latencies)
    return (
        statistics.median(ordered) * 1000,
        ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000,
    )


async def _load(clients: int, requests: int, one: Any) -> tuple[float, float, float]:
    """Requests/s, p50 and p99 ms of `requests` calls of `one()` from `clients` tasks."""
    latencies: list[float] = []
    remaining = iter(range(requests))

    async def client() -> None:
        for _ in remaining:
            started = time.perf_counter()
            await one()
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    elapsed = time.perf_counter() - started
    return (requests / elapsed, *_percentiles(latencies))


async def in_process(clients: int, requests: int, db: Path) -> tuple[float, float, float]:
    store = TraceStore(db)
    store.settle()

    async def one() -> None:
        result = await Runner.run(AGENT, QUESTION, store=store)
        assert result.completed, result.error

    figures = await _load(clients, requests, one)
    store.close()
    return figures


def _start_server(clients: int, db: Path) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agentbench",
            "serve",
            f"{HERE}:AGENT",
            "--port",
            "0",
            "--db",
            str(db),
            "--concurrency",
            str(clients),
            "--queue",
            "10000",
        ],
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


async def served(clients: int, requests: int, db: Path) -> tuple[float, float, float]:
    process, url = _start_server(clients, db)
    client = openai.AsyncOpenAI(base_url=url, api_key="unused", max_retries=0)
    messages = [{"role": "user", "content": QUESTION}]

    async def one() -> None:
        answer = await client.chat.completions.create(model="desk", messages=messages)
        assert answer.choices[0].message.content == "Order A17 is delivered."

    try:
        await _load(clients, min(20, requests), one)  # warm: connections, imports
        return await _load(clients, requests, one)
    finally:
        await client.close()
        process.terminate()
        process.wait(30)
        if process.stderr is not None:
            process.stderr.close()


async def main(clients_list: list[int], requests: int) -> None:
    print(f"serving overhead: {requests} requests per row, scripted model, store on")
    print(
        "clients   in-process req/s  p50 ms  p99 ms |  served req/s  p50 ms  p99 ms |"
        "  req/s ratio  p50 ratio"
    )
    with tempfile.TemporaryDirectory(prefix="agentbench-serve-") as tmp:
        await in_process(1, 20, Path(tmp) / "warm.duckdb")
        for clients in clients_list:
            local = await in_process(clients, requests, Path(tmp) / f"local-{clients}.duckdb")
            remote = await served(clients, requests, Path(tmp) / f"served-{clients}.duckdb")
            print(
                f"{clients:7d}   {local[0]:16.0f} {local[1]:7.2f} {local[2]:7.2f} |"
                f" {remote[0]:12.0f} {remote[1]:7.2f} {remote[2]:7.2f} |"
                f" {local[0] / remote[0]:11.2f}x {remote[1] / local[1]:9.2f}x"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", default="1,8,64", help="comma-separated client counts")
    parser.add_argument("--requests", type=int, default=400)
    options = parser.parse_args()
    asyncio.run(main([int(n) for n in options.clients.split(",")], options.requests))
