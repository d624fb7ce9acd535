"""A real OpenAI-compatible HTTP server on 127.0.0.1 for tests and examples.

It speaks `/v1/chat/completions` (plain JSON and server-sent-event streams) and `/v1/models`,
answering from a script — the same items `ScriptedModel` takes, plus faults: an HTTP error with
headers, a delay, a raw body, a stream cut off part-way (`CutStream`) — and, once the script
is used up, from `responder`, a function of the same shape `FunctionModel` takes (`fn(request)`
or `fn(request, info)`). It records every request it received (body and headers), so a test
can assert what the real openai SDK actually put on the wire. Streams split text into words
and tool-call arguments into small fragments, as real providers do.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agentbench.runtime.completions import completion_body, stream_chunks
from agentbench.runtime.models import (
    CallInfo,
    ChatResponse,
    ModelFunction,
    model_function,
    to_response,
)


@dataclass(frozen=True)
class HTTPFault:
    """Answer with an HTTP error status, e.g. `HTTPFault(429, headers={"retry-after": "0"})`."""

    status: int
    message: str = "injected fault"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Delay:
    """Wait `seconds` before answering with `then` (a slow provider)."""

    seconds: float
    then: Any = "(delayed reply)"


@dataclass(frozen=True)
class RawBody:
    """Answer with these exact bytes, e.g. a body that is not JSON."""

    body: str
    status: int = 200
    content_type: str = "application/json"


@dataclass(frozen=True)
class CutStream:
    """Start answering `reply`, then close the connection part-way (a dropped or cut stream).

    A stream sends its first `after_chunks` chunks (0: an empty 200 event stream; None: every
    chunk before the finish_reason), then the finish_reason chunk and usage only if `finish`,
    then `data: [DONE]` only if `done`. `partial=True` adds the first half of the next event,
    cut mid-JSON. The body is close-delimited, so the client sees a clean end of stream;
    `chunked=True` sends it with chunked transfer encoding and never sends the last chunk, so
    the client sees a broken connection instead (the openai SDK raises `APIConnectionError`).
    A request that does not stream gets half of its JSON body before the connection closes.
    """

    after_chunks: int | None = None
    finish: bool = False
    done: bool = False
    partial: bool = False
    chunked: bool = False
    reply: Any = "The whole answer, never delivered in full."


@dataclass
class ReceivedRequest:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


# fn(request) or fn(request, info), sync or async: model_function checks it when it is passed.
Responder = Callable[..., Any]


class OpenAICompatibleServer:
    """Start with `with OpenAICompatibleServer(script) as server:`; use `server.base_url`.

    Requests are answered from `script` first, then by `responder(request)` or
    `responder(request, info)` (`info` a CallInfo), exactly as FunctionModel calls its function.
    """

    def __init__(
        self,
        script: Iterable[Any] = (),
        *,
        responder: Responder | None = None,
        model: str = "test-model",
        fragment_chars: int = 7,
    ) -> None:
        self._script: deque[Any] = deque(script)
        self._responder: ModelFunction | None = (
            None if responder is None else model_function(responder, "responder")
        )
        self.model = model
        self.fragment_chars = fragment_chars
        self.requests: list[ReceivedRequest] = []
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------
    def start(self) -> OpenAICompatibleServer:
        server = self

        class Handler(_Handler):
            owner = server

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        # A short poll interval keeps stop() quick (shutdown waits for one poll).
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.02},
            name="agentbench-test-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> OpenAICompatibleServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the server is not running; use it as a context manager")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    # -- script ----------------------------------------------------------------------------
    def add(self, *items: Any) -> OpenAICompatibleServer:
        with self._lock:
            self._script.extend(items)
        return self

    @property
    def remaining(self) -> int:
        return len(self._script)

    def _next_item(self, body: dict[str, Any], info: CallInfo) -> Any:
        with self._lock:
            if self._script:
                return self._script.popleft()
        if self._responder is not None:
            return self._responder(body, info)
        return HTTPFault(
            400,
            f"agentbench test server: no scripted response left for request #{len(self.requests)}",
        )

    def _record(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> CallInfo:
        with self._lock:
            self.requests.append(ReceivedRequest(path, headers, body))
            index = len(self.requests) - 1
        tools = [t.get("function", {}).get("name", "") for t in body.get("tools") or ()]
        return CallInfo(index=index, model=str(body.get("model") or self.model), tools=tools)


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


class _Handler(BaseHTTPRequestHandler):
    owner: OpenAICompatibleServer
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes; with Nagle's algorithm on, the client's
    # delayed ACK would add ~40 ms to every response.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        return

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._send_json(
                200, {"object": "list", "data": [{"id": self.owner.model, "object": "model"}]}
            )
        else:
            self._send_json(
                404, {"error": {"message": f"no route {self.path}", "type": "not_found"}}
            )

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError as exc:
            self._send_json(400, {"error": {"message": f"request body is not JSON: {exc}"}})
            return
        info = self.owner._record(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send_json(
                404, {"error": {"message": f"no route {self.path}", "type": "not_found"}}
            )
            return
        item = self.owner._next_item(body, info)
        # A client that gave up (a timeout test) leaves nobody to answer.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self._answer(item, body, info)

    def _answer(self, item: Any, body: dict[str, Any], info: CallInfo) -> None:
        if callable(item) and not inspect.isclass(item):
            item = model_function(item, "a scripted function")(body, info)
        if inspect.isawaitable(item):
            item = asyncio.run(_awaited(item))  # a handler thread has no event loop of its own
        while isinstance(item, Delay):
            time.sleep(item.seconds)
            item = item.then
        if isinstance(item, HTTPFault):
            payload = {"error": {"message": item.message, "type": "injected", "code": item.status}}
            self._send_json(item.status, payload, item.headers)
            return
        if isinstance(item, RawBody):
            self._send_bytes(item.status, item.body.encode(), item.content_type)
            return
        cut = item if isinstance(item, CutStream) else None
        # Like real providers, answer in the name of the model that was asked for.
        model = str(body.get("model") or self.owner.model)
        response = to_response(cut.reply if cut else item, body, model)
        if body.get("stream"):
            self._send_stream(response, body, cut)
        elif cut is not None:
            self._send_cut_json(response)
        else:
            self._send_json(200, completion_body(response, self.owner.model))

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        self._send_bytes(status, json.dumps(payload).encode(), "application/json", headers)

    def _send_bytes(
        self, status: int, data: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_cut_json(self, response: ChatResponse) -> None:
        data = json.dumps(completion_body(response, self.owner.model)).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data[: len(data) // 2])
        self.wfile.flush()
        self.close_connection = True

    def _send_stream(
        self, response: ChatResponse, body: dict[str, Any], cut: CutStream | None = None
    ) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("connection", "close")
        if cut is not None and cut.chunked:
            self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        chunks = list(
            stream_chunks(response, self.owner.model, self.owner.fragment_chars, include_usage)
        )
        events = [f"data: {json.dumps(chunk)}\n\n" for chunk in chunks]
        if cut is not None:
            events = _cut_events(events, chunks, cut)
        else:
            events.append("data: [DONE]\n\n")
        for event in events:
            data = event.encode()
            if cut is not None and cut.chunked:
                data = b"%x\r\n%s\r\n" % (len(data), data)
            self.wfile.write(data)
            self.wfile.flush()
        self.close_connection = True


def _cut_events(events: list[str], chunks: list[dict[str, Any]], cut: CutStream) -> list[str]:
    """The events `cut` lets through, in order; see `CutStream`."""
    # The answer's chunks come first; the finish_reason chunk (the last one with a choice) and
    # the usage chunk close it.
    end = max(i for i, chunk in enumerate(chunks) if chunk["choices"])
    answer, tail = events[:end], events[end:]
    count = len(answer) if cut.after_chunks is None else min(cut.after_chunks, len(answer))
    kept = answer[:count]
    if cut.partial and count < len(answer):
        kept.append(answer[count][: len(answer[count]) // 2])
    if cut.finish:
        kept += tail
    if cut.done:
        kept.append("data: [DONE]\n\n")
    return kept
