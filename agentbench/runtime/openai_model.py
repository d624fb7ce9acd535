"""`OpenAIModel`: the `ChatModel` for any OpenAI-compatible endpoint, through the openai SDK.

The runner's request body is sent as is: keys the SDK knows go as arguments, anything else
(vendor extensions such as `top_k` for vLLM) goes in `extra_body`. Retries are ours, not the
SDK's, so that backoff, jitter and `Retry-After` follow one documented policy and the final
error says how many attempts were made. Streaming accumulates tool-call fragments by index
into whole calls and reports text deltas as they arrive. A stream is whole only once a
finish_reason has arrived: one that ends without it (a connection closed mid-answer, an empty
event stream) is a transient failure like a dropped connection, never a short answer. Once text
has reached the caller, no failure is retried, since a retry would repeat that text.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import time
from typing import Any

import openai
from openai import AsyncOpenAI
from openai.resources.chat.completions import AsyncCompletions

from agentbench.errors import ModelError, ModelTimeoutError, UsageError
from agentbench.runtime.completions import StreamAccumulator, parse_completion
from agentbench.runtime.message_view import materialized
from agentbench.runtime.models import ChatResponse, TextDeltaHandler
from agentbench.runtime.retry import RetryPolicy, is_retryable_status, parse_retry_after

log = logging.getLogger("agentbench.model")

_SDK_KEYS = frozenset(inspect.signature(AsyncCompletions.create).parameters) - {
    "self",
    "extra_headers",
    "extra_query",
    "extra_body",
    "timeout",
}
_STATUS_HINTS = {
    401: "check the API key (OPENAI_API_KEY or api_key=)",
    403: "the key is not allowed to use this model or endpoint",
    404: "check the model name and the base_url (OPENAI_BASE_URL or base_url=)",
}


class _Transient(Exception):  # noqa: N818 - internal signal, never escapes this module
    """A failure another attempt may not have; `delivered` when text already reached the caller."""

    def __init__(
        self,
        message: str,
        retry_after: float | None = None,
        *,
        timeout: bool = False,
        delivered: bool = False,
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.timeout = timeout
        self.delivered = delivered


class OpenAIModel:
    """A chat model behind any OpenAI-compatible `base_url` (OpenAI, vLLM, Ollama, ...)."""

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        retry: RetryPolicy | None = None,
        default_headers: dict[str, str] | None = None,
    ) -> None:
        resolved = model or os.environ.get("AGENTBENCH_MODEL") or os.environ.get("OPENAI_MODEL")
        if not resolved:
            raise UsageError(
                "OpenAIModel needs a model name: OpenAIModel('gpt-4o-mini') or set OPENAI_MODEL"
            )
        self.name = resolved
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL")
        # Local servers (llama.cpp, Ollama, vLLM) accept any key; the SDK insists on one.
        self._api_key = (
            api_key or os.environ.get("OPENAI_API_KEY") or ("unused" if self.base_url else None)
        )
        if self._api_key is None:
            raise UsageError(
                "OpenAIModel needs an API key: set OPENAI_API_KEY, pass api_key=, or point "
                "base_url= (or OPENAI_BASE_URL) at a local server"
            )
        self.timeout_s = timeout_s
        self.retry = retry or RetryPolicy()
        self._default_headers = default_headers
        self._client: AsyncOpenAI | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:  # never show the key
        return f"OpenAIModel({self.name!r}, base_url={self.base_url!r})"

    def _get_client(self) -> AsyncOpenAI:
        # An httpx connection pool belongs to the event loop that opened it; run_sync makes a
        # new loop per call, so a client is reused only within its own loop.
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            self._client = AsyncOpenAI(
                api_key=self._api_key,
                base_url=self.base_url,
                max_retries=0,
                timeout=self.timeout_s,
                default_headers=self._default_headers,
            )
            self._client_loop = loop
        return self._client

    async def aclose(self) -> None:
        """Close the HTTP connections of the client that belongs to the running loop."""
        client, self._client = self._client, None
        if client is not None and self._client_loop is asyncio.get_running_loop():
            await client.close()

    async def __aenter__(self) -> OpenAIModel:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    @property
    def endpoint(self) -> str:
        return str(self.base_url or "https://api.openai.com/v1")

    async def complete(
        self, request: dict[str, Any], *, on_text_delta: TextDeltaHandler | None = None
    ) -> ChatResponse:
        started = time.perf_counter()
        request = materialized(request)  # the SDK serializes lists, not a runtime MessageView
        attempt = 0
        while True:
            attempt += 1
            try:
                response = await self._attempt(request, on_text_delta)
            except _Transient as exc:
                error = ModelTimeoutError if exc.timeout else ModelError
                if exc.delivered:
                    raise error(
                        f"model {self.name!r} at {self.endpoint}: {exc}, on attempt {attempt}; "
                        "not retried, since its text had already reached the caller",
                        attempts=attempt,
                    ) from None
                retry_after = exc.retry_after
                if retry_after is not None and retry_after > self.retry.max_retry_after_s:
                    raise ModelError(
                        f"{exc}; the server asked to retry after {retry_after:g} s, more than "
                        f"max_retry_after_s={self.retry.max_retry_after_s:g}",
                        attempts=attempt,
                    ) from None
                if attempt >= self.retry.max_attempts:
                    raise error(
                        f"model {self.name!r} at {self.endpoint}: {exc} "
                        f"(gave up after {attempt} attempts)",
                        attempts=attempt,
                    ) from None
                delay = self.retry.backoff(attempt, retry_after)
                log.info(
                    "model call attempt %d failed (%s); retrying in %.2fs", attempt, exc, delay
                )
                await asyncio.sleep(delay)
                continue
            return response.model_copy(
                update={"latency_ms": (time.perf_counter() - started) * 1000, "attempts": attempt}
            )

    async def _attempt(
        self, request: dict[str, Any], on_text_delta: TextDeltaHandler | None
    ) -> ChatResponse:
        body = {k: v for k, v in request.items() if k in _SDK_KEYS}
        extra = {k: v for k, v in request.items() if k not in _SDK_KEYS}
        body.setdefault("model", self.name)
        stream = bool(body.get("stream"))
        if stream:
            body.setdefault("stream_options", {"include_usage": True})
        client = self._get_client()
        stream_state = StreamAccumulator(on_text_delta)
        reading_stream = False
        try:
            result = await client.chat.completions.create(
                **body, extra_body=extra or None, timeout=self.timeout_s
            )
            if stream:
                reading_stream = True
                async for chunk in result:
                    stream_state.add(chunk.to_dict())
                # The SDK ends its iterator quietly when the body ends, [DONE] or not.
                problem = stream_state.cut_short()
                if problem is not None:
                    raise _Transient(problem, delivered=stream_state.emitted)
                return stream_state.response()
            # The same dict parser replay uses, so live and replayed responses are identical.
            return parse_completion(result.to_dict())
        except openai.APITimeoutError:
            raise _Transient(
                f"timed out after {self.timeout_s:g} s",
                timeout=True,
                delivered=stream_state.emitted,
            ) from None
        except openai.APIConnectionError as exc:
            # httpx's own reason ("peer closed connection ...") is in __cause__.
            reason = exc.__cause__ or exc
            if not reading_stream:
                raise _Transient(f"connection failed: {reason}") from None
            if stream_state.finished:
                # The answer is whole; only the usage chunk or [DONE] went down with the connection.
                log.info("model stream broke after its finish_reason (%s); answer kept", reason)
                return stream_state.response()
            raise _Transient(
                f"{stream_state.cut_short()}: the connection broke ({reason})",
                delivered=stream_state.emitted,
            ) from None
        except openai.APIStatusError as exc:
            raise _status_error(self, exc) from None
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ModelError(
                f"model {self.name!r} at {self.endpoint} returned a body that is not a chat "
                f"completion: {type(exc).__name__}: {exc}"
            ) from None


def _status_error(model: OpenAIModel, exc: openai.APIStatusError) -> Exception:
    headers = dict(exc.response.headers)
    message = f"HTTP {exc.status_code} from {model.endpoint}/chat/completions: {exc.message}"
    if is_retryable_status(exc.status_code, headers):
        return _Transient(message, parse_retry_after(headers))
    hint = _STATUS_HINTS.get(exc.status_code)
    return ModelError(
        f"model {model.name!r}: {message}" + (f" ({hint})" if hint else ""),
        status_code=exc.status_code,
    )
