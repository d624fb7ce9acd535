"""Fallback backends: the next model when a model fails for good, the next tool when a tool
fails as a system.

`FallbackModel([primary, secondary, ...])` asks the primary; when it fails with a transient
error after its own retries (a timeout, a lost connection, 408/409/429/5xx) — or with an error
named in `on=` — it asks the next, with the request's `model` set to that model's name. The
answer says which model gave it and why the ones before it did not: the record travels in the
response body under `agentbench_fallback` (like a provider's own extension fields), so the
trace store keeps it, a cassette replays it, and `ModelResponse.fallback` reads it. A model
that already streamed text to the caller is never replaced: the caller would get two answers.

`fallback(tool_a, tool_b)` is one tool that tries its backends in order on a system error
(an exception, a timeout) and never on a business failure: the answer "no" does not improve
elsewhere. A call answered by a later backend keeps, in its result's `error`, which backends
failed and why (an ok result's `error` is otherwise empty, and the model never sees it), so
every call records its own path.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

from agentbench.errors import ModelError, ModelTimeoutError, ToolDefinitionError, UsageError
from agentbench.runtime.completions import STREAM_OBJECT, completion_body
from agentbench.runtime.context import RunContext
from agentbench.runtime.models import ChatModel, ChatResponse, TextDeltaHandler
from agentbench.runtime.retry import is_retryable_status
from agentbench.runtime.tools import Effect, ResultKind, Tool, ToolResult

FALLBACK_KEY = "agentbench_fallback"
_ERROR_CHARS = 300


def is_transient(error: BaseException) -> bool:
    """A failure another provider may not have: what `OpenAIModel` gives up on after retries
    (a timeout, no answer at all, a retryable status)."""
    if isinstance(error, ModelTimeoutError):
        return True
    if isinstance(error, ModelError):
        return error.status_code is None or is_retryable_status(error.status_code)
    return False


class FallbackModel:
    """Models tried in order; the first answer wins (see the module docstring).

    `on`: more errors to move on after, besides transient ones — HTTP status codes (`400`
    for a context-length refusal a bigger model would take) or exception classes.
    """

    def __init__(
        self,
        models: Sequence[ChatModel],
        *,
        on: Iterable[int | type[BaseException]] = (),
        name: str | None = None,
    ) -> None:
        self.models = list(models)  # first: a refused one still has a repr in tracebacks
        if len(self.models) < 2:
            raise UsageError("FallbackModel needs at least two models: [primary, fallback, ...]")
        self.name = name or self.models[0].name
        chosen = list(on)
        self.statuses = frozenset(x for x in chosen if isinstance(x, int))
        self.errors = tuple(x for x in chosen if isinstance(x, type))
        if len(self.statuses) + len(self.errors) != len(chosen):
            raise UsageError(
                f"FallbackModel(on={chosen!r}): expected HTTP status codes (int) or exception "
                "classes"
            )

    def __repr__(self) -> str:
        return f"FallbackModel({[m.name for m in self.models]!r})"

    @property
    def chain(self) -> list[str]:
        return [model.name for model in self.models]

    def falls_back_on(self, error: BaseException) -> bool:
        if is_transient(error) or (self.errors and isinstance(error, self.errors)):
            return True
        status = getattr(error, "status_code", None)
        return status is not None and status in self.statuses

    async def complete(
        self, request: dict[str, Any], *, on_text_delta: TextDeltaHandler | None = None
    ) -> ChatResponse:
        started = time.perf_counter()
        failed: list[dict[str, Any]] = []
        delivered = False

        def relay(text: str) -> None:
            nonlocal delivered
            delivered = True
            assert on_text_delta is not None
            on_text_delta(text)

        for index, model in enumerate(self.models):
            asked = request
            if index and "model" in request:
                # A server that serves one model refuses another's name.
                asked = {**request, "model": model.name}
            try:
                response = await model.complete(
                    asked, on_text_delta=relay if on_text_delta is not None else None
                )
            except Exception as exc:
                last = index == len(self.models) - 1
                if last or delivered or not self.falls_back_on(exc):
                    raise
                failed.append(_failure(model.name, exc))
                continue
            if not failed:
                return response
            # The caller waited for the failed models too.
            elapsed = (time.perf_counter() - started) * 1000
            return _annotated(response, model.name, self.chain, failed, elapsed)
        raise AssertionError("unreachable: the last model's error is raised")

    async def aclose(self) -> None:
        for model in self.models:
            closer = getattr(model, "aclose", None)
            if closer is not None:
                await closer()


def _failure(model: str, error: BaseException) -> dict[str, Any]:
    message = " ".join(str(error).split())
    record: dict[str, Any] = {
        "model": model,
        "error": type(error).__name__,
        "message": message[:_ERROR_CHARS],
    }
    for field in ("status_code", "attempts"):
        value = getattr(error, field, None)
        if value is not None:
            record[field] = value
    return record


def _annotated(
    response: ChatResponse,
    answered_by: str,
    chain: list[str],
    failed: list[dict[str, Any]],
    latency_ms: float,
) -> ChatResponse:
    record = {"answered_by": answered_by, "chain": chain, "failed": failed}
    raw = response.raw if response.raw is not None else completion_body(response, answered_by)
    if raw.get("object") == STREAM_OBJECT and raw.get("chunks"):
        # A stream is stored as its chunks: the record rides on the last one.
        chunks = [*raw["chunks"][:-1], {**raw["chunks"][-1], FALLBACK_KEY: record}]
        raw = {**raw, "chunks": chunks}
    else:
        raw = {**raw, FALLBACK_KEY: record}
    update = {"raw": raw, "model": response.model or answered_by, "latency_ms": latency_ms}
    return response.model_copy(update=update)


def fallback_of(response: ChatResponse | dict[str, Any] | None) -> dict[str, Any] | None:
    """The fallback record of a response (a ChatResponse or its stored JSON), if it has one."""
    if response is None:
        return None
    raw = response.get("raw") if isinstance(response, dict) else response.raw
    if not isinstance(raw, dict):
        return None
    if raw.get("object") == STREAM_OBJECT:
        chunks = raw.get("chunks") or [{}]
        found = chunks[-1].get(FALLBACK_KEY) if isinstance(chunks[-1], dict) else None
    else:
        found = raw.get(FALLBACK_KEY)
    return found if isinstance(found, dict) else None


_EFFECT_ORDER = (Effect.READ_ONLY, Effect.UNKNOWN, Effect.WRITE)


async def _backends_decide() -> None:  # FallbackTool runs its backends, never this
    return None


class FallbackTool(Tool):
    """One tool, several backends tried in order on a system error (see `fallback`)."""

    def __init__(self, backends: Sequence[Tool], *, name: str | None = None) -> None:
        if len(backends) < 2 or not all(isinstance(b, Tool) for b in backends):
            raise ToolDefinitionError(
                "fallback(...) needs at least two tools (made with @tool or mcp_tools)"
            )
        first = backends[0]
        self.backends = list(backends)
        super().__init__(
            _backends_decide,
            name=name or first.name,
            description=first.description,
            # The call may reach any backend: it does what the most far-reaching one does.
            effect=max((b.effect for b in backends), key=_EFFECT_ORDER.index),
            timeout_s=None,  # each backend keeps its own
            idempotent=all(b.idempotent for b in backends),
            max_result_chars=max(b.max_result_chars for b in backends),
        )
        self.parameters = first.parameters
        self.args_model = first.args_model
        self.__doc__ = first.description

    def __repr__(self) -> str:
        return f"FallbackTool({self.name!r}, backends={[b.name for b in self.backends]!r})"

    @property
    def source(self) -> str:
        return "fallback: " + " → ".join(b.name for b in self.backends)

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        self.backends[0].validate(arguments)  # the model is shown the first backend's schema
        return dict(arguments)

    async def run(self, kwargs: dict[str, Any], context: RunContext | None = None) -> ToolResult:
        failed: list[str] = []
        result = ToolResult.system_error("no backend ran")
        for backend in self.backends:
            result = await backend.invoke(dict(kwargs), context)
            if result.kind is not ResultKind.SYSTEM_ERROR:
                break
            failed.append(f"{backend.name}: {result.error}")
        if not failed or len(failed) == len(self.backends):
            if len(failed) > 1:
                return ToolResult.system_error("every backend failed — " + "; ".join(failed))
            return result
        path = f"fell back to {self.backends[len(failed)].name} after " + "; ".join(failed)
        if result.kind is ResultKind.OK:
            return result.model_copy(update={"error": path})
        return result.model_copy(update={"error": f"{result.error} ({path})"})


def fallback(*tools: Tool, name: str | None = None) -> FallbackTool:
    """`tools[0]`, and on its system error the next, and so on; never after a business
    failure. The model sees one tool: the first one's name (or `name`), description and schema.
    """
    return FallbackTool(tools, name=name)
