"""A real OpenAI-compatible HTTP server on 127.0.0.1 for tests and examples.

It speaks `/v1/chat/completions` (plain JSON and server-sent-event streams) and `/v1/models`,
answering from a script — the same items `ScriptedModel` takes, plus faults: an HTTP error with
headers, a delay, a raw body. It records every request it received (body and headers), so a
test can assert what the real openai SDK actually put on the wire. Streams split text into
words and tool-call arguments into small fragments, as real providers do.
"""

from __future__ import annotations

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
from agentbench.runtime.models import ChatResponse, to_response


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


@dataclass
class ReceivedRequest:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


Responder = Callable[[dict[str, Any]], Any]


class OpenAICompatibleServer:
    """Start with `with OpenAICompatibleServer(script) as server:`; use `server.base_url`."""

    def __init__(
        self,
        script: Iterable[Any] = (),
        *,
        responder: Responder | None = None,
        model: str = "test-model",
        fragment_chars: int = 7,
    ) -> None:
        self._script: deque[Any] = deque(script)
        self._responder = responder
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

    def _next_item(self, body: dict[str, Any]) -> Any:
        with self._lock:
            if self._script:
                return self._script.popleft()
        if self._responder is not None:
            return self._responder(body)
        return HTTPFault(
            400,
            f"agentbench test server: no scripted response left for request #{len(self.requests)}",
        )

    def _record(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append(ReceivedRequest(path, headers, body))


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
        self.owner._record(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send_json(
                404, {"error": {"message": f"no route {self.path}", "type": "not_found"}}
            )
            return
        item = self.owner._next_item(body)
        # A client that gave up (a timeout test) leaves nobody to answer.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self._answer(item, body)

    def _answer(self, item: Any, body: dict[str, Any]) -> None:
        if callable(item) and not isinstance(item, type) and not inspect.isclass(item):
            item = item(body)
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
        # Like real providers, answer in the name of the model that was asked for.
        response = to_response(item, body, str(body.get("model") or self.owner.model))
        if body.get("stream"):
            self._send_stream(response, body)
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

    def _send_stream(self, response: ChatResponse, body: dict[str, Any]) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("connection", "close")
        self.end_headers()
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        for chunk in stream_chunks(
            response, self.owner.model, self.owner.fragment_chars, include_usage
        ):
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True
