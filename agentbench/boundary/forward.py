"""The live endpoint of a boundary target: the client's own request, forwarded as it was sent.

Recording (or continuing live from a divergence), the loopback server hands each call to a
`ChatModel` like any other — the `RecordingModel` / `ReplayModel` around it keep the cassette —
and this one forwards the body the client posted, unchanged but for the model name, to the
same API path at the real endpoint, with the user's key (never the loopback key the target
holds). So a Responses API agent is recorded through the Responses API, with every setting its
framework sent, and what is recorded is the endpoint's own answer. A client's retry is the
client's: each attempt reaches the endpoint, and is recorded, as it did.
"""

from __future__ import annotations

import contextvars
import os
import time
from dataclasses import dataclass
from typing import Any

from agentbench.boundary.wire import CHAT, Wire
from agentbench.errors import ModelError, ModelTimeoutError, UsageError
from agentbench.runtime.completions import CompletionFormatError
from agentbench.runtime.models import ChatResponse, TextDeltaHandler


@dataclass(frozen=True)
class WireCall:
    """The request being answered, as the client posted it."""

    wire: Wire
    body: dict[str, Any]


# Set by the server's handler for the call it is answering (each connection is its own task,
# so concurrent calls never see each other's).
current_call: contextvars.ContextVar[WireCall | None] = contextvars.ContextVar(
    "agentbench_wire_call", default=None
)


class WireForwarder:
    """A ChatModel that forwards the current wire call to `base_url`."""

    def __init__(
        self,
        name: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 600.0,
    ) -> None:
        self.name = name
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or "").rstrip("/") or (
            "https://api.openai.com/v1"
        )
        self._api_key = api_key or os.environ.get("OPENAI_API_KEY")
        if self._api_key is None and "api.openai.com" in self.base_url:
            raise UsageError(
                "recording at the model-API boundary needs OPENAI_API_KEY for OpenAI's endpoint "
                "(or --base-url / OPENAI_BASE_URL for another)"
            )
        self.timeout_s = timeout_s
        self._client: Any = None

    @property
    def endpoint(self) -> str:
        return self.base_url

    @property
    def call_uri(self) -> str:
        """Where the call being answered goes: what a recording names as its `uri`."""
        call = current_call.get()
        return self.base_url + (call.wire.path if call is not None else CHAT.path)

    def __repr__(self) -> str:  # never show the key
        return f"WireForwarder({self.name!r}, base_url={self.base_url!r})"

    async def complete(
        self, request: dict[str, Any], *, on_text_delta: TextDeltaHandler | None = None
    ) -> ChatResponse:
        call = current_call.get()
        wire, body = (call.wire, dict(call.body)) if call is not None else (CHAT, dict(request))
        if "model" in request:
            body["model"] = request["model"]  # a continuation asks under the live model's name
        import httpx2  # the openai SDK's own HTTP client: no dependency of ours

        if self._client is None:
            self._client = httpx2.AsyncClient(timeout=self.timeout_s)
        headers = {"content-type": "application/json"}
        if self._api_key:
            headers["authorization"] = f"Bearer {self._api_key}"
        url = self.base_url + wire.path
        started = time.perf_counter()
        try:
            answer = await self._client.post(url, json=body, headers=headers)
        except httpx2.TimeoutException as exc:
            raise ModelTimeoutError(f"{url}: no answer within {self.timeout_s:g} s") from exc
        except httpx2.HTTPError as exc:
            raise ModelError(f"{url}: {type(exc).__name__}: {exc}") from exc
        text = answer.text
        if answer.status_code >= 400:
            raise ModelError(
                f"{url} answered HTTP {answer.status_code}: {text[:200]}",
                status_code=answer.status_code,
                body=text,
            )
        content_type = answer.headers.get("content-type", "application/json")
        try:
            response = wire.parse_answer(content_type, answer.content, request)
        except (CompletionFormatError, ValueError) as exc:
            raise ModelError(
                f"{url} answered something that is not a {wire.name} response: {exc}",
                status_code=answer.status_code,
                body=text,
            ) from exc
        # The endpoint's time, as the runtime's own client measures it (latency_budget's).
        return response.model_copy(update={"latency_ms": (time.perf_counter() - started) * 1000})

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None
