"""The server's event streams (SSE): a streamed chat answer as `chat.completion.chunk`s, and
a run's typed events for `GET /v1/runs/{id}/events` — live, or read back from the store.

Everything sent is redacted (see `redaction`); a comment line every `KEEPALIVE_S` keeps
proxies from closing a stream while the agent works.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from agentbench.serve.chat import ChunkWriter, finish_reason
from agentbench.serve.redaction import dumps
from agentbench.serve.runs import ServedRun

KEEPALIVE_S = 15.0
SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}
# Stop reasons whose answer is still an answer (possibly cut short by a brake).
ANSWERED = frozenset(
    {"completed", "business_stop", "handoff", "max_iterations", "loop_detected", "token_budget"}
)


def completion_id(run: ServedRun) -> str:
    return f"chatcmpl-{run.id.removeprefix('run_')[:24]}"


def extension(run: ServedRun) -> dict[str, Any]:
    """The `agentbench` field of an answer: the run, why it stopped, its ids."""
    return {
        "run_id": run.id,
        "stop_reason": run.stop_reason,
        "stop_detail": run.stop_detail,
        "request_id": run.request_id,
        "conversation_id": run.conversation_id,
    }


def _sse(data: dict[str, Any] | str) -> bytes:
    payload = data.encode() if isinstance(data, str) else dumps(data)
    return b"data: " + payload + b"\n\n"


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


async def chat_stream(run: ServedRun, include_usage: bool) -> AsyncIterator[bytes]:
    """The answer as `chat.completion.chunk` events: each model turn's text as it streams
    (a model that does not stream: the final text in one chunk), then the finish chunk with
    the `agentbench` field, usage if asked, and `[DONE]`. A client that disconnects cancels
    the run."""
    writer = ChunkWriter(completion_id(run), run.agent)
    streamed = False
    try:
        yield _sse(writer.delta({"role": "assistant", "content": ""}))
        async for item in _with_keepalive(run.events_from(0)):
            if item is None:
                yield b": keep-alive\n\n"
            elif item[1].kind == "text_delta":
                text = run.streamed_text(item[0])
                if text:
                    streamed = True
                    yield _sse(writer.delta({"content": text}))
        if run.stop_reason not in ANSWERED:
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
        reason = finish_reason(run.stop_reason or "completed")
        yield _sse(writer.delta({}, reason, extension(run)))
        if include_usage:
            yield _sse(writer.usage(run.usage))
        yield b"data: [DONE]\n\n"
    finally:
        run.cancel()  # a no-op once finished; the client went away otherwise


def _event_frame(index: int, kind: str, data: bytes) -> bytes:
    return b"id: %d\nevent: %s\ndata: %s\n\n" % (index, kind.encode(), data)


async def event_stream(run: ServedRun, first: int) -> AsyncIterator[bytes]:
    """A live run's events from `first`, then a `done` frame holding the run's outcome."""
    async for item in _with_keepalive(run.events_from(first)):
        if item is None:
            yield b": keep-alive\n\n"
        else:
            index, event = item
            yield _event_frame(index, event.kind, run.frame(index))
    yield _event_frame(len(run.events), "done", dumps(run.as_json()))


async def stored_event_stream(
    events: list[tuple[str, bytes]], first: int, outcome: dict[str, Any]
) -> AsyncIterator[bytes]:
    """A stored run's events from `first`, then `done` with its outcome."""
    for index, (kind, data) in enumerate(events):
        if index >= first:
            yield _event_frame(index, kind, data)
    yield _event_frame(len(events), "done", dumps(outcome))
