"""The uvicorn server a service runs on: read deadlines, and a drain that keeps answering.

On SIGTERM uvicorn closes its listening sockets at once, so a request arriving while running
ones finish would be refused a connection. Here the sockets stay open through the drain: new
runs are answered `503` with `Retry-After` (and `/healthz` 503, so a load balancer stops
sending) until every running request has finished or the drain bound (`drain_s`) has
cancelled it; only then does uvicorn's own shutdown close the sockets and wait for the last
answers to go out. A second Ctrl-C still ends the wait at once.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import uvicorn

from agentbench.serve.app import create_app
from agentbench.serve.service import Service
from agentbench.serve.slow_clients import guarded_protocol

# The most a request's line and headers may take (h11 answers 431/400 past it).
MAX_HEADER_BYTES = 16 * 1024


def server_config(service: Service, **options: Any) -> uvicorn.Config:
    """uvicorn's settings for `service`: its app, the read deadlines, the header size limit;
    `options` are uvicorn's own (host, port, log_level…)."""
    settings = service.settings
    return uvicorn.Config(
        create_app(service),
        http=guarded_protocol(settings.header_timeout_s, settings.body_timeout_s),
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
        # A backstop only: the service answers and cancels what runs after the drain itself.
        timeout_graceful_shutdown=round(settings.drain_s) + 10,
        **options,
    )


class DrainingServer(uvicorn.Server):
    """uvicorn's server, telling the service when a shutdown starts (new runs get 503 and the
    drain counts from the signal) and closing its sockets only once the drain is over."""

    def __init__(self, config: uvicorn.Config, service: Service) -> None:
        super().__init__(config)
        self.service = service
        self._loop: asyncio.AbstractEventLoop | None = None

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets=sockets)

    def handle_exit(self, sig: int, frame: Any) -> None:
        # A signal handler: the service's drain starts in the loop, safely.
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self.service.begin_shutdown)
        super().handle_exit(sig, frame)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.service.begin_shutdown()  # stopped some other way (a test, max requests)
        settled = asyncio.ensure_future(self.service.runs.settled())
        try:
            while not settled.done() and not self.force_exit:
                await asyncio.wait({settled}, timeout=0.1)
        finally:
            settled.cancel()
        await super().shutdown(sockets=sockets)
