"""`create_app(service)`: the served agents as an OpenAI-compatible API plus a runs API.

    POST /v1/chat/completions     the agent as a "model" (stream: true for SSE chunks)
    POST /v1/runs                 202 + Location; GET /v1/runs/{id}; DELETE cancels
    GET  /v1/runs/{id}/events     the run's typed events as SSE, from the first
    GET  /v1/models, /healthz, /metrics

Every request runs as a `ServedRun` recorded in the service's store with its request id,
conversation id and code version, so production traffic feeds `agentbench replay`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import orjson
from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse

from agentbench.serve.admission import Overloaded, Ticket
from agentbench.serve.chat import ChatRequest, ChunkWriter, RunRequest, completion, finish_reason
from agentbench.serve.errors import error_response, validation_error
from agentbench.serve.metrics import CONTENT_TYPE
from agentbench.serve.middleware import BearerToken, BodyLimit, RequestIds
from agentbench.serve.runs import ServedRun
from agentbench.serve.service import Service
from agentbench.serve.stored import stored_events, stored_run
from agentbench.trace.redact import Redactor

# A comment line now and then keeps proxies from closing a stream while the agent works.
KEEPALIVE_S = 15.0
_SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}
# Stop reasons whose answer is still an answer (possibly cut short by a brake).
_ANSWERED = {
    "completed",
    "business_stop",
    "handoff",
    "max_iterations",
    "loop_detected",
    "token_budget",
}


def create_app(service: Service) -> FastAPI:
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        await service.shutdown()

    app = FastAPI(title="agentbench serve", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.service = service
    app.add_exception_handler(RequestValidationError, validation_error)
    # Added innermost first: ids and metrics see every answer, auth comes before the body.
    app.add_middleware(BodyLimit, limit=service.settings.max_body_bytes, metrics=service.metrics)
    app.add_middleware(BearerToken, key=service.settings.api_key, metrics=service.metrics)
    app.add_middleware(RequestIds, metrics=service.metrics)
    app.include_router(routes)
    return app


routes = APIRouter()


def _service(request: Request) -> Service:
    return request.app.state.service


@routes.get("/healthz")
async def healthz(request: Request) -> dict[str, Any]:
    service = _service(request)
    return {
        "status": "draining" if service.draining else "ok",
        "agents": sorted(service.agents),
        "running": service.admission.running,
        "queued": service.admission.waiting,
    }


@routes.get("/v1/models")
async def models(request: Request) -> dict[str, Any]:
    return {
        "object": "list",
        "data": [
            {
                "id": name,
                "object": "model",
                "created": 0,
                "owned_by": "agentbench",
                "description": agent.description,
            }
            for name, agent in sorted(_service(request).agents.items())
        ],
    }


@routes.get("/metrics")
async def metrics(request: Request) -> Response:
    service = _service(request)
    service.metrics.running.set(service.admission.running)
    service.metrics.queued.set(service.admission.waiting)
    return Response(service.metrics.render(), media_type=CONTENT_TYPE)


@routes.post("/v1/chat/completions", response_model=None)
async def chat_completions(body: ChatRequest, request: Request) -> Response:
    started = _start(
        request,
        body.model,
        body.conversation(),
        conversation_id=request.headers.get("x-conversation-id") or body.user,
    )
    if isinstance(started, Response):
        return started
    run = started
    headers = _run_headers(run)
    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        return StreamingResponse(
            _chat_stream(run, include_usage),
            media_type="text/event-stream",
            headers={**headers, **_SSE_HEADERS},
        )
    if not await _finished_unless_disconnected(run, request):
        return Response(status_code=499, headers=headers)  # nobody is listening
    if run.stop_reason not in _ANSWERED:
        return _failed(run, headers)
    return JSONResponse(
        completion(
            completion_id=_completion_id(run),
            agent=run.agent,
            text=run.text,
            stop_reason=run.stop_reason or "error",
            usage=run.usage,
            extra=_extension(run),
        ),
        headers=headers,
    )


@routes.post("/v1/runs", status_code=202, response_model=None)
async def create_run(body: RunRequest, request: Request) -> Response:
    started = _start(
        request,
        body.agent,
        body.conversation(),
        context=body.context,
        conversation_id=request.headers.get("x-conversation-id") or body.conversation_id,
    )
    if isinstance(started, Response):
        return started
    return JSONResponse(
        started.as_json(),
        status_code=202,
        headers={**_run_headers(started), "location": f"/v1/runs/{started.id}"},
    )


@routes.get("/v1/runs/{run_id}", response_model=None)
async def get_run(run_id: str, request: Request) -> Response:
    run = _service(request).runs.get(run_id)
    if run is not None:
        return JSONResponse(run.as_json())
    stored = await _from_store(_service(request), lambda store: stored_run(store, run_id))
    return _unknown_run(run_id) if stored is None else JSONResponse(stored)


@routes.delete("/v1/runs/{run_id}", response_model=None)
async def cancel_run(run_id: str, request: Request) -> Response:
    run = _service(request).runs.get(run_id)
    if run is None:
        return _unknown_run(run_id)
    if run.done:
        return error_response(
            409, f"run {run_id} already finished ({run.stop_reason})", code="run_finished"
        )
    run.cancel()
    await run.wait()
    return JSONResponse(run.as_json())


@routes.get("/v1/runs/{run_id}/events", response_model=None)
async def run_events(run_id: str, request: Request) -> Response:
    after = request.headers.get("last-event-id", "")
    first = int(after) + 1 if after.isdigit() else 0
    service = _service(request)
    run = service.runs.get(run_id)
    if run is not None:
        stream = _event_stream(run, first, service.runs.redactor)
    else:
        events = await _from_store(service, lambda store: stored_events(store, run_id))
        if events is None:
            return _unknown_run(run_id)
        stream = _stored_event_stream(events, first)
    return StreamingResponse(stream, media_type="text/event-stream", headers=_SSE_HEADERS)


def _start(
    request: Request,
    agent_name: str | None,
    conversation: Any,
    *,
    context: dict[str, Any] | None = None,
    conversation_id: str | None = None,
) -> ServedRun | Response:
    """Admit and start a run, or the response that says why not (503, 404, 429)."""
    service = _service(request)
    if service.draining:
        return error_response(
            503,
            "the server is shutting down; retry against another instance",
            kind="server_error",
            headers={"retry-after": "1"},
        )
    try:
        agent = service.agent(agent_name)
    except KeyError:
        served = ", ".join(sorted(service.agents))
        what = (
            f"agent {agent_name!r} is not" if agent_name else "no agent named, and more than one is"
        )
        return error_response(
            404,
            f"{what} served here (served: {served})",
            param="model",
            code="model_not_found",
        )
    try:
        ticket: Ticket = service.admission.admit()
    except Overloaded as busy:
        service.metrics.rejected.labels("overloaded").inc()
        return error_response(
            429,
            f"{busy}; retry after {busy.retry_after} s",
            kind="rate_limit_error",
            code="overloaded",
            headers={"retry-after": str(busy.retry_after)},
        )
    return service.start(
        agent,
        conversation,
        ticket=ticket,
        context=context,
        request_id=request.scope["state"]["request_id"],
        conversation_id=conversation_id,
    )


async def _from_store(service: Service, read: Any) -> Any:
    if service.store is None:
        return None
    return await asyncio.to_thread(read, service.store)


def _completion_id(run: ServedRun) -> str:
    return f"chatcmpl-{run.id.removeprefix('run_')[:24]}"


def _run_headers(run: ServedRun) -> dict[str, str]:
    headers = {"x-agentbench-run-id": run.id}
    if run.conversation_id:
        headers["x-conversation-id"] = run.conversation_id
    return headers


def _extension(run: ServedRun) -> dict[str, Any]:
    return {
        "run_id": run.id,
        "stop_reason": run.stop_reason,
        "request_id": run.request_id,
        "conversation_id": run.conversation_id,
    }


def _unknown_run(run_id: str) -> JSONResponse:
    return error_response(
        404, f"no run {run_id!r} on this server or in its store", code="run_not_found"
    )


def _failed(run: ServedRun, headers: dict[str, str]) -> JSONResponse:
    """A run that ended without an answer, as the HTTP error that says why."""
    error = run.error or {"type": "error", "message": "the run ended without an answer"}
    detail = f"{error['message']} (run {run.id}: agentbench traces show {run.id})"
    if run.stop_reason == "timeout":
        return error_response(504, detail, kind="timeout", headers=headers)
    if run.stop_reason == "cancelled":
        return error_response(503, detail, kind="server_error", code="cancelled", headers=headers)
    status = 502 if "Model" in error["type"] else 500
    return error_response(
        status, f"{error['type']}: {detail}", kind="server_error", headers=headers
    )


async def _finished_unless_disconnected(run: ServedRun, request: Request) -> bool:
    """Wait for the run; if the client goes away first, cancel it (stored as cancelled)."""
    finished = asyncio.ensure_future(run.wait())
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({finished, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    if finished.done():
        return True
    run.cancel()
    await finished
    return False


async def _disconnected(request: Request) -> None:
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


def _sse(data: dict[str, Any] | str) -> bytes:
    payload = data if isinstance(data, str) else orjson.dumps(data).decode()
    return f"data: {payload}\n\n".encode()


async def _with_keepalive(events: AsyncIterator[Any]) -> AsyncIterator[Any]:
    """The events, with None whenever KEEPALIVE_S pass without one (the stream's heartbeat).
    The pending `anext` is awaited again, never cancelled: cancelling would close `events`."""
    pending: asyncio.Future[Any] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(events))
            done, _ = await asyncio.wait({pending}, timeout=KEEPALIVE_S)
            if not done:
                yield None
                continue
            pending, finished = None, pending
            try:
                yield finished.result()
            except StopAsyncIteration:
                return
    finally:
        if pending is not None:
            pending.cancel()


async def _chat_stream(run: ServedRun, include_usage: bool) -> AsyncIterator[bytes]:
    """The answer as `chat.completion.chunk` events: each model turn's text as it streams
    (a model that does not stream: the final text in one chunk), then the finish chunk,
    usage if asked, and `[DONE]`. A client that disconnects cancels the run."""
    writer = ChunkWriter(_completion_id(run), run.agent)
    streamed = False
    try:
        yield _sse(writer.delta({"role": "assistant", "content": ""}))
        async for item in _with_keepalive(run.events_from(0)):
            if item is None:
                yield b": keep-alive\n\n"
            elif item[1].kind == "text_delta" and item[1].text:
                streamed = True
                yield _sse(writer.delta({"content": item[1].text}))
        if run.stop_reason not in _ANSWERED:
            error = run.error or {"type": "error", "message": "the run ended without an answer"}
            yield _sse(
                {
                    "error": {
                        "message": f"{error['message']} (run {run.id})",
                        "type": error["type"],
                        "param": None,
                        "code": None,
                    }
                }
            )
            return
        if not streamed and run.text:
            yield _sse(writer.delta({"content": run.text}))
        yield _sse(writer.delta({}, finish_reason(run.stop_reason or "completed")))
        if include_usage:
            yield _sse(writer.usage(run.usage))
        yield b"data: [DONE]\n\n"
    finally:
        run.cancel()  # a no-op once finished; the client went away otherwise


def _event_frame(index: int, kind: str, data: bytes) -> bytes:
    return b"id: %d\nevent: %s\ndata: %s\n\n" % (index, kind.encode(), data)


async def _event_stream(run: ServedRun, first: int, redactor: Redactor) -> AsyncIterator[bytes]:
    async for item in _with_keepalive(run.events_from(first)):
        if item is None:
            yield b": keep-alive\n\n"
        else:
            index, event = item
            yield _event_frame(index, event.kind, run.frame(index, redactor))
    yield _event_frame(len(run.events), "done", orjson.dumps(run.as_json()))


async def _stored_event_stream(events: list[tuple[str, bytes]], first: int) -> AsyncIterator[bytes]:
    for index, (kind, data) in enumerate(events):
        if index >= first:
            yield _event_frame(index, kind, data)
    yield _event_frame(len(events), "done", b"{}")
