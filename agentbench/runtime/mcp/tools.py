"""An MCP server's tools as agentbench `Tool`s.

Each tool keeps the server's name (optionally prefixed), description and input schema; its
effect comes from the server's annotations (`readOnlyHint` → read_only; `destructiveHint`, or
`readOnlyHint: false` → write; none → unknown) and `idempotentHint` says whether it is safe to
repeat. Arguments are checked against the server's schema before the call (a mismatch goes back
to the model, like any tool's), the tool's timeout holds, and results keep the three states:
`isError` is the tool's own "no" (business failure), a protocol or transport failure is a
system error. Structured content is the result's data; text that says more than the structured
content is kept beside it.

An agent is usually defined at import, where connecting to a server would make importing it
(for `agentbench run golden/`, for replay) depend on the server. `schema=PATH` keeps the tool
list in a JSON file checked in next to the agent: read when present, so the agent is defined
without the server (or the `mcp` package), and written from the live server when absent (the
cassette "once" rule). The server is then started only when a tool actually runs, which a
replay with the tools `recorded` never does.
"""

from __future__ import annotations

import itertools
import re
import threading
import time
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from jsonschema import SchemaError
from jsonschema.validators import validator_for
from pydantic import ValidationError
from pydantic_core import PydanticCustomError

from agentbench.errors import ToolDefinitionError, one_line
from agentbench.runtime.context import RunContext
from agentbench.runtime.mcp import connection as conn
from agentbench.runtime.mcp.limits import too_large
from agentbench.runtime.mcp.servers import McpServer
from agentbench.runtime.tools import (
    DEFAULT_MAX_RESULT_CHARS,
    BusinessFailure,
    Effect,
    Tool,
    ToolResult,
    settled,
)
from agentbench.yaml_source import SourceError, max_file_bytes, read_bytes

DEFAULT_MCP_TIMEOUT_S = 30.0
SNAPSHOT_VERSION = 1
_ERROR_CHARS = 500  # of a server's JSON-RPC error message, in a tool's system error
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9_-]")


# Every McpTool of the process while it lives, by when it was made: the OTel hook tells a
# run's MCP tools by them.
_made: weakref.WeakValueDictionary[int, McpTool] = weakref.WeakValueDictionary()
_made_order = itertools.count()
_made_lock = threading.Lock()


def made_tools() -> list[McpTool]:
    """The `McpTool`s of this process that are still in use, the newest first: of two tools
    alike but for their server (the same name and schema), the one made last is the one a
    run being traced most likely has; an older one may only be waiting to be collected."""
    with _made_lock:
        newest_first = (_made.get(key) for key in sorted(_made.keys(), reverse=True))
        return [tool for tool in newest_first if tool is not None]  # None: collected since


async def _no_arguments() -> None:  # the base class's schema; McpTool replaces it
    return None


class McpTool(Tool):
    """One tool of an MCP server; `remote_name` is its name on the server."""

    def __init__(
        self,
        server: McpServer,
        spec: dict[str, Any],
        *,
        name: str,
        timeout_s: float | None,
        max_result_chars: int,
        snapshot: Snapshot | None = None,
    ) -> None:
        self.server = server
        self.remote_name: str = spec["name"]
        self.snapshot = snapshot  # the schema= file the tool list was read from
        annotations = spec.get("annotations") or {}
        super().__init__(
            _no_arguments,
            name=name,
            description=spec.get("description") or spec.get("title") or "",
            effect=effect_of(annotations),
            timeout_s=timeout_s,
            idempotent=bool(annotations.get("idempotentHint"))
            or effect_of(annotations) is Effect.READ_ONLY,
            max_result_chars=max_result_chars,
        )
        self.parameters = _checked_schema(server, self.remote_name, spec.get("inputSchema"))
        self._validator = validator_for(self.parameters)(self.parameters)
        self.fn = self._call_directly
        self.__name__ = name
        self.__doc__ = self.description
        with _made_lock:
            _made[next(_made_order)] = self

    def __repr__(self) -> str:
        return (
            f"McpTool({self.name!r}, server={self.server.describe()!r}, "
            f"effect={self.effect.value}, timeout_s={self.timeout_s})"
        )

    @property
    def source(self) -> str:
        return f"mcp {self.server.describe()}"

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Check the arguments against the server's schema; pydantic's ValidationError when
        they do not match (what the runner turns into an observation for the model)."""
        errors = sorted(self._validator.iter_errors(arguments), key=lambda e: list(e.path))
        if not errors:
            return dict(arguments)
        raise ValidationError.from_exception_data(
            f"{self.name} arguments",
            [
                {
                    "type": PydanticCustomError("json_schema", "{message}", {"message": e.message}),
                    "loc": tuple(e.absolute_path),
                    "input": e.instance,
                }
                for e in errors
            ],
        )

    async def run(self, kwargs: dict[str, Any], context: RunContext | None = None) -> ToolResult:
        """Start the server if it is not running (outside the tool's timeout, under the
        server's startup_timeout_s), then call it under the timeout. Never raises.

        The timeout is kept on the connection's side rather than by `Tool.run`: a call
        without an answer is followed there by a ping, and its error says whether the
        server still answers or was stopped for the next call to start it again."""
        started = time.perf_counter()
        try:
            conn.require_sdk()
            link = conn.connection(self.server)
            await conn.run(link.session())
        except Exception as exc:
            return ToolResult.system_error(f"tool {self.name!r}: {one_line(exc)}")
        if self.snapshot is not None:
            await _list_live(link)
        try:
            value = await self._call(link, kwargs)
        except BusinessFailure as exc:
            value = ToolResult.business_failure(exc.message, exc.data, stop=exc.stop)
        except Exception as exc:  # what the SDK raises besides (as Tool.run reports it)
            value = ToolResult.system_error(f"{type(exc).__name__}: {exc}")
        return settled(value, started, self.max_result_chars)

    async def _call_directly(self, **arguments: Any) -> Any:
        """`tool(**arguments)`: its data (BusinessFailure for `isError`), or a system error."""
        conn.require_sdk()
        return await self._call(conn.connection(self.server), arguments)

    async def _call(self, link: conn.Connection, arguments: dict[str, Any]) -> Any:
        from mcp.shared.exceptions import MCPError

        repeatable = self.idempotent or self.effect is Effect.READ_ONLY
        call = link.call(
            self.remote_name, arguments, repeatable=repeatable, timeout_s=self.timeout_s
        )
        try:
            result = await conn.run(call)
        except MCPError as exc:
            # A JSON-RPC error is the protocol's failure, never the tool's answer.
            return ToolResult.system_error(protocol_error(link, self.remote_name, exc))
        except ValidationError as exc:
            return ToolResult.system_error(
                f"{link.where} sent a result for {self.remote_name!r} that is not a valid "
                f"CallToolResult: {one_line(exc, 300)}"
            )
        except conn.CallTimedOut as exc:
            return ToolResult.system_error(
                f"tool {self.name!r} timed out after {self.timeout_s:g} s: {exc}"
            )
        except conn.McpServerError as exc:
            return ToolResult.system_error(str(exc))
        return tool_result(result)


def protocol_error(link: conn.Connection, tool: str, exc: Any) -> str:
    """The system error for a JSON-RPC error answering `tool`: one too large to read says its
    size and the limit; another's message is cut, saying how long it was."""
    refused = too_large(exc.data)
    if refused is not None:
        return (
            f"{link.where} answered {tool!r} with {refused.describe()}; it was dropped "
            "unread, and the server keeps serving"
        )
    message = exc.message if isinstance(exc.message, str) else str(exc.message)
    if len(message) > _ERROR_CHARS:
        message = f"{message[:_ERROR_CHARS]}… [a message of {len(message):,} characters]"
    return f"{link.where} answered {tool!r} with error {exc.code}: {message}"


def effect_of(annotations: dict[str, Any]) -> Effect:
    """The effect the server's annotations declare; read-only wins over destructive (MCP:
    destructiveHint means nothing for a read-only tool)."""
    read_only = annotations.get("readOnlyHint")
    if read_only is True:
        return Effect.READ_ONLY
    if read_only is False or annotations.get("destructiveHint") is True:
        return Effect.WRITE
    return Effect.UNKNOWN


def tool_result(result: Any) -> Any:
    """What the tool returns for a `CallToolResult`: its data, or a BusinessFailure raised
    for `isError` (the tool's own "no")."""
    text = _text_of(result.content)
    structured = result.structured_content
    if result.is_error:
        raise BusinessFailure(text or "the tool reported an error without a message", structured)
    if structured is None:
        return text
    if not text or _same_json(text, structured):
        return structured  # the text is the structured content's serialization (MCP's advice)
    if isinstance(structured, dict) and list(structured) == ["result"]:
        # A tool returning a plain value: the SDKs wrap it as {"result": value} beside its text.
        value = structured["result"]
        if text == value or _same_json(text, value):
            return value
    return {"structured": structured, "text": text}


def _text_of(content: Iterable[Any]) -> str:
    parts = []
    for block in content:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            size = len(block.data) * 3 // 4
            parts.append(f"[{kind} {block.mime_type}, {size:,} bytes]")
        elif kind == "resource_link":
            parts.append(f"[resource {block.uri}]")
        elif kind == "resource":
            inner = block.resource
            parts.append(getattr(inner, "text", None) or f"[resource {inner.uri}]")
        else:
            parts.append(f"[{kind} content]")
    return "\n".join(parts)


def _same_json(text: str, value: Any) -> bool:
    try:
        return bool(orjson.loads(text) == value)
    except orjson.JSONDecodeError:
        return False


def _checked_schema(server: McpServer, tool: str, schema: Any) -> dict[str, Any]:
    where = f"MCP server ({server.describe()}), tool {tool!r}: inputSchema"
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        raise ToolDefinitionError(
            f"{where}: expected a JSON Schema of type 'object' (the tool's arguments), got "
            f"{orjson.dumps(schema).decode()[:200]}; leave the tool out with include=[...]"
        )
    try:
        validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        at = "/".join(str(p) for p in exc.absolute_path) or "(root)"
        raise ToolDefinitionError(
            f"{where}: not a valid JSON Schema at {at}: {one_line(exc.message, 200)}; "
            "leave the tool out with include=[...]"
        ) from None
    return {**schema, "type": "object"}


@dataclass(frozen=True)
class Snapshot:
    """A `schema=` file and the tool list it held when the agent was defined."""

    path: Path
    tools: list[dict[str, Any]]


def snapshot_and_live(tool: Any) -> tuple[Snapshot, list[dict[str, Any]]] | None:
    """For an MCP tool whose list came from a `schema=` file: the snapshot, and the tool
    list its server gave when it last started live (None when it never did)."""
    snapshot = getattr(tool, "snapshot", None)
    if not isinstance(tool, McpTool) or snapshot is None:
        return None
    link = conn.find(tool.server)
    live = getattr(link, "live_tools", None)
    return (snapshot, live) if live is not None else None


async def _list_live(link: conn.Connection) -> None:
    """Ask a server whose tools came from a snapshot for its own list, once a start, so what
    the model was shown can be compared with what the server has now."""
    if link.live_tools_start == link.starts:
        return
    link.live_tools_start = link.starts
    try:
        link.live_tools = await conn.run(link.list_tools())
    except Exception:  # the call that follows reports what is wrong with the server
        link.live_tools = None


def local_name(remote: str, prefix: str | None) -> str:
    """The tool's name for the model: prefixed, with characters OpenAI refuses replaced."""
    name = f"{prefix}_{remote}" if prefix else remote
    return _UNSAFE_NAME.sub("_", name)[:64]


def mcp_tools(
    server: McpServer,
    *,
    prefix: str | None = None,
    include: Iterable[str] | None = None,
    timeout_s: float | None = DEFAULT_MCP_TIMEOUT_S,
    max_result_chars: int = DEFAULT_MAX_RESULT_CHARS,
    schema: str | Path | None = None,
) -> list[Tool]:
    """The tools of `server` (those named in `include`, by their server names), as `Tool`s.

    Without `schema`, the server is started now and asked for its tools. With `schema` (a
    JSON file), the tool list is read from it when it exists — the server is then started
    only when a tool runs — and written from the server when it does not.
    """
    path = Path(schema) if schema is not None else None
    specs = _specs(server, path)
    snapshot = Snapshot(path, specs) if path is not None else None
    wanted = None if include is None else list(include)
    if wanted is not None:
        known = {spec["name"] for spec in specs}
        missing = [name for name in wanted if name not in known]
        if missing:
            raise ToolDefinitionError(
                f"MCP server ({server.describe()}) has no tool named "
                f"{', '.join(map(repr, missing))}; its tools: {', '.join(sorted(known))}"
            )
        specs = [spec for spec in specs if spec["name"] in wanted]
    return [
        McpTool(
            server,
            spec,
            name=local_name(spec["name"], prefix),
            timeout_s=timeout_s,
            max_result_chars=max_result_chars,
            snapshot=snapshot,
        )
        for spec in specs
    ]


def _specs(server: McpServer, snapshot: Path | None) -> list[dict[str, Any]]:
    if snapshot is not None and snapshot.exists():
        return read_snapshot(snapshot)
    conn.require_sdk()
    link = conn.connection(server)
    specs = conn.run_blocking(link.list_tools())
    if snapshot is not None:
        write_snapshot(snapshot, server, specs)
    return specs


def write_snapshot(path: Path, server: McpServer, specs: list[dict[str, Any]]) -> None:
    """The tool list as the server sent it, and which server (its command or URL only)."""
    data = {"version": SNAPSHOT_VERSION, "server": server.describe(), "tools": specs}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n")


def _snapshot_too_big(size: int, limit: int) -> str:
    return f"{size:,} bytes, over the limit of {limit:,} (set AGENTBENCH_MAX_FILE_MB to raise it)"


def read_snapshot(path: Path) -> list[dict[str, Any]]:
    """The tools of a snapshot file; ToolDefinitionError names the file and what is wrong."""
    try:  # bounded, a regular file: a named pipe would wait for a writer forever
        data = orjson.loads(read_bytes(path, max_file_bytes(), _snapshot_too_big))
    except (SourceError, orjson.JSONDecodeError) as exc:
        raise ToolDefinitionError(f"{path}: cannot read the MCP tool snapshot: {exc}") from None
    if not isinstance(data, dict) or data.get("version") != SNAPSHOT_VERSION:
        raise ToolDefinitionError(
            f"{path}: not an MCP tool snapshot of version {SNAPSHOT_VERSION} (expected "
            '{"version": 1, "server": ..., "tools": [...]}); delete it to write it again'
        )
    tools = data.get("tools")
    if not isinstance(tools, list):
        raise ToolDefinitionError(f"{path}: field 'tools': expected a list of MCP tools")
    for index, spec in enumerate(tools):
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
            raise ToolDefinitionError(
                f"{path}: tools[{index}]: expected an MCP tool with a 'name' and 'inputSchema'"
            )
    return tools
