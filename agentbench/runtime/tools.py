"""Tools: the `@tool` decorator, three-state `ToolResult`, and the registry.

A tool is a Python function whose signature becomes its JSON Schema (see `tool_schema`).
Calling it never raises into the runner: the outcome is a `ToolResult` that is `ok`,
`business_failure` (the tool worked and the answer is "no" — retrying will not help) or
`system_error` (an exception or a timeout — the tool itself failed). Each tool declares its
effect, its timeout and whether it is idempotent, which is what replay and parallel execution
need to know to treat it safely.

Where a sync tool runs (`blocking`):
* `True`, the default: on a daemon thread (`threads`), so its timeout holds whatever it does,
  and other runs go on while it waits for I/O. The hand-over costs two thread wake-ups,
  0.1-0.2 ms on a small virtual machine.
* `False` (pure computation: no I/O, no locks, no sleeping): on the event loop's thread
  (`inline`), without the hand-over. On the main thread a watchdog interrupts a call at its
  timeout; elsewhere the timeout is cooperative: a call that returns (or raises) after
  `timeout_s` is reported as timed out, exactly as the thread would have reported it.
Tools are never moved between the two on their own: a tool that worked on a thread can fail
on the loop (one that runs `asyncio.run`, or holds a connection made on its thread), and one
quick call says nothing of the next (a cache miss that goes to the network).
"""

from __future__ import annotations

import asyncio
import enum
import functools
import inspect
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextvars import copy_context
from types import CoroutineType
from typing import Any, Literal, overload

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError

from agentbench.errors import ToolDefinitionError
from agentbench.runtime import inline
from agentbench.runtime.context import RunContext
from agentbench.runtime.deadlines import DeadlineExceeded, within
from agentbench.runtime.eager import resume
from agentbench.runtime.records import built
from agentbench.runtime.threads import run_in_thread
from agentbench.runtime.tool_schema import build_function_schema

DEFAULT_TOOL_TIMEOUT_S = 10.0
DEFAULT_MAX_RESULT_CHARS = 2_000
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class Effect(enum.StrEnum):
    """What running a tool does to the world; replay and parallelism depend on it."""

    READ_ONLY = "read_only"
    WRITE = "write"
    UNKNOWN = "unknown"


class ResultKind(enum.StrEnum):
    """How a tool call ended, as the model is told: every `ToolResult` is one of the three.

    `ok`: the tool answered. `business_failure`: the tool worked and the answer is no (raised
    as `BusinessFailure`; retrying will not help). `system_error`: the tool broke (any other
    exception, or its timeout).
    """

    OK = "ok"
    BUSINESS_FAILURE = "business_failure"
    SYSTEM_ERROR = "system_error"


class BusinessFailure(Exception):  # noqa: N818 - the user's word for it, not an error of ours
    """Raise from a tool to say "the tool worked, and the answer is no" (do not retry).

    With `stop=True` the answer ends the run (stop reason `business_stop`), for outcomes no
    further reasoning can change, such as a refused payment or a closed account.
    """

    def __init__(self, message: str, data: Any = None, *, stop: bool = False) -> None:
        self.message = message
        self.data = data
        self.stop = stop
        super().__init__(message)


class ToolResult(BaseModel):
    """The outcome of one tool call."""

    model_config = ConfigDict(frozen=True)

    kind: ResultKind
    data: Any = None
    error: str | None = None
    duration_ms: float = 0.0
    truncated: bool = False
    stop: bool = False  # a business failure that ends the run

    @classmethod
    def ok(cls, data: Any = None) -> ToolResult:
        return cls(kind=ResultKind.OK, data=data)

    @classmethod
    def business_failure(cls, error: str, data: Any = None, *, stop: bool = False) -> ToolResult:
        return cls(kind=ResultKind.BUSINESS_FAILURE, error=error, data=data, stop=stop)

    @classmethod
    def system_error(cls, error: str) -> ToolResult:
        return cls(kind=ResultKind.SYSTEM_ERROR, error=error)

    @property
    def is_ok(self) -> bool:
        return self.kind is ResultKind.OK

    def observation(self) -> str:
        """The text the model sees for this result."""
        if self.kind is ResultKind.OK:
            return _as_text(self.data)
        if self.kind is ResultKind.BUSINESS_FAILURE:
            detail = f" {_as_text(self.data)}" if self.data is not None else ""
            return (
                f"[business_failure] {self.error}{detail}\n"
                "(The tool worked; this is its answer. Retrying the same call will not change it.)"
            )
        return f"[system_error] {self.error}"


# Separates a tool's observation from a note the runtime appends to it (a repeat warning);
# whoever reads observations back (memory, reference policies) splits on it.
RUNTIME_NOTE = "\n\n[agentbench] "


def observation_of(content: str) -> str:
    """The tool's own observation, without a note the runtime appended."""
    return content.split(RUNTIME_NOTE)[0]


def _as_text(data: Any) -> str:
    if data is None:
        return ""
    if isinstance(data, str):
        return data
    if isinstance(data, BaseModel):
        return data.model_dump_json()
    try:
        return orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return str(data)


def truncate_text(text: str, limit: int) -> tuple[str, bool]:
    """Cut `text` to `limit` chars with a marker the model (and a reader) cannot miss.

    The cut comes before any redaction (the runtime knows none), so the marker's form is a
    contract: trace redaction recognises it and masks a fragment of a secret that ends there.
    """
    if limit <= 0 or len(text) <= limit:
        return text, False
    cut = len(text) - limit
    return f"{text[:limit]}\n…[truncated {cut:,} of {len(text):,} chars]", True


class Tool:
    """A function the model can call, with its schema, policy and a safe `invoke`."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        effect: Effect | str = Effect.UNKNOWN,
        timeout_s: float | None = DEFAULT_TOOL_TIMEOUT_S,
        idempotent: bool = False,
        max_result_chars: int = DEFAULT_MAX_RESULT_CHARS,
        blocking: bool = True,
    ) -> None:
        self.fn = fn
        self.name = name or fn.__name__
        if not _TOOL_NAME.match(self.name):
            raise ToolDefinitionError(
                f"tool name {self.name!r} is not allowed: use 1-64 letters, digits, '_' or '-'"
            )
        try:
            self.effect = Effect(effect)
        except ValueError:
            valid = ", ".join(e.value for e in Effect)
            raise ToolDefinitionError(
                f"tool {self.name!r}: effect {effect!r} is not one of: {valid}"
            ) from None
        if timeout_s is not None and timeout_s <= 0:
            raise ToolDefinitionError(f"tool {self.name!r}: timeout_s must be positive")
        self.timeout_s = timeout_s
        self.idempotent = idempotent
        self.max_result_chars = max_result_chars
        self.is_async = inspect.iscoroutinefunction(fn)
        if not blocking and self.is_async:
            raise ToolDefinitionError(
                f"tool {self.name!r}: blocking=False is for sync functions; an async tool "
                "already runs on the event loop"
            )
        self.blocking = blocking
        schema = build_function_schema(fn, name=self.name, description=description)
        self.description = schema.description
        self.parameters = schema.parameters
        self.args_model = schema.args_model
        self.context_param = schema.context_param
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the underlying function directly, as if it were not a tool."""
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"Tool({self.name!r}, effect={self.effect.value}, timeout_s={self.timeout_s})"

    def openai_schema(self) -> dict[str, Any]:
        """The entry for this tool in a chat-completions request's `tools` list."""
        function: dict[str, Any] = {"name": self.name, "parameters": self.parameters}
        if self.description:
            function["description"] = self.description
        return {"type": "function", "function": function}

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Check the model's arguments; raises pydantic's ValidationError when they are wrong."""
        # What `model_validate` does, less its wrapper. A model's `__dict__` holds its fields,
        # in order (extra fields, where allowed, are kept apart); a copy, as the caller adds
        # the context to it.
        model = self.args_model.__pydantic_validator__.validate_python(arguments)
        return dict(model.__dict__)

    async def invoke(
        self, arguments: dict[str, Any], context: RunContext | None = None
    ) -> ToolResult:
        """Validate, run with the timeout, and classify the outcome. Never raises."""
        try:
            kwargs = self.validate(arguments)
        except ValidationError as exc:
            return ToolResult.system_error(f"invalid arguments for {self.name!r}: {exc}")
        return await self.run(kwargs, context)

    async def run(self, kwargs: dict[str, Any], context: RunContext | None = None) -> ToolResult:
        """Run with already-validated arguments, enforcing the timeout. Never raises."""
        started = time.perf_counter()
        if self.context_param is not None:
            kwargs[self.context_param] = context
        try:
            # An async tool is awaited here, not in a coroutine of its own: one fewer a call.
            if self.is_async:
                value = await _within(self.fn(**kwargs), self.timeout_s)
            elif self.blocking:
                # In a copy of the run's context variables, as on the event loop.
                on_thread = functools.partial(copy_context().run, self._sync_call(kwargs))
                value = await run_in_thread(on_thread, self.timeout_s)
            else:
                value = inline.call(
                    self.name, self._sync_call(kwargs), self.timeout_s, watch=inline.available()
                )
        except BusinessFailure as exc:
            result = ToolResult.business_failure(exc.message, exc.data, stop=exc.stop)
        except _RaisedByTool as wrapped:
            exc = wrapped.original
            result = ToolResult.system_error(f"{type(exc).__name__}: {exc}")
        except TimeoutError:
            result = ToolResult.system_error(
                f"tool {self.name!r} timed out after {self.timeout_s:g} s"
            )
        except Exception as exc:
            result = ToolResult.system_error(f"{type(exc).__name__}: {exc}")
        else:
            if not isinstance(value, ToolResult):
                return _ok(value, started, self.max_result_chars)
            result = value
        return _finish(result, started, self.max_result_chars)

    def _sync_call(self, kwargs: dict[str, Any]) -> Callable[[], Any]:
        """The call of a sync tool, as the thread (or `inline`) runs it.

        A TimeoutError the tool raises itself (an HTTP client's, say) is its own failure,
        not our timeout: it is wrapped so the two are never confused.
        """

        def call_sync() -> Any:
            try:
                return self.fn(**kwargs)
            except TimeoutError as exc:
                raise _RaisedByTool(exc) from exc

        return call_sync


async def _within(call: Awaitable[Any], timeout_s: float | None) -> Any:
    """`await call` under `async with asyncio.timeout(timeout_s)`, its TimeoutError told
    apart from one the tool raised (`_RaisedByTool`).

    The same accounting as asyncio.timeout (the task is cancelled at the deadline, and the
    cancellation turned into TimeoutError only if it was the deadline's), with a plain timer:
    asyncio.timeout's own context manager, handle and context copy cost 4 µs a call. The
    timer is set only if the call suspends (`eager`): until then it could not fire, and most
    async tools return without suspending. It counts from the start of the call all the same.
    """
    task = asyncio.current_task()
    if task is None:
        raise RuntimeError("Timeout should be used inside a task")  # asyncio.timeout's words
    cancelling = task.cancelling()
    started = asyncio.get_running_loop().time()
    if type(call) is CoroutineType:
        began = time.perf_counter()
        try:  # `eager.first_step`, written out: once a call
            yielded = call.send(None)
        except StopIteration as finished:
            # It never let the loop run, so no timer could stop it: all its time was its own.
            if timeout_s is not None and time.perf_counter() - began > timeout_s:
                raise DeadlineExceeded from None
            return finished.value
        except TimeoutError as exc:
            raise _RaisedByTool(exc) from exc
        call = resume(call, yielded)
    return await _timed(call, timeout_s, task, cancelling, started)


async def _timed(
    call: Awaitable[Any],
    timeout_s: float | None,
    task: asyncio.Task[Any],
    cancelling: int,
    started: float,
) -> Any:
    """The rest of `_within`, for a call that suspended: its deadline, from `started`, judged
    on arrival (`deadlines.within`: an answer the loop was handed before the deadline's
    callback ran is the answer, however late the loop was)."""
    try:
        if timeout_s is None:
            return await call
        return await within(call, started + timeout_s, task=task, cancelling=cancelling)
    except DeadlineExceeded:
        raise
    except TimeoutError as exc:
        raise _RaisedByTool(exc) from exc


class _RaisedByTool(Exception):  # noqa: N818 - internal wrapper, never escapes this module
    def __init__(self, original: BaseException) -> None:
        super().__init__(str(original))
        self.original = original


# Decides a call's result instead of the tool (replay's recorded/stub/fault policies), or
# returns None to let the tool run: (tool, the model's arguments, the run's context).
ToolInterceptor = Callable[[Tool, dict[str, Any], RunContext], Awaitable["ToolResult | None"]]


_SCALAR = str | None | bool | int | float


def _ok(value: Any, started: float, limit: int) -> ToolResult:
    """The most common result, built once: what `_finish(ToolResult.ok(value), ...)` gives,
    fields set included, without its validation and copy (see `records.built`)."""
    fields: dict[str, Any] = {"kind": ResultKind.OK, "data": value}
    if isinstance(value, str):
        fields["data"], fields["truncated"] = truncate_text(value, limit)
    elif not isinstance(value, _SCALAR):
        # Structured data is kept whole unless its text would blow the limit.
        text = _as_text(value)
        if len(text) > limit:
            fields["data"], fields["truncated"] = truncate_text(text, limit)
    fields["duration_ms"] = (time.perf_counter() - started) * 1000
    return built(ToolResult, fields)


def settled(value: Any, started: float, limit: int) -> ToolResult:
    """What `Tool.run` makes of what a tool gave (its data, or a ToolResult): the time since
    `started`, text cut to `limit`. For a tool that runs its calls itself (an MCP tool keeps
    its own timeout, to say what became of a server that did not answer)."""
    if isinstance(value, ToolResult):
        return _finish(value, started, limit)
    return _ok(value, started, limit)


def _finish(result: ToolResult, started: float, limit: int) -> ToolResult:
    update: dict[str, Any] = {"duration_ms": (time.perf_counter() - started) * 1000}
    if result.kind is ResultKind.OK and not isinstance(result.data, _SCALAR):
        # Structured data is kept whole unless its text would blow the limit.
        text = _as_text(result.data)
        if len(text) > limit:
            update["data"], update["truncated"] = truncate_text(text, limit)
    elif isinstance(result.data, str):
        update["data"], update["truncated"] = truncate_text(result.data, limit)
    if result.error is not None:
        update["error"], cut = truncate_text(result.error, limit)
        update["truncated"] = update.get("truncated", False) or cut
    return result.model_copy(update=update)


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    effect: Effect | Literal["read_only", "write", "unknown"] = Effect.UNKNOWN,
    timeout_s: float | None = DEFAULT_TOOL_TIMEOUT_S,
    idempotent: bool = False,
    max_result_chars: int = DEFAULT_MAX_RESULT_CHARS,
    blocking: bool = True,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(fn: Callable[..., Any] | None = None, /, **options: Any) -> Any:
    """Turn a function into a `Tool`; use bare (`@tool`) or with options (`@tool(effect=...)`)."""
    if fn is not None:
        return Tool(fn, **options)
    return lambda f: Tool(f, **options)


class ToolRegistry:
    """The tools of one agent, by name; two tools may not share a name."""

    def __init__(self, tools: Iterable[Tool | Callable[..., Any]] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for item in tools:
            self.add(item)

    def add(self, item: Tool | Callable[..., Any]) -> Tool:
        added = item if isinstance(item, Tool) else Tool(item)
        existing = self._tools.get(added.name)
        if existing is not None:
            raise ToolDefinitionError(
                f"duplicate tool name {added.name!r}: {_where(existing.fn)} and "
                f"{_where(added.fn)}; give one of them another name (@tool(name=...))"
            )
        self._tools[added.name] = added
        return added

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def openai_schemas(self) -> list[dict[str, Any]]:
        return [t.openai_schema() for t in self._tools.values()]


def _where(fn: Callable[..., Any]) -> str:
    module = getattr(fn, "__module__", "?")
    return f"{module}.{getattr(fn, '__qualname__', repr(fn))}"
