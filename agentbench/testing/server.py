"""A real OpenAI-compatible HTTP server on 127.0.0.1 for tests and examples.

It speaks `/v1/chat/completions` and the Responses API's `/v1/responses` (each as plain JSON
and as server-sent-event streams) and `/v1/models`, answering from a script — the same items
`ScriptedModel` takes, plus faults: an HTTP error with headers, a delay, a raw body, a stream
cut off part-way (`CutStream`), an answer that trickles in piece by piece (`Trickle`) — and,
once the script is used up, from `responder`, a function of the same shape `FunctionModel`
takes (`fn(request)` or `fn(request, info)`). It records every request it received (body and
headers), so a test can assert what the real openai SDK actually put on the wire. Streams
split text into words and tool-call arguments into small fragments, as real providers do.

A Responses request is answered from the same script and `responder`, which see it normalized
to the chat-completions shape (`agentbench.boundary.responses_api.normalize_request`: its
`instructions` a system message, its input items chat messages, its function tools in chat's
shape), so one reference policy serves both APIs; `requests` keeps the body as it was sent.
Its answer is a `response` object, or the API's event stream (`response.created` …
`response.completed`). The faults apply to it as to chat: a `CutStream` sends its first
`after_chunks` events and the closing `response.completed` only if `finish` (`done` has no
meaning here: the Responses API ends a stream with no `[DONE]`). Anthropic's Messages API
(`/v1/messages`; `anthropic_base_url` is the root its SDKs take) is answered the same way: a
`message` object, or its events (`message_start` … `message_stop`, with `event:` lines); a
`CutStream` sends the closing `message_delta` and `message_stop` only if `finish`, and an
`HTTPFault` comes in Anthropic's error shape. The quirks below are chat's.

`quirks=` makes it behave like a particular real server. `"llama_cpp"` is all of
llama-cpp-python's server (0.3.x, `--chat_format chatml-function-calling`), each also
available alone:

* `rejects_null_content`: an assistant message with `content: null` fails its request model
  (`content: NotRequired[str]`). FastAPI would answer 422, but llama-cpp-python's route class
  catches every exception, FastAPI's `RequestValidationError` included, and answers HTTP 500
  `{"error": {"message": str(error), "type": "internal_server_error", ...}}`, the message
  being pydantic's whole list of union-member errors; the same body every time.
* `repeats_stream_names`: every chunk of a streamed tool call repeats its id, type and
  function name next to the piece of arguments.
* `empty_stream_for_auto_tool_choice`: a streamed request with tools and `tool_choice` auto or
  absent whose answer is a tool call gets a 200 event stream with no event at all (the server
  raises "Automatic streaming tool choice is not supported" inside its stream). The scripted
  answer is not used up: the model would answer the same request the same way again. The
  connection stays open, and the next request sent on it is dropped unanswered (the client
  sees "Server disconnected without sending a response").
* `no_stream_usage`: streams never end with a usage chunk (`stream_options` is not in its
  request model), whatever `include_usage` says.
* `ignores_tools_without_tool_choice`: with `tools` but no `tool_choice` (OpenAI's default is
  auto) the chat format renders a plain chat prompt and the model can only answer text, so a
  scripted tool call comes back as the text the model then writes, `functions.NAME:\nARGS`
  (seen from Gemma 3 270M), with finish_reason `stop`. Send `tool_choice: auto` to get tools.

`"openai_reasoning"` is OpenAI's reasoning models' one quirk here, `rejects_max_tokens`: a
request with `max_tokens` gets HTTP 400 `unsupported_parameter`, asking for
`max_completion_tokens` instead (OpenAI's own body). Either limit is honoured as real servers
do: a text answer longer than the limit (counted in words) is cut there, finish_reason `length`.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agentbench.boundary import messages_api, responses_api
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


@dataclass(frozen=True)
class Trickle:
    """Answer with `reply`, `interval_s` between one piece and the next: a model generating
    slowly (a stream's chunks; a plain body's bytes in `pieces` parts). Each wait is short, so
    a timeout on each read never fires; only a deadline on the whole answer does."""

    interval_s: float
    reply: Any = "A slow answer, one piece at a time."
    pieces: int = 8


LLAMA_CPP_QUIRKS = (
    "rejects_null_content",
    "repeats_stream_names",
    "empty_stream_for_auto_tool_choice",
    "no_stream_usage",
    "ignores_tools_without_tool_choice",
)
OPENAI_REASONING_QUIRKS = ("rejects_max_tokens",)
# Each quirk by its name, and each named server as the quirks it has.
QUIRKS: dict[str, tuple[str, ...]] = {
    **{quirk: (quirk,) for quirk in (*LLAMA_CPP_QUIRKS, *OPENAI_REASONING_QUIRKS)},
    "llama_cpp": LLAMA_CPP_QUIRKS,
    "openai_reasoning": OPENAI_REASONING_QUIRKS,
}
# OpenAI's answer to max_tokens sent to a reasoning model, word for word.
_MAX_TOKENS_REFUSED = {
    "error": {
        "message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
        "Use 'max_completion_tokens' instead.",
        "type": "invalid_request_error",
        "param": "max_tokens",
        "code": "unsupported_parameter",
    }
}


def resolve_quirks(names: Iterable[str]) -> frozenset[str]:
    """The individual quirks `names` stand for; a ValueError names any unknown one."""
    if isinstance(names, str):  # quirks="llama_cpp" means the one name, not its letters
        names = [names]
    quirks: set[str] = set()
    for name in names:
        if name not in QUIRKS:
            raise ValueError(
                f"OpenAICompatibleServer: unknown quirk {name!r}; valid quirks: "
                + ", ".join(sorted(QUIRKS))
            )
        quirks.update(QUIRKS[name])
    return frozenset(quirks)


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
        quirks: Iterable[str] = (),
    ) -> None:
        self.quirks = resolve_quirks(quirks)
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

    @property
    def anthropic_base_url(self) -> str:
        """The server's root, as Anthropic's SDKs take it (they add `/v1/messages`)."""
        return self.base_url.removesuffix("/v1")

    # -- script ----------------------------------------------------------------------------
    def add(self, *items: Any) -> OpenAICompatibleServer:
        with self._lock:
            self._script.extend(items)
        return self

    @property
    def remaining(self) -> int:
        return len(self._script)

    def _put_back(self, item: Any) -> None:
        """Serve `item` again for the next request (the model's answer to the same request)."""
        with self._lock:
            self._script.appendleft(item)

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

    def _record(
        self,
        path: str,
        headers: dict[str, str],
        body: dict[str, Any],
        request: dict[str, Any] | None = None,
    ) -> CallInfo:
        """Keep the body as it was sent; `info` describes `request`, its chat-shaped form
        (the body itself for a chat request)."""
        with self._lock:
            self.requests.append(ReceivedRequest(path, headers, body))
            index = len(self.requests) - 1
        request = body if request is None else request
        tools = [t.get("function", {}).get("name", "") for t in request.get("tools") or ()]
        return CallInfo(index=index, model=str(request.get("model") or self.model), tools=tools)


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
        if self._drops_next_request:
            # llama.cpp after a stream that failed inside: the next request on the connection
            # is read and dropped, and the connection closed without an answer.
            with contextlib.suppress(json.JSONDecodeError):
                headers = {k.lower(): v for k, v in self.headers.items()}
                self.owner._record(self.path, headers, json.loads(raw or b"{}"))
            self.close_connection = True
            return
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError as exc:
            self._send_json(400, {"error": {"message": f"request body is not JSON: {exc}"}})
            return
        headers = {k.lower(): v for k, v in self.headers.items()}
        if self.path.rstrip("/").endswith("/responses"):
            self._answer_responses(headers, body)
            return
        if self.path.split("?", 1)[0].rstrip("/").endswith("/v1/messages"):
            self._answer_messages(headers, body)
            return
        info = self.owner._record(self.path, headers, body)
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send_json(
                404, {"error": {"message": f"no route {self.path}", "type": "not_found"}}
            )
            return
        # A client that gave up (a timeout test) leaves nobody to answer.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            if "rejects_null_content" in self.owner.quirks:
                errors = _null_content_errors(body)
                if errors:
                    self._send_json(500, _llama_cpp_internal_error(errors, self.path))
                    return
            if "rejects_max_tokens" in self.owner.quirks and "max_tokens" in body:
                self._send_json(400, _MAX_TOKENS_REFUSED)
                return
            self._answer(self.owner._next_item(body, info), body, info)

    def _answer_responses(self, headers: dict[str, str], body: Any) -> None:
        """A Responses API request: answered from the script as its chat-shaped form."""
        try:
            request = responses_api.normalize_request(body)
        except responses_api.ResponsesFormatError as exc:
            self.owner._record(self.path, headers, body if isinstance(body, dict) else {})
            error = {
                "message": f"not a Responses API request: {exc}",
                "type": "invalid_request_error",
            }
            self._send_json(400, {"error": error})
            return
        info = self.owner._record(self.path, headers, body, request)
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            item = self.owner._next_item(request, info)
            self._answer(item, request, info, responses_stream=bool(body.get("stream")))

    def _answer_messages(self, headers: dict[str, str], body: Any) -> None:
        """An Anthropic Messages request: answered from the script as its chat-shaped form."""
        try:
            request = messages_api.normalize_request(body)
        except messages_api.MessagesFormatError as exc:
            self.owner._record(self.path, headers, body if isinstance(body, dict) else {})
            self._send_bytes(
                400,
                messages_api.error_body(f"not a Messages API request: {exc}"),
                "application/json",
            )
            return
        info = self.owner._record(self.path, headers, body, request)
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            item = self.owner._next_item(request, info)
            self._answer(item, request, info, messages_stream=bool(body.get("stream")))

    def _answer(
        self,
        item: Any,
        body: dict[str, Any],
        info: CallInfo,
        responses_stream: bool | None = None,
        messages_stream: bool | None = None,
    ) -> None:
        """Answer `item` to `body` (chat-shaped); `responses_stream` (`messages_stream`) is
        None but for a Responses (Messages) request, then whether it asked for a stream."""
        if callable(item) and not inspect.isclass(item):
            item = model_function(item, "a scripted function")(body, info)
        if inspect.isawaitable(item):
            item = asyncio.run(_awaited(item))  # a handler thread has no event loop of its own
        while isinstance(item, Delay):
            time.sleep(item.seconds)
            item = item.then
        if isinstance(item, HTTPFault):
            self._send_json(item.status, _fault_body(item, messages_stream), item.headers)
            return
        if isinstance(item, RawBody):
            self._send_bytes(item.status, item.body.encode(), item.content_type)
            return
        cut = item if isinstance(item, CutStream) else None
        trickle = item if isinstance(item, Trickle) else None
        if trickle is not None:
            item = trickle.reply
        # Like real providers, answer in the name of the model that was asked for.
        model = str(body.get("model") or self.owner.model)
        response = _within_limit(to_response(cut.reply if cut else item, body, model), body)
        self._pause_s = trickle.interval_s if trickle is not None else 0.0
        if responses_stream is not None:
            self._send_responses_answer(response, responses_stream, cut, trickle)
            return
        if messages_stream is not None:
            self._send_messages_answer(response, messages_stream, cut, trickle)
            return
        if self._ignores_tools(response, body):
            response = _tools_as_text(response)
        if cut is None and self._cannot_stream(response, body):
            self.owner._put_back(item)
            self._send_failed_stream()
            return
        if body.get("stream"):
            self._send_stream(response, body, cut)
        else:
            self._send_body(completion_body(response, self.owner.model), cut, trickle)

    def _send_responses_answer(
        self,
        response: ChatResponse,
        stream: bool,
        cut: CutStream | None,
        trickle: Trickle | None,
    ) -> None:
        response_id = f"resp_{uuid.uuid4().hex[:24]}"
        if not stream:
            body = responses_api.response_body(response, self.owner.model, response_id=response_id)
            self._send_body(body, cut, trickle)
            return
        events = responses_api.stream_events(
            response,
            self.owner.model,
            response_id=response_id,
            fragment_chars=self.owner.fragment_chars,
        )
        texts = [responses_api.sse_text([event]) for event in events]
        if cut is not None:  # `response.completed` closes the answer
            texts = _cut_closed_stream(texts, cut, closing=1)
        self._send_stream_events(texts, chunked=cut is not None and cut.chunked)

    def _send_messages_answer(
        self,
        response: ChatResponse,
        stream: bool,
        cut: CutStream | None,
        trickle: Trickle | None,
    ) -> None:
        message_id = f"msg_{uuid.uuid4().hex[:24]}"
        body = messages_api.message_body(response, self.owner.model, message_id=message_id)
        if not stream:
            self._send_body(body, cut, trickle)
            return
        events = messages_api.stream_events(body, fragment_chars=self.owner.fragment_chars)
        texts = [messages_api.sse_text([event]) for event in events]
        if cut is not None:  # `message_delta` and `message_stop` close the answer
            texts = _cut_closed_stream(texts, cut, closing=2)
        self._send_stream_events(texts, chunked=cut is not None and cut.chunked)

    def _send_body(
        self, payload: dict[str, Any], cut: CutStream | None, trickle: Trickle | None
    ) -> None:
        """A plain JSON answer: whole, half of it (`cut`), or in pieces (`trickle`)."""
        if cut is not None:
            self._send_cut_json(payload)
        elif trickle is not None:
            self._send_trickled_json(payload, trickle)
        else:
            self._send_json(200, payload)

    def _cannot_stream(self, response: ChatResponse, body: dict[str, Any]) -> bool:
        """llama.cpp cannot stream a tool call it chose itself (`tool_choice` auto or absent)."""
        return (
            "empty_stream_for_auto_tool_choice" in self.owner.quirks
            and bool(body.get("stream") and body.get("tools") and response.tool_calls)
            and body.get("tool_choice") in (None, "auto")
        )

    _drops_next_request = False

    def _send_failed_stream(self) -> None:
        """A 200 event stream that ends before its first event, as llama.cpp's does when its
        stream fails inside: the body ends cleanly, the connection stays open (keep-alive),
        and the next request sent on it is dropped."""
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        self._drops_next_request = True

    def _ignores_tools(self, response: ChatResponse, body: dict[str, Any]) -> bool:
        """llama.cpp offers the model no tools unless `tool_choice` is sent."""
        return (
            "ignores_tools_without_tool_choice" in self.owner.quirks
            and bool(body.get("tools") and response.tool_calls)
            and body.get("tool_choice") is None
        )

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

    def _send_cut_json(self, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data[: len(data) // 2])
        self.wfile.flush()
        self.close_connection = True

    def _send_trickled_json(self, payload: dict[str, Any], trickle: Trickle) -> None:
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        size = -(-len(data) // max(1, trickle.pieces))
        for start in range(0, len(data), size):
            time.sleep(trickle.interval_s)
            self.wfile.write(data[start : start + size])
            self.wfile.flush()

    _pause_s = 0.0  # between one event of a stream and the next (`Trickle`)

    def _send_stream(
        self, response: ChatResponse, body: dict[str, Any], cut: CutStream | None = None
    ) -> None:
        quirks = self.owner.quirks
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        include_usage = include_usage and "no_stream_usage" not in quirks
        chunks = list(
            stream_chunks(response, self.owner.model, self.owner.fragment_chars, include_usage)
        )
        if "repeats_stream_names" in quirks:
            chunks = list(_repeat_call_names(chunks))
        events = [f"data: {json.dumps(chunk)}\n\n" for chunk in chunks]
        if cut is not None:
            events = _cut_events(events, chunks, cut)
        else:
            events.append("data: [DONE]\n\n")
        self._send_stream_events(events, chunked=cut is not None and cut.chunked)

    def _send_stream_events(self, events: list[str], *, chunked: bool = False) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("connection", "close")
        if chunked:
            self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for event in events:
            if self._pause_s:
                time.sleep(self._pause_s)
            data = event.encode()
            if chunked:
                data = b"%x\r\n%s\r\n" % (len(data), data)
            self.wfile.write(data)
            self.wfile.flush()
        self.close_connection = True


def _fault_body(fault: HTTPFault, messages_stream: bool | None) -> dict[str, Any]:
    """An injected error in the shape of the API asked: Anthropic's for a Messages request."""
    if messages_stream is not None:
        return {"type": "error", "error": {"type": "injected", "message": fault.message}}
    return {"error": {"message": fault.message, "type": "injected", "code": fault.status}}


def _cut_closed_stream(texts: list[str], cut: CutStream, *, closing: int) -> list[str]:
    """A stream whose last `closing` events end the answer, cut as `cut` says: the answer's
    events up to the cut (the next one half sent, if `partial`), then the closing ones only if
    `finish`."""
    answer, tail = texts[:-closing], texts[-closing:]
    count = len(answer) if cut.after_chunks is None else min(cut.after_chunks, len(answer))
    kept = answer[:count]
    if cut.partial and count < len(answer):
        kept.append(answer[count][: len(answer[count]) // 2])
    return kept + tail if cut.finish else kept


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


def _within_limit(response: ChatResponse, body: dict[str, Any]) -> ChatResponse:
    """A text answer cut at the request's token limit (a word a token), as a server cuts it."""
    limit = body.get("max_completion_tokens", body.get("max_tokens", body.get("max_output_tokens")))
    words = (response.text or "").split(" ")
    if not isinstance(limit, int) or len(words) <= limit:
        return response
    return response.model_copy(update={"text": " ".join(words[:limit]), "finish_reason": "length"})


def _tools_as_text(response: ChatResponse) -> ChatResponse:
    """What a model offered no tools writes instead of its tool calls."""
    text = "\n".join(f"functions.{call.name}:\n{call.arguments}" for call in response.tool_calls)
    return response.model_copy(update={"text": text, "tool_calls": [], "finish_reason": "stop"})


def _repeat_call_names(chunks: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """The chunks with every tool-call fragment carrying its call's id, type and name."""
    calls: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        for choice in chunk["choices"]:
            for fragment in choice["delta"].get("tool_calls") or ():
                known = calls.setdefault(fragment["index"], {})
                known.update({k: fragment[k] for k in ("id", "type") if k in fragment})
                name = fragment.get("function", {}).get("name")
                if name:
                    known["name"] = name
                fragment.update(id=known.get("id"), type=known.get("type", "function"))
                fragment["function"] = {**fragment.get("function", {}), "name": known["name"]}
        yield chunk


# Where llama-cpp-python's `create_chat_completion` is, as FastAPI names it in an error.
_LLAMA_CPP_ENDPOINT = (
    '  File "/usr/local/lib/python3.11/site-packages/llama_cpp/server/app.py", line 408, '
    "in create_chat_completion\n    POST {path}"
)
# llama-cpp-python's message union, in its order: each member's role and the keys it requires
# that an assistant message lacks. pydantic reports why every member rejects the message.
_MESSAGE_UNION = (
    ("ChatCompletionRequestSystemMessage", "system", ()),
    ("ChatCompletionRequestUserMessage", "user", ()),
    ("ChatCompletionRequestAssistantMessage", "assistant", ()),
    ("ChatCompletionRequestToolMessage", "tool", ("tool_call_id",)),
    ("ChatCompletionRequestFunctionMessage", "function", ("name",)),
)


def _null_content_errors(body: dict[str, Any]) -> list[dict[str, Any]]:
    """pydantic's errors (as FastAPI reports them) for each assistant message with a null
    content; none for a request llama-cpp-python's request model accepts."""
    errors: list[dict[str, Any]] = []
    for index, message in enumerate(body.get("messages") or ()):
        if not (isinstance(message, dict) and message.get("role") == "assistant"):
            continue
        if "content" not in message or message["content"] is not None:
            continue
        for member, role, required in _MESSAGE_UNION:
            loc = ("body", "messages", index, member)
            if role == "assistant":  # `content: NotRequired[str]`: null is not a str
                errors.append(
                    {
                        "type": "string_type",
                        "loc": (*loc, "content"),
                        "msg": "Input should be a valid string",
                        "input": None,
                    }
                )
                continue
            errors.append(
                {
                    "type": "literal_error",
                    "loc": (*loc, "role"),
                    "msg": f"Input should be '{role}'",
                    "input": "assistant",
                    "ctx": {"expected": f"'{role}'"},
                }
            )
            errors.extend(
                {"type": "missing", "loc": (*loc, key), "msg": "Field required", "input": message}
                for key in required
            )
    return errors


def _llama_cpp_internal_error(errors: list[dict[str, Any]], path: str) -> dict[str, Any]:
    """The body llama-cpp-python answers a request its pydantic model rejects (with HTTP 500):
    `str()` of FastAPI's RequestValidationError in an OpenAI-style internal error."""
    count = len(errors)
    lines = [f"{count} validation error{'s' if count != 1 else ''}:"]
    lines += [f"  {error}" for error in errors]
    lines += ["", _LLAMA_CPP_ENDPOINT.format(path=path)]  # FastAPI leaves a blank line before
    return {
        "error": {
            "message": "\n".join(lines),
            "type": "internal_server_error",
            "param": None,
            "code": None,
        }
    }
