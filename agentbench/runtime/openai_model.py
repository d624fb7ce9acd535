"""`OpenAIModel`: the `ChatModel` for any OpenAI-compatible endpoint, through the openai SDK.

The runner's request body is sent as is: keys the SDK knows go as arguments, anything else
(vendor extensions such as `top_k` for vLLM) goes in `extra_body`. Retries are ours, not the
SDK's, so that backoff, jitter and `Retry-After` follow one documented policy and the final
error says how many attempts were made; an error the server answers twice with the same body is
deterministic and not retried again. Error messages keep the status, the endpoint and the first
line of the server's answer; `ModelError.body` keeps all of it. Streaming accumulates tool-call
fragments by index into whole calls and reports text deltas as they arrive. A stream is whole
only once a finish_reason has arrived: one that ends part-way without it (a connection closed
mid-answer) is a transient failure like a dropped connection, never a short answer. An empty
event stream (not one chunk) is what llama.cpp sends when it cannot stream a tool call it chose
itself, so the same request is asked once more at once without streaming, and its text reaches
the caller as one delta (the response's `raw` is then the non-streamed body). Once text has
reached the caller, no failure is retried, since a retry would repeat that text. Usage a server
does not report is estimated and marked `Usage.estimated`.

`max_tokens=N` caps every answer whose request sets no limit of its own (`max_tokens` or
`max_completion_tokens`), on the wire only: the request a recording keeps is the one the agent
built. OpenAI's reasoning models refuse `max_tokens` (HTTP 400 naming `max_completion_tokens`);
on that refusal the cap is sent as `max_completion_tokens` from then on.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import os
import time
from collections.abc import Iterator
from typing import Any

import openai
import orjson
from openai import AsyncOpenAI
from openai.resources.chat.completions import AsyncCompletions

from agentbench.errors import ModelError, ModelTimeoutError, UsageError
from agentbench.runtime.completions import StreamAccumulator, parse_completion
from agentbench.runtime.deadlines import DeadlineExceeded, within
from agentbench.runtime.message_view import materialized
from agentbench.runtime.models import ChatResponse, TextDeltaHandler
from agentbench.runtime.retry import (
    TIMING_STATUS,
    RetryPolicy,
    is_retryable_status,
    parse_retry_after,
    repeats_deterministically,
)
from agentbench.trace._json import storable

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
_ERROR_LINE_CHARS = 200  # of the server's error text, in a message; the body keeps all of it


class _Transient(Exception):  # noqa: N818 - internal signal, never escapes this module
    """A failure another attempt may not have; `delivered` when text already reached the caller.

    `status_code` and `body` are the server's answer when there was one; `compare_body` when
    the same body again would show the error is deterministic (see `repeats_deterministically`).
    """

    def __init__(
        self,
        message: str,
        retry_after: float | None = None,
        *,
        timeout: bool = False,
        delivered: bool = False,
        status_code: int | None = None,
        body: str | None = None,
        compare_body: bool = False,
        unanswered: bool = False,
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.timeout = timeout
        self.delivered = delivered
        self.status_code = status_code
        self.body = body
        self.compare_body = compare_body
        self.unanswered = unanswered  # the connection failed before any answer began


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
        max_tokens: int | None = None,
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
        self.max_tokens = max_tokens  # sent where a request sets no limit of its own
        self._cap_key = "max_tokens"  # or max_completion_tokens, once the server asked for it
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
        previous_body: str | None = None  # the last error body that may show determinism
        while True:
            attempt += 1
            try:
                response = await self._attempt_in_time(request, on_text_delta)
            except ModelError as exc:
                if self._wants_other_cap_key(exc, request):
                    attempt -= 1  # our parameter's name, not the server's failure
                    continue
                raise
            except _Transient as exc:
                final = self._final_error(exc, attempt, previous_body)
                if final is not None:
                    raise final from None
                previous_body = exc.body if exc.compare_body else None
                delay = self.retry.backoff(attempt, exc.retry_after)
                log.info(
                    "model call attempt %d failed (%s); retrying in %.2fs", attempt, exc, delay
                )
                await asyncio.sleep(delay)
                continue
            return response.model_copy(
                update={"latency_ms": (time.perf_counter() - started) * 1000, "attempts": attempt}
            )

    def _wants_other_cap_key(self, exc: ModelError, request: dict[str, Any]) -> bool:
        """The server refused the cap we added as `max_tokens` and asked for
        `max_completion_tokens` (OpenAI's reasoning models): send it so from now on."""
        if (
            exc.status_code != 400
            or self._cap_key != "max_tokens"
            or self._capped(request) is None
            or "max_completion_tokens" not in (exc.body or str(exc))
        ):
            return False
        self._cap_key = "max_completion_tokens"
        return True

    def _capped(self, request: dict[str, Any]) -> dict[str, Any] | None:
        """The cap to add to `request`, or None: no cap, or the request sets its own."""
        if self.max_tokens is None or "max_tokens" in request:
            return None
        if "max_completion_tokens" in request:
            return None
        return {self._cap_key: self.max_tokens}

    async def _attempt_in_time(
        self, request: dict[str, Any], on_text_delta: TextDeltaHandler | None
    ) -> ChatResponse:
        """One attempt, whole within `timeout_s`: the SDK's timeout bounds each wait for the
        server (a stream that keeps trickling never trips it), this bounds the answer."""
        emitted = False

        def passed_on(delta: str) -> None:
            nonlocal emitted
            emitted = True
            on_text_delta(delta)  # type: ignore[misc]

        loop = asyncio.get_running_loop()
        try:
            return await within(
                self._attempt(request, passed_on if on_text_delta is not None else None),
                loop.time() + self.timeout_s,
            )
        except DeadlineExceeded:
            raise _Transient(
                f"timed out after {self.timeout_s:g} s", timeout=True, delivered=emitted
            ) from None

    def _final_error(
        self, exc: _Transient, attempt: int, previous_body: str | None
    ) -> ModelError | None:
        """The error to stop with after `exc` on attempt `attempt`, or None to retry."""
        where = f"model {self.name!r} at {self.endpoint}"
        error = ModelTimeoutError if exc.timeout else ModelError
        kept: dict[str, Any] = {
            "attempts": attempt,
            "status_code": exc.status_code,
            "body": exc.body,
        }
        if exc.delivered:
            return error(
                f"{where}: {exc}, on attempt {attempt}; not retried, since its text had already "
                "reached the caller",
                **kept,
            )
        if repeats_deterministically(previous_body, exc.body if exc.compare_body else None):
            return ModelError(
                f"{where}: {exc} (the server answered the same error twice; not retried again, "
                f"after {attempt} attempts)",
                **kept,
            )
        retry_after = exc.retry_after
        if retry_after is not None and retry_after > self.retry.max_retry_after_s:
            return ModelError(
                f"{exc}; the server asked to retry after {retry_after:g} s, more than "
                f"max_retry_after_s={self.retry.max_retry_after_s:g}",
                **kept,
            )
        if attempt >= self.retry.max_attempts:
            return error(f"{where}: {exc} (gave up after {attempt} attempts)", **kept)
        return None

    async def _attempt(
        self, request: dict[str, Any], on_text_delta: TextDeltaHandler | None
    ) -> ChatResponse:
        body = {k: v for k, v in request.items() if k in _SDK_KEYS}
        extra = {k: v for k, v in request.items() if k not in _SDK_KEYS}
        body.setdefault("model", self.name)
        if "messages" in body:
            body["messages"] = _sendable(body["messages"])
        body.update(self._capped(request) or {})
        if not body.get("stream"):
            return await self._unstreamed(body, extra, request)
        body.setdefault("stream_options", {"include_usage": True})
        response = await self._streamed(body, extra, request, on_text_delta)
        if response is not None:
            return response
        # Not one chunk: llama.cpp cannot stream a tool call it chose itself (it fails inside
        # its stream, after the 200). Retrying the stream fails the same way; unstreamed works.
        log.info(
            "model %r at %s sent an empty event stream; asking the same request again "
            "without streaming",
            self.name,
            self.endpoint,
        )
        plain = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
        try:
            response = await self._unstreamed(plain, extra, request)
        except _Transient as exc:
            if not exc.unanswered:
                raise
            # llama.cpp keeps the connection its failed stream used open and drops the next
            # request sent on it ("Server disconnected without sending a response"); that
            # connection is gone from the pool now, so one more try at once takes a new one.
            log.info("the request without streaming found the connection closed; asked again")
            response = await self._unstreamed(plain, extra, request)
        if response.text and on_text_delta is not None:
            on_text_delta(response.text)
        return response

    async def _unstreamed(
        self, body: dict[str, Any], extra: dict[str, Any], request: dict[str, Any]
    ) -> ChatResponse:
        with self._failures():
            result = await self._get_client().chat.completions.create(
                **body, extra_body=extra or None, timeout=self.timeout_s
            )
            # The same dict parser replay uses, so live and replayed responses are identical.
            return parse_completion(result.to_dict(), request)

    async def _streamed(
        self,
        body: dict[str, Any],
        extra: dict[str, Any],
        request: dict[str, Any],
        on_text_delta: TextDeltaHandler | None,
    ) -> ChatResponse | None:
        """The streamed response, or None when the stream ended before its first chunk."""
        state = StreamAccumulator(on_text_delta)
        with self._failures(state):
            stream = await self._get_client().chat.completions.create(
                **body, extra_body=extra or None, timeout=self.timeout_s
            )
            try:
                async for chunk in stream:
                    state.add(chunk.to_dict())
            except openai.APITimeoutError:
                raise
            except openai.APIConnectionError as exc:
                # httpx's own reason ("peer closed connection ...") is in __cause__.
                reason = exc.__cause__ or exc
                if state.finished:
                    # The answer is whole; only usage or [DONE] went down with the connection.
                    log.info("model stream broke after its finish_reason (%s); answer kept", reason)
                    return state.response(request)
                if state.chunks:
                    raise _Transient(
                        f"{state.cut_short()}: the connection broke ({reason})",
                        delivered=state.emitted,
                    ) from None
        if not state.chunks:
            return None
        # The SDK ends its iterator quietly when the body ends, [DONE] or not.
        problem = state.cut_short()
        if problem is not None:
            raise _Transient(problem, delivered=state.emitted)
        return state.response(request)

    @contextlib.contextmanager
    def _failures(self, state: StreamAccumulator | None = None) -> Iterator[None]:
        """Turn the SDK's exceptions into `_Transient` (retry) or `ModelError` (stop)."""
        try:
            yield
        except openai.APITimeoutError:
            raise _Transient(
                f"timed out after {self.timeout_s:g} s",
                timeout=True,
                delivered=state is not None and state.emitted,
            ) from None
        except openai.APIConnectionError as exc:
            raise _Transient(
                f"connection failed: {exc.__cause__ or exc}", unanswered=True
            ) from None
        except openai.APIStatusError as exc:
            raise _status_error(self, exc) from None
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ModelError(
                f"model {self.name!r} at {self.endpoint} returned a body that is not a chat "
                f"completion: {type(exc).__name__}: {exc}"
            ) from None


def _sendable(messages: Any) -> Any:
    """The messages as an HTTP client can encode them: half an emoji (a lone surrogate a tool
    or a summary cut off) as U+FFFD, which the SDK otherwise fails on before sending. One
    encode of the messages a live call; repaired (a walk) only when that fails."""
    try:
        orjson.dumps(messages)
    except TypeError:
        return storable(messages, counted=False)
    return messages


def _status_error(model: OpenAIModel, exc: openai.APIStatusError) -> Exception:
    headers = dict(exc.response.headers)
    body = _body_text(exc)
    message = f"HTTP {exc.status_code} from {model.endpoint}/chat/completions: {error_line(body)}"
    if is_retryable_status(exc.status_code, headers):
        retry_after = parse_retry_after(headers)
        # A rate limit, a gateway, or a server that names a time to come back speaks of time,
        # not of the request: the same body again is no sign the error is deterministic.
        compare = exc.status_code not in TIMING_STATUS and retry_after is None
        return _Transient(
            message, retry_after, status_code=exc.status_code, body=body, compare_body=compare
        )
    hint = _STATUS_HINTS.get(exc.status_code)
    return ModelError(
        f"model {model.name!r}: {message}" + (f" ({hint})" if hint else ""),
        status_code=exc.status_code,
        body=body,
    )


def _body_text(exc: openai.APIStatusError) -> str:
    """The server's whole response body as text."""
    try:
        return exc.response.text
    except Exception:  # a response the SDK closed unread (httpx's ResponseNotRead)
        if exc.body is None:
            return ""
        return exc.body if isinstance(exc.body, str) else json.dumps(exc.body)


def error_line(body: str, limit: int = _ERROR_LINE_CHARS) -> str:
    """The first line of a server's error body, for a message; the body itself is kept whole.

    An OpenAI-style JSON error gives its `error.message` (or FastAPI's `detail`). A first line
    ending in a colon ("7 validation errors:") only announces the next, so that one is added.
    """
    text = body
    with contextlib.suppress(ValueError):
        parsed = json.loads(body)
        error = parsed.get("error", parsed) if isinstance(parsed, dict) else None
        if isinstance(error, str):
            text = error
        elif isinstance(error, dict):
            message = error.get("message") or error.get("detail")
            text = message if isinstance(message, str) and message.strip() else body
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return "(an empty body)"
    line = lines[0]
    if line.endswith(":") and len(lines) > 1:
        line = f"{line} {lines[1]}"
    return line if len(line) <= limit else line[: limit - 1] + "…"
