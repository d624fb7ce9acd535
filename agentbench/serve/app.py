"""`create_app(service)`: the served agents as an OpenAI-compatible API plus a runs API.

    POST /v1/chat/completions     the agent as a "model" (stream: true for SSE chunks)
    POST /v1/runs                 202 + Location; GET /v1/runs/{id}; DELETE cancels
    GET  /v1/runs/{id}/events     the run's typed events as SSE, from the first
    GET  /v1/models, /healthz, /metrics

Every request runs as a `ServedRun` recorded in the service's store with its request id,
conversation id, code version and caller, so production traffic feeds `agentbench replay`.
A caller sees, streams and cancels only the runs it started (an admin key reads them all);
any other id — another caller's, a run the store holds that this server did not serve, one
that does not exist — is answered the same 404, so ids cannot be probed.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException

from agentbench.errors import InstructionsError
from agentbench.serve.admission import Overloaded, Ticket
from agentbench.serve.callers import Caller
from agentbench.serve.chat import ChatRequest, RunRequest, completion
from agentbench.serve.errors import error_response, http_error, validation_error
from agentbench.serve.metrics import CONTENT_TYPE
from agentbench.serve.middleware import BodyLimit, Callers, RequestIds
from agentbench.serve.runs import ServedRun
from agentbench.serve.service import Service
from agentbench.serve.store_health import RETRY_AFTER_S, fault_code, told_to_clients
from agentbench.serve.stored import stored_events, stored_own_run, stored_run
from agentbench.serve.streams import (
    ANSWERED,
    SSE_HEADERS,
    chat_stream,
    completion_id,
    event_stream,
    extension,
    stored_event_stream,
)
from agentbench.trace.errors import StorageFaultError
from agentbench.trace.redaction.redactor import Redactor


def create_app(service: Service) -> FastAPI:
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        await service.shutdown()

    app = FastAPI(title="agentbench serve", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.service = service
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(HTTPException, http_error)
    # Added innermost first: ids and metrics see every answer, callers come before the body.
    app.add_middleware(BodyLimit, limit=service.settings.max_body_bytes, metrics=service.metrics)
    app.add_middleware(Callers, keys=service.settings.keys, metrics=service.metrics)
    app.add_middleware(RequestIds, metrics=service.metrics)
    app.include_router(routes)
    return app


routes = APIRouter()


def _service(request: Request) -> Service:
    return request.app.state.service


def _caller(request: Request) -> Caller:
    return request.scope["state"]["caller"]  # type: ignore[no-any-return]


@routes.get("/healthz", response_model=None)
async def healthz(request: Request) -> Response:
    """Liveness and readiness: 503 while draining or while the store cannot keep runs, so a
    load balancer sends no more."""
    service = _service(request)
    fault = service.store_health.refusal()
    status = "draining" if service.draining else fault_code(fault) if fault else "ok"
    body = {
        "status": status,
        "agents": sorted(service.agents),
        "running": service.admission.running,
        "queued": service.admission.waiting,
    }
    if fault is not None:
        body["store"] = told_to_clients(fault)
    return JSONResponse(body, status_code=200 if status == "ok" else 503)


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
        context=body.agentbench.context,
        conversation_id=request.headers.get("x-conversation-id") or body.user,
    )
    if isinstance(started, Response):
        return started
    run = started
    headers = _run_headers(run)
    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        return StreamingResponse(
            chat_stream(run, include_usage),
            media_type="text/event-stream",
            headers={**headers, **SSE_HEADERS},
        )
    if not await _finished_unless_disconnected(run, request):
        return Response(status_code=499, headers=headers)  # nobody is listening
    if run.stop_reason not in ANSWERED:
        return _failed(run, headers)
    return JSONResponse(
        completion(
            completion_id=completion_id(run),
            agent=run.agent,
            text=run.text,
            stop_reason=run.stop_reason or "error",
            usage=run.usage,
            extra=extension(run),
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
    service, caller = _service(request), _caller(request)
    run = service.runs.get(run_id, caller)
    if run is not None:
        return JSONResponse(run.as_json())
    stored = await _from_store(
        service, lambda store: stored_run(store, run_id, caller, Redactor(service.redaction))
    )
    return _unknown_run(run_id) if stored is None else JSONResponse(stored)


@routes.delete("/v1/runs/{run_id}", response_model=None)
async def cancel_run(run_id: str, request: Request) -> Response:
    service, caller = _service(request), _caller(request)
    run = service.runs.own(run_id, caller)
    if run is None:  # not running here: one of its own that an earlier server ran, or 404
        stored = await _from_store(service, lambda store: stored_own_run(store, run_id, caller))
        if stored is None:
            return _unknown_run(run_id)
        return _not_running(run_id, stored["status"], stored["stop_reason"])
    if run.done:
        return _not_running(run_id, run.status, run.stop_reason)
    run.cancel()
    await run.wait()
    return JSONResponse(run.as_json())


@routes.get("/v1/runs/{run_id}/events", response_model=None)
async def run_events(run_id: str, request: Request) -> Response:
    after = request.headers.get("last-event-id", "")
    first = int(after) + 1 if after.isdigit() else 0
    service, caller = _service(request), _caller(request)
    run = service.runs.get(run_id, caller)
    if run is not None:
        return StreamingResponse(
            event_stream(run, first), media_type="text/event-stream", headers=SSE_HEADERS
        )

    def read(store: Any) -> tuple[list[tuple[str, bytes]], dict[str, Any]] | None:
        redactor = Redactor(service.redaction)
        events = stored_events(store, run_id, caller, redactor)
        outcome = stored_run(store, run_id, caller, redactor)
        return None if events is None or outcome is None else (events, outcome)

    found = await _from_store(service, read)
    if found is None:
        return _unknown_run(run_id)
    return StreamingResponse(
        stored_event_stream(found[0], first, found[1]),
        media_type="text/event-stream",
        headers=SSE_HEADERS,
    )


def _start(
    request: Request,
    agent_name: str | None,
    conversation: Any,
    *,
    context: dict[str, Any],
    conversation_id: str | None = None,
) -> ServedRun | Response:
    """Admit and start a run, or the response that says why not (503, 404, 400, 429)."""
    service = _service(request)
    if service.draining:
        service.metrics.rejected.labels("draining").inc()
        return error_response(
            503,
            "the server is shutting down; retry against another instance",
            kind="server_error",
            code="draining",
            headers={"retry-after": "1", "connection": "close"},
        )
    try:
        agent = service.agent(agent_name)
    except KeyError:
        return _no_agent(service, agent_name)
    missing = service.missing_variable(agent, context)
    if missing is not None:
        return _missing_variable(missing)
    fault = service.store_health.refusal()
    if fault is not None:
        service.metrics.rejected.labels("store_fault").inc()
        return _store_refuses(
            fault, f"{told_to_clients(fault)}: no run is started, since none could be kept"
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
        caller=_caller(request),
        context=context,
        request_id=request.scope["state"]["request_id"],
        conversation_id=conversation_id,
    )


def _no_agent(service: Service, agent_name: str | None) -> JSONResponse:
    served = ", ".join(sorted(service.agents))
    what = f"agent {agent_name!r} is not" if agent_name else "no agent named, and more than one is"
    return error_response(
        404, f"{what} served here (served: {served})", param="model", code="model_not_found"
    )


def _missing_variable(error: InstructionsError) -> JSONResponse:
    """400 naming the context variable the agent's instructions need (a client's mistake:
    the openai SDK does not retry a 400, where it retried the 500 this used to be)."""
    where = f"agentbench.context.{error.variable}" if error.variable else "agentbench.context"
    return error_response(
        400,
        f'{error} — chat clients pass it as "agentbench": {{"context": {{...}}}} (the '
        'openai SDK: extra_body=...), POST /v1/runs as "context"',
        param=where,
        code="missing_context_variable",
    )


async def _from_store(service: Service, read: Callable[[Any], Any]) -> Any:
    if service.store is None:
        return None
    return await asyncio.to_thread(read, service.store)


def _run_headers(run: ServedRun) -> dict[str, str]:
    headers = {"x-agentbench-run-id": run.id}
    if run.conversation_id:
        headers["x-conversation-id"] = run.conversation_id
    return headers


def _unknown_run(run_id: str) -> JSONResponse:
    return error_response(
        404,
        f"no run {run_id[:100]!r} that this key may see (a run is seen by the key that "
        "started it, and by an admin key)",
        code="run_not_found",
    )


def _not_running(run_id: str, status: str, stop_reason: str | None) -> JSONResponse:
    """409: the run is over, so there is nothing to cancel (whether this server ran it or
    one before it: the answer does not depend on a restart)."""
    if status == "incomplete":
        why = "its server stopped before it finished (stored as incomplete)"
    else:
        why = f"it already finished ({stop_reason})"
    return error_response(409, f"run {run_id} cannot be cancelled: {why}", code="run_finished")


def _store_refuses(
    fault: StorageFaultError, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    """503: the store cannot keep runs now; retrying once it can is the client's way on."""
    return error_response(
        503,
        f"{message}; retry after {RETRY_AFTER_S} s",
        kind="server_error",
        code=fault_code(fault),
        headers={**(headers or {}), "retry-after": str(RETRY_AFTER_S)},
    )


def _failed(run: ServedRun, headers: dict[str, str]) -> JSONResponse:
    """A run that ended without an answer, as the HTTP error that says why."""
    if run.unkept is not None:  # never "traces show": the store does not have it
        message = (
            f"{told_to_clients(run.unkept)}: run {run.id} ran (its tools too) but could not "
            "be kept, so its answer is not given"
        )
        return _store_refuses(run.unkept, message, headers)
    error = run.error or {"type": "error", "message": "the run ended without an answer"}
    detail = f"{error['message']} (run {run.id}: agentbench traces show {run.id})"
    if run.stop_reason == "timeout":
        return error_response(504, detail, kind="timeout", headers=headers)
    if run.stop_reason == "cancelled":
        return error_response(503, detail, kind="server_error", code="cancelled", headers=headers)
    if error["type"] == InstructionsError.__name__:  # a handoff target's instructions
        return error_response(
            400,
            detail,
            code="missing_context_variable",
            param="agentbench.context",
            headers=headers,
        )
    # The runner words an exception of another library as "Type: message" already.
    named = detail if detail.startswith(f"{error['type']}:") else f"{error['type']}: {detail}"
    if run.model_failed or "Model" in error["type"]:
        return error_response(502, named, kind="server_error", code="model_failed", headers=headers)
    return error_response(500, named, kind="server_error", code="agent_failed", headers=headers)


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
