"""The live endpoint of a boundary target: the client's own request, forwarded as it was sent.

Recording (or continuing live from a divergence), the loopback server hands each call to a
`ChatModel` like any other — the `RecordingModel` / `ReplayModel` around it keep the cassette —
and this one forwards the body the client posted, unchanged but for the model name, to the
same API path at the real endpoint, with the user's key (never the loopback key the target
holds). So a Responses API agent is recorded through the Responses API, with every setting its
framework sent, and what is recorded is the endpoint's own answer. A client's retry is the
client's: each attempt reaches the endpoint, and is recorded, as it did. `complete` reads the
answer whole; `open` hands it over unread, for `agentbench proxy` to relay a live stream as it
arrives (and `parsed` reads it once it has ended). Anthropic's Messages
API goes to its own endpoint (`anthropic_base_url`, else ANTHROPIC_BASE_URL, else
api.anthropic.com) with `x-api-key` (ANTHROPIC_API_KEY) and the `anthropic-version` (and
`anthropic-beta`) the client sent, 2023-06-01 when it sent none.
"""

from __future__ import annotations

import contextvars
import os
import time
from dataclasses import dataclass, field
from typing import Any

from agentbench.boundary.wire import CHAT, MESSAGES, Wire
from agentbench.errors import ModelError, ModelTimeoutError, UsageError
from agentbench.runtime.completions import CompletionFormatError
from agentbench.runtime.models import ChatResponse, TextDeltaHandler


@dataclass(frozen=True)
class WireCall:
    """The request being answered, as the client posted it."""

    wire: Wire
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)  # lower-case names, as sent


ANTHROPIC_API = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"  # what the client sent wins
# A call to a provider whose key is not set: the client sees it (HTTP 401) and the run ends.
_NO_KEY = "agentbench: forwarding this call needs {} in agentbench's environment (or {} for "
_NO_KEY += "another endpoint)"


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
        anthropic_base_url: str | None = None,
        anthropic_api_key: str | None = None,
    ) -> None:
        self.name = name
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or "").rstrip("/") or (
            "https://api.openai.com/v1"
        )
        self._api_key = api_key or os.environ.get("OPENAI_API_KEY")
        # The anthropic SDK's base URL is the server's root: its paths start with /v1.
        self.anthropic_base_url = (
            anthropic_base_url or os.environ.get("ANTHROPIC_BASE_URL") or ""
        ).rstrip("/") or ANTHROPIC_API
        self._anthropic_key = anthropic_api_key or os.environ.get("ANTHROPIC_API_KEY")
        anthropic = self._anthropic_key is not None or self.anthropic_base_url != ANTHROPIC_API
        if self._api_key is None and "api.openai.com" in self.base_url and not anthropic:
            raise UsageError(
                "recording at the model-API boundary needs OPENAI_API_KEY for OpenAI's endpoint "
                "(or --base-url / OPENAI_BASE_URL for another), or ANTHROPIC_API_KEY for "
                "Anthropic's"
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
        return self._url(call.wire if call is not None else CHAT)

    def _url(self, wire: Wire) -> str:
        if wire is MESSAGES:
            return self.anthropic_base_url + "/v1" + wire.path
        return self.base_url + wire.path

    def _headers(self, call: WireCall | None) -> dict[str, str]:
        """The endpoint's headers, with the user's key (never the one the client sent)."""
        headers = {"content-type": "application/json"}
        if call is not None and call.wire is MESSAGES:
            if self._anthropic_key is None and self.anthropic_base_url == ANTHROPIC_API:
                raise ModelError(
                    _NO_KEY.format("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"), status_code=401
                )
            if self._anthropic_key:
                headers["x-api-key"] = self._anthropic_key
            headers["anthropic-version"] = call.headers.get("anthropic-version", ANTHROPIC_VERSION)
            if "anthropic-beta" in call.headers:
                headers["anthropic-beta"] = call.headers["anthropic-beta"]
            return headers
        if self._api_key is None and "api.openai.com" in self.base_url:
            raise ModelError(_NO_KEY.format("OPENAI_API_KEY", "OPENAI_BASE_URL"), status_code=401)
        if self._api_key:
            headers["authorization"] = f"Bearer {self._api_key}"
        return headers

    def __repr__(self) -> str:  # never show the key
        return f"WireForwarder({self.name!r}, base_url={self.base_url!r})"

    async def complete(
        self, request: dict[str, Any], *, on_text_delta: TextDeltaHandler | None = None
    ) -> ChatResponse:
        started = time.perf_counter()
        answer, url = await self.open(request)
        call = current_call.get()
        response = await self.read(answer, url, call.wire if call is not None else CHAT, request)
        # The endpoint's time, as the runtime's own client measures it (latency_budget's).
        return response.model_copy(update={"latency_ms": (time.perf_counter() - started) * 1000})

    async def read(
        self, answer: Any, url: str, wire: Wire, request: dict[str, Any]
    ) -> ChatResponse:
        """An answer `open` returned, read whole and closed: the response, or its ModelError."""
        import httpx2

        try:
            content = await answer.aread()
        except httpx2.TimeoutException as exc:
            raise ModelTimeoutError(f"{url}: no answer within {self.timeout_s:g} s") from exc
        except httpx2.HTTPError as exc:
            raise ModelError(f"{url}: {type(exc).__name__}: {exc}") from exc
        finally:
            await answer.aclose()
        content_type = answer.headers.get("content-type", "application/json")
        return self.parsed(wire, url, answer.status_code, content_type, content, request)

    async def open(self, request: dict[str, Any]) -> tuple[Any, str]:
        """The current call posted to the endpoint: its answer (an `httpx2.Response` whose body
        is not read yet, for a stream relayed as it arrives; the caller closes it) and URL."""
        call = current_call.get()
        wire, body = (call.wire, dict(call.body)) if call is not None else (CHAT, dict(request))
        if "model" in request:
            body["model"] = request["model"]  # a continuation asks under the live model's name
        import httpx2  # the openai SDK's own HTTP client: no dependency of ours

        headers = self._headers(call)
        if self._client is None:
            self._client = httpx2.AsyncClient(timeout=self.timeout_s)
        url = self._url(wire)
        try:
            sent = self._client.build_request("POST", url, json=body, headers=headers)
            return await self._client.send(sent, stream=True), url
        except httpx2.TimeoutException as exc:
            raise ModelTimeoutError(f"{url}: no answer within {self.timeout_s:g} s") from exc
        except httpx2.HTTPError as exc:
            raise ModelError(f"{url}: {type(exc).__name__}: {exc}") from exc

    def parsed(
        self,
        wire: Wire,
        url: str,
        status: int,
        content_type: str,
        content: bytes,
        request: dict[str, Any],
    ) -> ChatResponse:
        """An endpoint's whole answer as the response, or the ModelError it is."""
        text = content.decode("utf-8", errors="replace")
        if status >= 400:
            raise ModelError(
                f"{url} answered HTTP {status}: {text[:200]}", status_code=status, body=text
            )
        try:
            return wire.parse_answer(content_type, content, request)
        except (CompletionFormatError, ValueError) as exc:
            raise ModelError(
                f"{url} answered something that is not a {wire.name} response: {exc}",
                status_code=status,
                body=text,
            ) from exc

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None
