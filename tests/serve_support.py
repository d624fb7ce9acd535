"""A served app on a real socket (uvicorn in a thread, as `agentbench serve` runs it) for the
serve tests, and the agents they serve: a model whose answers are computed from the request,
with a dial for latency and a gate a test opens; named keys."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from agentbench import Agent, ModelSettings, ToolCall, tool
from agentbench.runtime.models import FunctionModel
from agentbench.serve import (
    Caller,
    DrainingServer,
    Keyring,
    ServeSettings,
    Service,
    server_config,
)


@tool(effect="read_only")
def order_status(order_id: str) -> dict[str, Any]:
    """The status of an order.

    Args:
        order_id: The order id, e.g. "A17".
    """
    return {"order_id": order_id, "status": "delivered", "days_ago": 12}


@dataclass
class Desk:
    """The served agent's model: looks the order up once, then answers. `delay_s` is awaited
    on every call, and each call waits until the file `gate` exists (a test in another process
    opens it); `in_flight`/`most_in_flight` count calls under way at once."""

    delay_s: float = 0.0
    in_flight: int = 0
    most_in_flight: int = 0
    calls: int = 0
    gate: Path | None = None

    async def __call__(self, request: dict[str, Any]) -> Any:
        self.calls += 1
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            # A file another process makes: no event can cross that boundary, so it is polled.
            while self.gate is not None and not self.gate.exists():  # noqa: ASYNC110
                await asyncio.sleep(0.01)
            messages = request["messages"]
            last = messages[-1]
            if last["role"] == "tool":
                return f"Order A17 is {orjson.loads(last['content'])['status']}."
            return ToolCall("order_status", {"order_id": "A17"})
        finally:
            self.in_flight -= 1


def desk_agent(model: Desk | None = None, *, stream: bool = False, name: str = "desk") -> Agent:
    return Agent(
        name=name,
        description="Answers questions about orders.",
        instructions="You answer questions about orders. Look the order up first.",
        tools=[order_status],
        model=FunctionModel(model or Desk(), name="desk-model"),
        model_settings=ModelSettings(stream=stream),
    )


@contextlib.contextmanager
def served(service: Service) -> Iterator[str]:
    """Serve `service` on 127.0.0.1 (a free port) until the block ends; yields the base URL."""
    # IPPROTO_TCP: asyncio sets TCP_NODELAY only then (else ~40 ms a kept-alive request).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = DrainingServer(server_config(service, log_level="warning"), service)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the served app did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(15)


def service_for(*agents: Agent, store: Any = None, **settings: Any) -> Service:
    return Service(
        {agent.name: agent for agent in agents}, settings=ServeSettings(**settings), store=store
    )


def keyring(keys: dict[str, str], admins: tuple[str, ...] = ()) -> Keyring:
    """Named keys, as a key file would give them (`admins`: the names that may read all)."""
    return Keyring((Caller(name, admin=name in admins), key) for name, key in keys.items())
