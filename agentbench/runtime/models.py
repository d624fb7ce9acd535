"""The model boundary: `ChatModel`, `ChatResponse`, `ToolCall`, and the test doubles.

The runner builds an OpenAI chat-completions request body (a plain dict) and hands it to a
`ChatModel`; the model returns a `ChatResponse`. Keeping the boundary at the request body is
what lets agentbench record, compare and replay model calls exactly. `ScriptedModel` and
`FunctionModel` are part of the product: users test their own agents with them.
"""

from __future__ import annotations

import inspect
import json
import os
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias, runtime_checkable

from pydantic import Field, field_validator

from agentbench.errors import ScriptExhaustedError, UsageError
from agentbench.runtime.message_view import MessageView
from agentbench.runtime.records import SharesFieldNames, built, maker
from agentbench.runtime.tokens import estimate_request_tokens, estimate_tokens

TextDeltaHandler: TypeAlias = Callable[[str], None]


def new_call_id() -> str:
    # 24 hex digits as before (`uuid4().hex[:24]`), all of them random, and without making
    # a UUID object: a scripted run makes an id a step.
    return f"call_{os.urandom(12).hex()}"


class ToolCall(SharesFieldNames):
    """One tool call the model asked for. `arguments` is the raw JSON text the model sent."""

    name: str
    arguments: str = "{}"
    id: str = Field(default_factory=new_call_id)

    def __init__(
        self,
        name: str | None = None,
        arguments: str | dict[str, Any] | None = None,
        /,
        **data: Any,
    ) -> None:
        if name is not None:
            data["name"] = name
        if arguments is not None:
            data["arguments"] = arguments
        super().__init__(**data)

    @field_validator("arguments", mode="before")
    @classmethod
    def _dump_dict(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return json.dumps(value, ensure_ascii=False)
        return "" if value is None else value

    def as_openai(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


class Usage(SharesFieldNames):
    """Tokens of one or more model calls; `estimated` when any part was counted by us.

    A provider that reports no usage (llama.cpp's streams) gets an estimate instead of 0,
    marked so a reader never mistakes it for the provider's count. The mark is left out of
    serialized records while False, so records of reported usage are unchanged.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    estimated: bool = Field(default=False, exclude_if=lambda estimated: not estimated)

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        # Built, not validated: a run adds one up every step (`records.built`).
        fields = {
            "input_tokens": self.input_tokens + other.input_tokens,
            "output_tokens": self.output_tokens + other.output_tokens,
            "estimated": self.estimated or other.estimated,
        }
        return _make_sum(fields)


_make_sum = maker(Usage, ("input_tokens", "output_tokens", "estimated"))  # `Usage.__add__`'s


def estimate_usage(
    request: dict[str, Any],
    text: str | None,
    tool_calls: Iterable[ToolCall],
    *,
    estimated: bool = True,
) -> Usage:
    """Usage counted from the request and the answer, for a response that reported none."""
    output = (text or "") + "".join(call.name + call.arguments for call in tool_calls)
    fields = {
        "input_tokens": estimate_request_tokens(request),
        "output_tokens": estimate_tokens(output),
        "estimated": estimated,
    }
    return built(Usage, fields)


class ChatResponse(SharesFieldNames):
    """What one model call produced."""

    text: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage = Field(default_factory=Usage)
    latency_ms: float = 0.0
    model: str | None = None
    reasoning: str | None = None
    attempts: int = 1
    raw: dict[str, Any] | None = Field(default=None, repr=False)

    def as_message(self) -> dict[str, Any]:
        """The assistant message to append to the conversation.

        Tool calls without text get `content: ""`, not null: llama.cpp's server rejects a null
        assistant content (its request model types it `str`), and OpenAI and vLLM take either.
        The key stays, since hooks and summarizers read `message["content"]`.
        """
        message: dict[str, Any] = {"role": "assistant", "content": self.text}
        if self.tool_calls:
            if self.text is None:
                message["content"] = ""
            calls = [call.as_openai() for call in self.tool_calls]
            # Its copy is exactly its length: the comprehension leaves room to grow (40 bytes
            # for one call), and a run keeps every assistant message.
            message["tool_calls"] = calls[:]
        return message


@runtime_checkable
class ChatModel(Protocol):
    """Anything that answers an OpenAI chat-completions request body."""

    name: str

    async def complete(
        self, request: dict[str, Any], *, on_text_delta: TextDeltaHandler | None = None
    ) -> ChatResponse: ...


ScriptItem: TypeAlias = "str | ToolCall | list[ToolCall] | ChatResponse | BaseException"


def to_response(
    item: Any, request: dict[str, Any], model_name: str, started: float | None = None
) -> ChatResponse:
    """Normalise a scripted item into a ChatResponse, estimating usage when none is given;
    with `started` (a `perf_counter` time), its latency is the time since."""
    if isinstance(item, BaseException):
        raise item
    if isinstance(item, ChatResponse):
        return _from_response(item, request, model_name, started)
    if isinstance(item, str):
        text, calls, finish_reason = item, [], "stop"
    elif isinstance(item, ToolCall):
        text, calls, finish_reason = None, [item], "tool_calls"
    elif isinstance(item, list | tuple) and all(isinstance(c, ToolCall) for c in item):
        text, calls, finish_reason = None, list(item), "tool_calls"
    else:
        raise TypeError(
            "a scripted response must be a str, ToolCall, list of ToolCall, ChatResponse or an "
            f"exception, got {type(item).__name__}"
        )
    # What `_from_response(ChatResponse(text=..., tool_calls=..., finish_reason=...))` gives,
    # without a response made only to be copied: a script of a long run makes one a step.
    served = _served_calls(calls)
    fields: dict[str, Any] = {"text": text} if text is not None else {"tool_calls": served}
    fields["finish_reason"] = finish_reason
    fields["model"] = model_name
    # A script's usage stands in for a provider's report, so it is not marked estimated.
    fields["usage"] = estimate_usage(request, text, served, estimated=False)
    fields["tool_calls"] = served
    if started is not None:
        fields["latency_ms"] = (time.perf_counter() - started) * 1000
    return built(ChatResponse, fields)


def _from_response(
    response: ChatResponse, request: dict[str, Any], model_name: str, started: float | None
) -> ChatResponse:
    update: dict[str, Any] = {"model": response.model or model_name}
    if response.usage == Usage():
        update["usage"] = estimate_usage(
            request, response.text, response.tool_calls, estimated=False
        )
    update["tool_calls"] = _served_calls(response.tool_calls)
    if started is not None:
        update["latency_ms"] = (time.perf_counter() - started) * 1000
    return response.model_copy(update=update)


def _served_calls(calls: list[ToolCall]) -> list[ToolCall]:
    """A call whose id was not set explicitly gets a fresh one each time it is served, so one
    scripted ToolCall object can be reused across turns without clashing ids."""
    return [c if "id" in c.model_fields_set else _with_new_id(c) for c in calls]


def _with_new_id(call: ToolCall) -> ToolCall:
    if type(call) is not ToolCall:
        return call.model_copy(update={"id": new_call_id()})
    # What the copy gives (the fields set and the new id), shared as `built` shares.
    values, given = call.__dict__, call.model_fields_set
    fields = {name: values[name] for name in _CALL_FIELDS if name in given}
    fields["id"] = new_call_id()
    return built(ToolCall, fields)


_CALL_FIELDS = tuple(name for name in ToolCall.model_fields if name != "id")


def _text_of(item: Any) -> str | None:
    """The text a scripted item answers with, if any."""
    if isinstance(item, str):
        return item
    return item.text if isinstance(item, ChatResponse) else None


def _stream_text(
    text: str | None, request: dict[str, Any], on_text_delta: TextDeltaHandler | None
) -> None:
    """Report `text` word by word, as a streaming provider would — only if asked to stream."""
    if not text or on_text_delta is None or not request.get("stream"):
        return
    words = text.split(" ")
    for i, word in enumerate(words):
        on_text_delta(word if i == len(words) - 1 else word + " ")


def recorded(request: dict[str, Any]) -> dict[str, Any]:
    """What a test double keeps of a request: never a deep copy.

    The runtime's messages are a `MessageView`, which never changes, so every kept request
    of a run shares one conversation (a deep copy each would grow with the square of the run's
    length); the runtime makes a new request dict for each call and never changes it after,
    so that is kept as it is (its `ModelRequest` event holds the same one). A caller's own
    dict and list may still change after the call, so they are copied (shallowly).
    """
    messages = request.get("messages")
    if isinstance(messages, MessageView):
        return request
    kept = dict(request)
    if isinstance(messages, list):
        kept["messages"] = list(messages)
    return kept


class ScriptedModel:
    """A model that answers from a queue and remembers every request it saw.

    Items: a final text, a `ToolCall`, a list of calls for one turn, a whole `ChatResponse`, or
    an exception to raise. `assert_complete()` fails if any item was never consumed.
    """

    def __init__(self, items: Iterable[Any] = (), *, name: str = "scripted") -> None:
        self.name = name
        self._items: deque[Any] = deque(items)
        self.requests: list[dict[str, Any]] = []

    def add(self, *items: Any) -> ScriptedModel:
        self._items.extend(items)
        return self

    @property
    def remaining(self) -> int:
        return len(self._items)

    async def complete(
        self, request: dict[str, Any], *, on_text_delta: TextDeltaHandler | None = None
    ) -> ChatResponse:
        started = time.perf_counter()
        self.requests.append(recorded(request))
        if not self._items:
            last = (request.get("messages") or [{}])[-1]
            raise ScriptExhaustedError(
                f"ScriptedModel {self.name!r} has no response left for request "
                f"#{len(self.requests)} (last message: role={last.get('role')!r}, "
                f"content={str(last.get('content'))[:120]!r}); add more items to the script"
            )
        item = self._items.popleft()
        _stream_text(_text_of(item), request, on_text_delta)
        return to_response(item, request, self.name, started)

    def assert_complete(self) -> None:
        if self._items:
            raise AssertionError(
                f"ScriptedModel {self.name!r}: {len(self._items)} scripted response(s) never "
                f"requested; the next one was {self._items[0]!r}"
            )


@dataclass(frozen=True)
class CallInfo:
    """What a FunctionModel's function learns about the call besides the request body."""

    index: int
    model: str
    tools: list[str]


ModelFunction: TypeAlias = Callable[[dict[str, Any], CallInfo], "Any | Awaitable[Any]"]

EXPECTED_SIGNATURE = (
    "fn(request) or fn(request, info), where request is the chat-completions request body (a "
    "dict) and info a CallInfo, returning what a ScriptedModel script holds (text, a ToolCall, "
    "a list of ToolCalls, a ChatResponse), or an awaitable of it"
)


def model_function(fn: Callable[..., Any], what: str) -> ModelFunction:
    """`fn` as a `(request, info)` function, if it takes `(request)` or `(request, info)`.

    FunctionModel and OpenAICompatibleServer take the same functions (a reference policy that
    reads only the request works in both); a function of another shape fails here, where it
    is passed, instead of at the first model call deep inside a run.
    """
    if not callable(fn):
        raise UsageError(f"{what}: expected {EXPECTED_SIGNATURE}; got {type(fn).__name__}")
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # some builtins have no signature: trust the caller
        return fn
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    keyword_only = [p for p in parameters if p.kind is p.KEYWORD_ONLY and p.default is p.empty]
    varargs = any(p.kind is p.VAR_POSITIONAL for p in parameters)
    if keyword_only or len(required) > 2 or not (positional or varargs):
        name = getattr(fn, "__qualname__", type(fn).__name__)
        raise UsageError(
            f"{what}: {name}{inspect.signature(fn)} has the wrong signature; expected "
            f"{EXPECTED_SIGNATURE}"
        )
    if varargs or len(positional) >= 2:
        return fn
    return lambda request, _info: fn(request)


class FunctionModel:
    """A model whose every answer is computed by a function of the request.

    `fn(request)` or `fn(request, info)` (sync or async): `request` is the chat-completions body
    the runner built, `info` a `CallInfo` (index of the call, model name, tool names). It
    returns what a ScriptedModel script holds: text, a ToolCall, a list of them, a ChatResponse.
    """

    def __init__(self, fn: Callable[..., Any], *, name: str = "function") -> None:
        self._call = model_function(fn, "FunctionModel")
        self.fn = fn
        self.name = name
        self.requests: list[dict[str, Any]] = []

    async def complete(
        self, request: dict[str, Any], *, on_text_delta: TextDeltaHandler | None = None
    ) -> ChatResponse:
        started = time.perf_counter()
        self.requests.append(recorded(request))
        info = CallInfo(
            index=len(self.requests) - 1,
            model=self.name,
            tools=[t["function"]["name"] for t in request.get("tools", ())],
        )
        item = self._call(request, info)
        if inspect.isawaitable(item):
            item = await item
        _stream_text(_text_of(item), request, on_text_delta)
        return to_response(item, request, self.name, started)
