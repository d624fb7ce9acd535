"""What `agentbench proxy --replay` adds per model call, against a minimal ASGI echo server.

    python benchmarks/proxy.py [--calls 2000] [--rounds 5] [--load-calls 6000]
                               [--connections 8] [--stream] [--quick]

A cassette of distinct chat-completions calls (a system prompt, a tool, one user question
each; a `chat.completion` answer of ~0.5 KB, or with `--stream` its event stream of 21
`chat.completion.chunk` events and `[DONE]`) is written as JSON, then two servers are
started, each in its own process, each on 127.0.0.1:

* floor — a minimal ASGI app on uvicorn (its defaults: uvloop and httptools when installed)
  that reads the request body and answers a recorded answer's bytes (a stream's events in
  one body, the cheapest way to send them; the proxy frames each as an HTTP chunk): an HTTP
  server and nothing else;
* proxy — `agentbench proxy --replay CASSETTE`, run as a user runs it: each request
  normalized, matched by content among the recorded calls, parsed and rendered back.

Latency: one client in this process (`http.client`, one kept-alive connection) sends the calls
one at a time, `--calls` per way in each of `--rounds` interleaved rounds; printed are the p50
and p99 per call (medians over the rounds) and the proxy's p50 overhead over the floor's (the
target: <= 1 ms). Throughput: `--connections` kept-alive connections from an asyncio client in
this process send `--load-calls` calls as fast as each server answers; the server is one
process on one event loop, so one core; printed are calls per second of wall time and calls per
CPU-second of the server process (its user + system time from /proc, so the client's share of
the machine's two cores does not count; "too short" under 0.2 s of it, as /proc counts in 10 ms
ticks: raise --load-calls), and their ratios to the floor's (the target: >= 1,000 replayed
calls/s). Every answer is checked (status 200, the proxy's answer is the one recorded
for that question). `--quick` is a 20-call run to check the script works (the tests run it).
No timings are asserted anywhere; machines here are shared and noisy.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

from agentbench.replay.cassette import Cassette, Interaction
from agentbench.runtime.completions import parse_completion, parse_stream, stream_chunks
from agentbench.runtime.models import ChatResponse

PATH = "/v1/chat/completions"
SYSTEM = "You answer questions about orders. Look the order up first; be brief and exact."
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "order_status",
            "description": "The status of an order.",
            "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}},
        },
    }
]


def request(index: int, stream: bool = False) -> dict[str, object]:
    return {
        **({"stream": True} if stream else {}),
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Where is my order A{index:06d}?"},
        ],
        "tools": TOOLS,
    }


def answer(index: int) -> dict[str, object]:
    return {
        "id": f"chatcmpl-bench{index:06d}",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "gpt-4o-mini",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": f"Order A{index:06d} shipped on Monday and arrives on Thursday; "
                    "the carrier's tracking page has the details.",
                },
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 71, "completion_tokens": 24, "total_tokens": 95},
    }


def recorded(index: int, stream: bool) -> ChatResponse:
    """The answer to call `index` as a live endpoint's is kept: its body, or its chunks."""
    response = parse_completion(answer(index))
    if not stream:
        return response
    return parse_stream(stream_chunks(response, "gpt-4o-mini", include_usage=False))


def write_cassette(path: Path, calls: int, stream: bool) -> bytes:
    """The cassette of `calls` calls; returns the first answer's bytes, as the proxy sends it."""
    interactions = [Interaction.of(request(i), recorded(i, stream)) for i in range(calls)]
    Cassette(interactions).save(path)
    return interactions[0].response_body.encode()


# -- the floor: a minimal ASGI app --------------------------------------------------------------
def serve_floor(body_file: str) -> None:
    """Run the floor server (in its own process): print its port, serve until SIGTERM."""
    import uvicorn

    body = Path(body_file).read_bytes()
    kind = b"text/event-stream" if body.startswith(b"data:") else b"application/json"
    headers = [(b"content-type", kind), (b"content-length", b"%d" % len(body))]

    async def app(scope: dict, receive, send) -> None:  # type: ignore[no-untyped-def]
        if scope["type"] != "http":
            return
        more = True
        while more:  # the whole request body, as any server reads it
            message = await receive()
            more = message.get("more_body", False)
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(2048)
    print(f"floor: listening on http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])


# -- servers as processes -----------------------------------------------------------------------
class Server:
    """A server process; `port` read from the line it prints when it listens."""

    def __init__(self, name: str, command: list[str]) -> None:
        self.name = name
        # A cassette of thousands of calls is past the default bound on a cassette file's size.
        env = {**os.environ, "AGENTBENCH_MAX_FILE_MB": "1024"}
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        line = self.process.stdout.readline() if self.process.stdout else ""
        if "listening on http://127.0.0.1:" not in line:
            self.process.kill()
            _, err = self.process.communicate()
            raise RuntimeError(f"{name} did not start: {line}{err}")
        self.port = int(line.split("http://127.0.0.1:", 1)[1].split()[0].split("/")[0])

    def cpu_s(self) -> float:
        """The process's user + system CPU time so far."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> str:
        self.process.send_signal(signal.SIGTERM)
        out, _ = self.process.communicate(timeout=60)
        return out


# -- latency: one call at a time ----------------------------------------------------------------
def latencies(port: int, bodies: list[bytes], check: bool) -> list[float]:
    connection = http.client.HTTPConnection("127.0.0.1", port)
    headers = {"content-type": "application/json", "authorization": "Bearer bench"}
    taken = []
    for body in bodies:
        started = time.perf_counter()
        connection.request("POST", PATH, body, headers)
        reply = connection.getresponse()
        data = reply.read()
        taken.append(time.perf_counter() - started)
        if reply.status != 200:
            raise RuntimeError(f"HTTP {reply.status}: {data[:300]!r}")
        if check and orjson.loads(body)["messages"][1]["content"][18:25] not in data.decode():
            raise RuntimeError(f"a wrong answer: {data[:300]!r}")
    connection.close()
    return taken


# -- throughput: many connections at once -------------------------------------------------------
async def load(port: int, bodies: list[bytes], connections: int) -> float:
    """Wall seconds for every body to be answered over `connections` kept-alive connections."""
    pending = iter(bodies)

    async def connection() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for body in pending:
            writer.write(
                b"POST %s HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (PATH.encode(), len(body), body)
            )
            head = await reader.readuntil(b"\r\n\r\n")
            if not head.startswith(b"HTTP/1.1 200"):
                raise RuntimeError(head.decode(errors="replace"))
            if b"transfer-encoding: chunked" in head.lower():
                while size := int(await reader.readuntil(b"\r\n"), 16):
                    await reader.readexactly(size + 2)
                await reader.readexactly(2)
                continue
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            await reader.readexactly(length)
        writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(connection() for _ in range(connections)))
    return time.perf_counter() - started


def main(options: argparse.Namespace) -> None:
    if options.quick:
        options.calls, options.rounds, options.load_calls, options.connections = 20, 1, 20, 2
    total = options.calls * options.rounds + options.load_calls
    bodies = [orjson.dumps(request(i, options.stream)) for i in range(total)]
    with tempfile.TemporaryDirectory(prefix="agentbench-proxy-bench-") as folder:
        cassette = Path(folder) / "bench.json"
        body_file = Path(folder) / "answer"
        body_file.write_bytes(write_cassette(cassette, total, options.stream))
        floor = Server("floor", [sys.executable, __file__, "--serve-floor", str(body_file)])
        proxy = Server(
            "proxy", [sys.executable, "-m", "agentbench", "proxy", "--replay", str(cassette)]
        )
        try:
            report(options, bodies, floor, proxy)
        finally:
            floor.stop()
            summary = proxy.stop()
    expected = f"{total} call(s): {total} replayed, 0 forwarded, 0 refused"
    if expected not in summary:
        raise RuntimeError(f"the proxy did not replay every call: {summary}")


def report(options: argparse.Namespace, bodies: list[bytes], floor: Server, proxy: Server) -> None:
    calls, rounds = options.calls, options.rounds
    p50: dict[str, list[float]] = {"floor": [], "proxy": []}
    p99: dict[str, list[float]] = {"floor": [], "proxy": []}
    latencies(floor.port, bodies[:20], check=False)  # warm the floor's connection path
    for number in range(rounds):
        chunk = bodies[number * calls : (number + 1) * calls]
        for server in (floor, proxy):
            taken = sorted(latencies(server.port, chunk, check=server is proxy))
            p50[server.name].append(statistics.median(taken) * 1e6)
            p99[server.name].append(taken[min(len(taken) - 1, int(len(taken) * 0.99))] * 1e6)
    kind = "streamed" if options.stream else "JSON"
    print(
        f"latency: {calls} {kind} calls one at a time, one kept-alive connection, {rounds} round(s)"
    )
    print(f"  {'µs per call':<34} {'p50':>8} {'p99':>8}")
    for name, label in (("floor", "floor (uvicorn ASGI echo)"), ("proxy", "agentbench proxy")):
        print(
            f"  {label:<34} {statistics.median(p50[name]):8.0f} {statistics.median(p99[name]):8.0f}"
        )
    overhead = statistics.median(p - f for p, f in zip(p50["proxy"], p50["floor"], strict=True))
    ratio = statistics.median(p / f for p, f in zip(p50["proxy"], p50["floor"], strict=True))
    print(f"  proxy's p50 overhead over the floor: {overhead:.0f} µs ({ratio:.2f}x)")
    print("  (target: <= 1000 µs)")

    rest = bodies[calls * rounds :]
    print(f"throughput: {len(rest)} calls over {options.connections} connections")
    print(f"  {'':<34} {'calls/s':>8} {'per CPU-s':>10}")
    figures = {}
    for server, sent in ((floor, rest), (proxy, rest)):
        cpu = server.cpu_s()
        wall = asyncio.run(load(server.port, sent, options.connections))
        # /proc counts CPU in clock ticks (10 ms): a run too short to measure says so.
        used = server.cpu_s() - cpu
        per_cpu = len(sent) / used if used >= 0.2 else float("nan")
        figures[server.name] = (len(sent) / wall, per_cpu)
        label = "floor (uvicorn ASGI echo)" if server is floor else "agentbench proxy"
        shown = f"{per_cpu:10.0f}" if per_cpu == per_cpu else f"{'too short':>10}"
        print(f"  {label:<34} {figures[server.name][0]:8.0f} {shown}")
    wall_ratio = figures["proxy"][0] / figures["floor"][0]
    cpu_ratio = figures["proxy"][1] / figures["floor"][1]
    per_cpu_ratio = f"{cpu_ratio:.2f}x" if cpu_ratio == cpu_ratio else "(not measured)"
    print(f"  proxy / floor: {wall_ratio:.2f}x calls/s, {per_cpu_ratio} per CPU-second")
    print("  (target: proxy >= 1000 calls/s on one core)")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve-floor"]:
        serve_floor(sys.argv[2])
        sys.exit(0)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls per way per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--load-calls", type=int, default=6000)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--stream", action="store_true", help="streamed calls (SSE)")
    parser.add_argument("--quick", action="store_true", help="a 20-call run, to check it works")
    main(parser.parse_args())
