"""A user's own agent function as a suite's target, and what it is handed for each turn.

`CallableTarget` wraps the function a suite's `agent:` names when it is not an agentbench
`Agent`: `fn(input)` or `fn(input, target)`, sync or async. `TargetContext` is the `target`:
the loopback server's base URL (`anthropic_base_url` for an Anthropic client) and the key it
accepts, to give the model client, the suite's model name, the case's context variables and
the turn. A sync function runs in a worker thread so the server (on the event loop) can answer
the calls it makes.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from pydantic import BaseModel

from agentbench.errors import UsageError

if TYPE_CHECKING:
    from agentbench.mcp_proxy.servers import McpCommand

# What the loopback server accepts as a key: clients insist on one, the server needs none,
# and no real key of the user's is ever handed to the code under test.
LOOPBACK_KEY = "agentbench-boundary"

_current: contextvars.ContextVar[TargetContext | None] = contextvars.ContextVar(
    "agentbench_target", default=None
)


@dataclass(frozen=True)
class TargetContext:
    """What a boundary target is handed with each turn's input."""

    base_url: str  # give this to the model client as its OpenAI base URL
    model: str  # the suite's `model: name`
    api_key: str = LOOPBACK_KEY
    variables: dict[str, Any] = field(default_factory=dict)  # the case's `context:`
    turn: int = 1  # 1-based turn of a multi-turn case
    # The same server as Anthropic's SDKs take it (ANTHROPIC_BASE_URL): its root, no `/v1`.
    anthropic_base_url: str = ""
    # The case's MCP proxies (`mcp_proxy.servers.CaseMcpServers`), reached by the methods below.
    mcp_servers: Any = field(default=None, repr=False, compare=False)

    def mcp_stdio(
        self,
        name: str,
        command: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        cwd: str | Path | None = None,
    ) -> McpCommand:
        """The command to give a framework's stdio MCP client in place of the server's own
        `command`: it reaches the case's proxy for server `name`, which records, replays or
        faults the real server (started from `command`, with `env` added to this process's
        environment, only when a call goes live)."""
        from agentbench.mcp_proxy.servers import bridge_command, stdio_upstream

        environment = None if env is None else {**os.environ, **env}
        upstream = stdio_upstream(command, environment, cwd)
        return bridge_command(self._mcp().url(name, upstream, transport="stdio"))

    def mcp_url(
        self,
        name: str,
        url: str | None = None,
        *,
        command: Sequence[str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> str:
        """The Streamable HTTP URL to give a framework's HTTP MCP client: the case's proxy
        for server `name`, in front of the real server at `url` (or started from `command`,
        over stdio). `headers` go to the real server only, never into a recording."""
        from agentbench.mcp_proxy.servers import http_upstream, stdio_upstream

        if (url is None) == (command is None):
            raise UsageError(f"mcp_url({name!r}): give the real server's url or its command")
        if url is not None:
            upstream = http_upstream(url, headers)
        else:
            assert command is not None
            upstream = stdio_upstream(command, None, None)
        return self._mcp().url(name, upstream)

    def _mcp(self) -> Any:
        if self.mcp_servers is None:
            raise UsageError(
                "this target context has no MCP proxies: MCP servers are reached while "
                "agentbench runs or replays a case"
            )
        return self.mcp_servers


def current_target() -> TargetContext | None:
    """The target context of the turn running now (in its task or worker thread), for code
    deep inside a framework that cannot be handed one."""
    return _current.get()


@dataclass(frozen=True)
class CallableTarget:
    """A suite's agent that is a plain function whose model calls are recorded at the
    model-API boundary."""

    function: Callable[..., Any]
    name: str
    takes_target: bool
    model: str | None = None  # the suite's model name

    @classmethod
    def of(cls, function: Any, *, where: str, model: str | None = None) -> CallableTarget:
        """The target for `function`; UsageError (naming `where`) for what cannot be one."""
        if not callable(function) or isinstance(function, type):
            raise UsageError(
                f"{where}agent {function!r} is a {type(function).__name__}: name an agentbench "
                "Agent or a function fn(input, target)"
            )
        try:
            parameters = list(inspect.signature(function).parameters.values())
        except (TypeError, ValueError):  # a builtin without a signature: call it with input
            parameters = []
        positional = [
            p
            for p in parameters
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
        ]
        varargs = any(p.kind is p.VAR_POSITIONAL for p in parameters)
        if len(positional) > 2:
            raise UsageError(
                f"{where}agent function {_name(function)} takes {len(positional)} arguments; "
                "a boundary target takes (input) or (input, target)"
            )
        takes_target = len(positional) == 2 or varargs
        return cls(function, _name(function), takes_target, model)

    async def call(self, turn_input: Any, context: TargetContext) -> Any:
        """Run the function for one turn and return its output as data."""
        arguments = (turn_input, context) if self.takes_target else (turn_input,)
        token = _current.set(context)
        try:
            if inspect.iscoroutinefunction(self.function):
                result = await self.function(*arguments)
            else:
                # Its own thread, so the loop stays free to answer the calls it makes; the
                # copied context carries `current_target()` there.
                result = await asyncio.to_thread(self.function, *arguments)
                if inspect.isawaitable(result):  # a sync wrapper around a coroutine
                    result = await result
        finally:
            _current.reset(token)
        return output_data(result)


def output_data(value: Any) -> Any:
    """A target's output as scorers and stores take it: JSON data. A pydantic model is its
    data; dataclasses, dates and the like as JSON writes them; anything JSON cannot hold as
    its text (`str`), so a function may return whatever its framework hands it."""
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")

    def fallback(item: Any) -> Any:
        return item.model_dump(mode="json") if isinstance(item, BaseModel) else str(item)

    try:
        return orjson.loads(orjson.dumps(value, default=fallback, option=orjson.OPT_NON_STR_KEYS))
    except (TypeError, orjson.JSONEncodeError):  # too deep, an int past 64 bits: its text
        return str(value)


def _name(function: Any) -> str:
    return str(getattr(function, "__name__", None) or type(function).__name__)
