"""Small MCP servers of the project's own, for the faults real servers do not make on demand;
and `serving_over_http`, which runs one behind streamable HTTP for the length of a test."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2

ROOT = Path(__file__).resolve().parent.parent.parent
_READY_S = 30.0


@contextlib.contextmanager
def serving_over_http(
    module: str = "tests.mcp_servers.faults", *, json: bool = False
) -> Iterator[str]:
    """The URL of `module`'s MCP endpoint, served by a process of its own until the block ends
    (then killed: a server whose event loop a test blocked cannot handle SIGTERM)."""
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", module, "--http-json" if json else "--http", str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + _READY_S
        while time.monotonic() < deadline and process.poll() is None:
            try:
                httpx2.get(url, timeout=1)
                break
            except httpx2.HTTPError:
                time.sleep(0.1)
        yield url
    finally:
        process.kill()
        process.wait(10)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
