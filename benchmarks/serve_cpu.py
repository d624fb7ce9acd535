"""`agentbench serve` against a 30-line FastAPI app serving the same agent: server CPU per
request, and requests/s as clients are added.

    python benchmarks/serve_cpu.py [--clients 1,2,4,8] [--requests 600] [--repeat 2]

Both servers run in their own process, started as users start them, on 127.0.0.1:

* the floor — `FASTAPI_APP` below under uvicorn (`python -m uvicorn`, its defaults: one
  worker, the access log on): an OpenAI-style `/v1/chat/completions` that runs the agent
  with `Runner.run` and answers, recording nothing;
* `agentbench serve benchmarks/serve_load.py:AGENT --db FILE` — the store on (every run
  recorded, as served runs always are), `--concurrency` the number of clients, no keys.

The agent: a scripted model (look the order up, then answer) and one tool, the runtime's
defaults otherwise: what is measured is serving and recording, not a model. The client is a
small keep-alive HTTP/1.1 client on asyncio (one connection per client), far cheaper than
the openai SDK, so that it takes as little as possible of the two cores from the server.

Printed per number of clients: requests/s and server CPU milliseconds a request (the
server's process and any process it started — a recording process — read from
`/proc/PID/stat` before and after), for each server, and the ratios serve / FastAPI. The
best of REPEAT rounds is kept. Requests/s scale with clients when they rise up to the cores
(2 here). No timings are asserted anywhere; machines here are shared and noisy.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import orjson
from counts import counts
from cpu_clock import process_cpu_s
from serve_load import QUESTION, serve_command  # `serve_load.py`'s agent, served alike

HERE = Path(__file__).resolve()
ANSWER = "Order A17 is delivered."


# The floor: what a team writes to put an agent behind an HTTP endpoint with FastAPI.
FASTAPI_APP = """
import time
import uuid

from fastapi import FastAPI

from agentbench import Runner
from serve_load import AGENT

app = FastAPI()


@app.post("/v1/chat/completions")
async def chat(body: dict) -> dict:
    result = await Runner.run(AGENT, body["messages"][-1]["content"])
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", AGENT.name),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": result.output},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": result.usage.input_tokens,
            "completion_tokens": result.usage.output_tokens,
            "total_tokens": result.usage.input_tokens + result.usage.output_tokens,
        },
    }
"""


def _started(command: list[str], cwd: Path, pattern: str) -> tuple[subprocess.Popen[str], int]:
    """Start a server and wait for the line saying where it listens: (process, port)."""
    # The floor's app imports this file's agent; `agentbench serve` is given its path.
    path = os.pathsep.join(filter(None, [str(HERE.parent), os.environ.get("PYTHONPATH")]))
    process = subprocess.Popen(
        command,
        cwd=cwd,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONPATH": path},
    )
    assert process.stderr is not None
    for line in process.stderr:
        found = re.search(pattern, line)
        if found:
            # The access log goes on: drain it, so the server never blocks on a full pipe.
            drain = threading.Thread(target=_drain, args=(process.stderr,), daemon=True)
            drain.start()
            _DRAINS[process.pid] = drain
            return process, int(found.group(1))
    process.kill()
    process.wait()
    process.stderr.close()
    raise RuntimeError(f"{command[2:4]} did not start")


_DRAINS: dict[int, threading.Thread] = {}


def _drain(stream: Any) -> None:
    with stream:
        for _ in stream:
            pass


def _stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    process.wait(60)
    drain = _DRAINS.pop(process.pid, None)
    if drain is not None:
        drain.join(10)


def start_fastapi(folder: Path) -> tuple[subprocess.Popen[str], int]:
    (folder / "fastapi_floor.py").write_text(textwrap.dedent(FASTAPI_APP))
    return _started(
        [sys.executable, "-m", "uvicorn", "fastapi_floor:app", "--port", "0"],
        folder,
        r"Uvicorn running on http://127\.0\.0\.1:(\d+)",
    )


def start_serve(folder: Path, clients: int) -> tuple[subprocess.Popen[str], int]:
    db = folder / f"served-{clients}-{time.monotonic_ns()}.duckdb"
    return _started(serve_command(clients, db), folder, r"on http://127\.0\.0\.1:(\d+)/v1")


REQUEST_BODY = orjson.dumps({"model": "desk", "messages": [{"role": "user", "content": QUESTION}]})


async def _client(port: int, count: int) -> int:
    """Make `count` requests on one kept-alive connection; the number answered right."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n"
        f"content-type: application/json\r\ncontent-length: {len(REQUEST_BODY)}\r\n\r\n"
    ).encode()
    right = 0
    try:
        for _ in range(count):
            writer.write(head + REQUEST_BODY)
            headers = await reader.readuntil(b"\r\n\r\n")
            length = int(re.search(rb"(?i)content-length: (\d+)", headers).group(1))  # type: ignore[union-attr]
            body = orjson.loads(await reader.readexactly(length))
            right += body["choices"][0]["message"]["content"] == ANSWER
    finally:
        writer.close()
    return right


async def measure(port: int, pid: int, clients: int, requests: int) -> tuple[float, float]:
    """Requests/s and server CPU ms a request, `requests` split between `clients`."""
    await asyncio.gather(*(_client(port, 5) for _ in range(clients)))  # warm
    each = requests // clients
    cpu, started = process_cpu_s(pid, children=True), time.perf_counter()
    answered = await asyncio.gather(*(_client(port, each) for _ in range(clients)))
    elapsed, used = time.perf_counter() - started, process_cpu_s(pid, children=True) - cpu
    if sum(answered) != each * clients:
        raise RuntimeError(f"{each * clients - sum(answered)} requests answered wrong")
    return each * clients / elapsed, used / (each * clients) * 1000


async def main(clients_list: list[int], requests: int, repeat: int) -> None:
    print(f"serving CPU: {requests} requests a row, scripted model; best of {repeat}")
    print(
        "clients |  FastAPI req/s  cpu ms/req |  serve req/s  cpu ms/req |  cpu ratio  req/s ratio"
    )
    with tempfile.TemporaryDirectory(prefix="agentbench-serve-cpu-") as tmp:
        folder = Path(tmp)
        for clients in clients_list:
            best: dict[str, tuple[float, float]] = {}
            for _ in range(repeat):
                for name, start in (
                    ("fastapi", lambda: start_fastapi(folder)),
                    ("serve", lambda clients=clients: start_serve(folder, clients)),
                ):
                    process, port = start()
                    try:
                        figures = await measure(port, process.pid, clients, requests)
                    finally:
                        _stop(process)
                    if name not in best or figures[1] < best[name][1]:
                        best[name] = figures
            floor, served = best["fastapi"], best["serve"]
            print(
                f"{clients:7d} | {floor[0]:14.0f} {floor[1]:11.2f} | {served[0]:12.0f}"
                f" {served[1]:11.2f} | {served[1] / floor[1]:9.2f}x {served[0] / floor[0]:11.2f}x"
            )
    print("(target: cpu ratio <= 1.5x; req/s rising with clients up to the cores)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--clients", type=counts, default="1,2,4,8", help="comma-separated client counts"
    )
    parser.add_argument("--requests", type=int, default=600)
    parser.add_argument("--repeat", type=int, default=2)
    options = parser.parse_args()
    asyncio.run(main(options.clients, options.requests, options.repeat))
