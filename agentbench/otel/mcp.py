"""MCP calls in the names of the OpenTelemetry MCP semantic conventions.

The conventions (`docs/gen-ai/mcp.md`, now kept in open-telemetry/semantic-conventions-genai)
describe an MCP request or notification as a span named `{mcp.method.name} {target}` (the
target is the tool's or the prompt's name; without one, the method alone), of kind `CLIENT`
on the side that sends it and `SERVER` on the side that serves it, carrying `mcp.method.name`,
`gen_ai.operation.name = execute_tool` for `tools/call` (and for nothing else),
`gen_ai.tool.name`, `jsonrpc.request.id`, `mcp.session.id`, `mcp.protocol.version`,
`network.transport` (`pipe` for stdio, `tcp` for HTTP) and `error.type` when it failed (the
JSON-RPC error code, or `tool_error` for a `CallToolResult` with `isError`). The span's status
is `ERROR` when `error.type` is there, its description the JSON-RPC error's message.

`mcp_call_attributes` gives a span's name and attributes, for a program that makes MCP spans of
its own (a proxy between a client and a server); `span_kind` the kind for a side.

agentbench's runtime traces its own tool calls (`execute_tool` spans, `agentbench.otel.spans`),
so for a tool of an MCP server it makes no second span: as the conventions ask of an MCP
instrumentation that finds the GenAI one already tracing the call, the MCP attributes are added
to the `execute_tool` span (which keeps its GenAI name and kind). `McpToolIndex` tells which of
a run's tools came from an MCP server: a tool definition the model was sent that is the very
entry an `McpTool` of this process puts in a request (name, description and schema alike).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from agentbench.otel import conventions as c

if TYPE_CHECKING:
    from opentelemetry.trace import SpanKind

    from agentbench.runtime.mcp.tools import McpTool

METHOD = "mcp.method.name"
PROTOCOL_VERSION = "mcp.protocol.version"
SESSION_ID = "mcp.session.id"
RESOURCE_URI = "mcp.resource.uri"
REQUEST_ID = "jsonrpc.request.id"
JSONRPC_VERSION = "jsonrpc.protocol.version"
RPC_STATUS = "rpc.response.status_code"
NETWORK_TRANSPORT = "network.transport"
NETWORK_PROTOCOL = "network.protocol.name"
NETWORK_PROTOCOL_VERSION = "network.protocol.version"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"
CLIENT_ADDRESS = "client.address"
CLIENT_PORT = "client.port"
PROMPT_NAME = "gen_ai.prompt.name"
# agentbench's own, on the execute_tool span of an MCP tool.
MCP_SERVER = "agentbench.mcp.server"  # the server as messages name it (no credentials)
MCP_REMOTE_NAME = "agentbench.mcp.tool.remote_name"  # the tool's name on the server, if other

TOOLS_CALL = "tools/call"
TOOL_ERROR = "tool_error"  # error.type of a CallToolResult with isError (the conventions')

Side = Literal["client", "server"]

# MCP's transports (and the network.transport values themselves) → network.transport and
# network.protocol.name, as the conventions' "Recording MCP transport" table has them.
_TRANSPORTS: dict[str, tuple[str, str | None]] = {
    "stdio": ("pipe", None),
    "http": ("tcp", "http"),
    "streamable-http": ("tcp", "http"),
    "streamable_http": ("tcp", "http"),
    "sse": ("tcp", "http"),
    "websocket": ("tcp", "websocket"),
    "pipe": ("pipe", None),
    "tcp": ("tcp", None),
    "quic": ("quic", None),
    "udp": ("udp", None),
    "unix": ("unix", None),
}
# JSON-RPC codes a server answers a request it cannot serve with: the caller's mistake, not
# the server's failure, so no error on the server's span (on the client's, every code is).
_CALLER_CODES = frozenset({-32700, -32600, -32601, -32602, -32002})


def network_of(transport: str) -> tuple[str, str | None]:
    """`network.transport` and `network.protocol.name` (None: not applicable) for an MCP
    transport (`stdio`, `http`/`streamable-http`, `sse`, `websocket`) or a network.transport
    value (`pipe`, `tcp`, `quic`, `udp`, `unix`); ValueError for another."""
    found = _TRANSPORTS.get(transport.strip().lower())
    if found is None:
        raise ValueError(
            f"unknown MCP transport {transport!r}: expected one of {', '.join(_TRANSPORTS)}"
        )
    return found


def is_error_code(code: int | str, side: Side = "client") -> bool:
    """Whether a JSON-RPC error code marks the call failed on `side`'s span: every code on the
    client's; on the server's, all but those saying the request could not be served (parse
    error, invalid request, unknown method, invalid params, resource not found)."""
    if side == "client":
        return True
    try:
        return int(code) not in _CALLER_CODES
    except (TypeError, ValueError):
        return True


def span_kind(side: Side) -> SpanKind:
    """The span kind the conventions give a side: `CLIENT` for the side that sends the request
    or notification, `SERVER` for the side that serves it."""
    from opentelemetry.trace import SpanKind

    return SpanKind.CLIENT if side == "client" else SpanKind.SERVER


def mcp_call_attributes(
    method: str,
    *,
    tool: str | None = None,
    prompt: str | None = None,
    transport: str,
    session_id: str | None = None,
    request_id: str | int | None = None,
    protocol_version: str | None = None,
    error_type: str | None = None,
    rpc_status_code: int | str | None = None,
    jsonrpc_version: str | None = None,
    network_protocol_version: str | None = None,
    resource_uri: str | None = None,
    address: str | None = None,
    port: int | None = None,
    side: Side = "client",
) -> tuple[str, dict[str, Any]]:
    """The name and attributes of the span of one MCP request or notification.

    `side="client"` (the default) describes the call as its sender sees it — the span kind is
    then `CLIENT` — and `side="server"` as the side serving it sees it (kind `SERVER`); take
    the kind from `span_kind(side)`. `transport` is MCP's (`stdio`, `http`, `sse`…) or a
    `network.transport` value. `request_id` is the JSON-RPC `id` (None for a notification:
    then no `jsonrpc.request.id`). `address`/`port` are the peer's: `server.*` on the client's
    span, `client.*` on the server's. `rpc_status_code` is a JSON-RPC error code the answer
    carried; without an `error_type`, it becomes `error.type` where it counts as an error
    (`is_error_code`). Pass `error_type="tool_error"` for a `CallToolResult` with `isError`,
    or a low-cardinality name of what failed (`timeout`, an exception's type). Set the span's
    status to ERROR when the attributes hold `error.type`, with the JSON-RPC error's message.
    """
    if not method:
        raise ValueError("an MCP span needs the method (mcp.method.name), e.g. 'tools/call'")
    attributes: dict[str, Any] = {METHOD: method}
    if tool is not None:
        attributes[c.TOOL_NAME] = tool
    if prompt is not None:
        attributes[PROMPT_NAME] = prompt
    if method == TOOLS_CALL:
        attributes[c.OPERATION] = "execute_tool"
    optional = {
        REQUEST_ID: None if request_id is None else str(request_id),
        JSONRPC_VERSION: jsonrpc_version if jsonrpc_version != "2.0" else None,
        SESSION_ID: session_id or None,
        PROTOCOL_VERSION: protocol_version or None,
        RESOURCE_URI: resource_uri,
    }
    attributes.update({key: value for key, value in optional.items() if value is not None})
    attributes.update(_network(transport, network_protocol_version, address, port, side))
    if rpc_status_code is not None:
        attributes[RPC_STATUS] = str(rpc_status_code)
        if error_type is None and is_error_code(rpc_status_code, side):
            error_type = str(rpc_status_code)
    if error_type:
        attributes[c.ERROR_TYPE] = error_type
    target = tool if tool is not None else prompt
    return (f"{method} {target}" if target else method), attributes


def _network(
    transport: str, version: str | None, address: str | None, port: int | None, side: Side
) -> dict[str, Any]:
    """The transport's attributes, and the peer's address: the server's as the client sees it,
    the client's as the server does."""
    network, protocol = network_of(transport)
    attributes: dict[str, Any] = {NETWORK_TRANSPORT: network}
    if protocol is not None:
        attributes[NETWORK_PROTOCOL] = protocol
        if version:
            attributes[NETWORK_PROTOCOL_VERSION] = version
    if address:
        attributes[SERVER_ADDRESS if side == "client" else CLIENT_ADDRESS] = address
        if port is not None:
            attributes[SERVER_PORT if side == "client" else CLIENT_PORT] = int(port)
    return attributes


# -- agentbench's own MCP tools -----------------------------------------------------------------
# The system errors `McpTool` writes (agentbench.runtime.mcp.tools): a JSON-RPC error's code,
# and a call that ran out of its time.
_RPC_ERROR = re.compile(r"MCP server \(.+?\) answered .+? with error (-?\d{1,9}): ")
_TIMED_OUT = re.compile(r"tool .+? timed out after ")


def tool_error_attributes(result_kind: str, error: str | None) -> dict[str, Any]:
    """`error.type` (and `rpc.response.status_code`) for an MCP tool call's result, as the
    runtime reports it: `tool_error` for the tool's own "no" (`isError`), the JSON-RPC code for
    an error answer, `timeout`, or `system_error` for another failure; nothing for success."""
    if result_kind == "ok":
        return {}
    if result_kind == "business_failure":
        return {c.ERROR_TYPE: TOOL_ERROR}
    text = error or ""
    code = _RPC_ERROR.match(text)
    if code is not None:
        return {c.ERROR_TYPE: code.group(1), RPC_STATUS: code.group(1)}
    if _TIMED_OUT.match(text):
        return {c.ERROR_TYPE: "timeout"}
    return {c.ERROR_TYPE: "system_error"}


@dataclass(frozen=True)
class ProxiedTool:
    """A tool a framework's own MCP client called through a case's `agentbench mcp-proxy`."""

    name: str
    server: str  # the name the target gave the server
    transport: str  # how the client reached the proxy: "stdio" or "http"
    protocol_version: str | None


class McpToolIndex:
    """Which tools of a request are MCP tools, and what their spans carry: an `McpTool` of
    this process, or a tool a live `agentbench mcp-proxy` lists (a boundary target's)."""

    def tools_of(self, definitions: Iterable[Any]) -> dict[str, McpTool | ProxiedTool]:
        """The request's tool definitions that are the entry of an `McpTool` made in this
        process, or a tool (same name and description) of a live MCP proxy, by tool name;
        empty when neither module was loaded."""
        definitions = list(definitions)
        found: dict[str, McpTool | ProxiedTool] = dict(self._runtime_tools(definitions))
        proxies = getattr(sys.modules.get("agentbench.mcp_proxy.proxy"), "live_proxies", None)
        for definition in definitions if proxies is not None else ():
            function = definition.get("function") if isinstance(definition, dict) else None
            name = function.get("name") if isinstance(function, dict) else None
            if not isinstance(name, str) or name in found:
                continue
            for proxy in proxies():
                listed = proxy.listed(name)
                if listed is not None and (listed.get("description") or "") == (
                    function.get("description") or ""
                ):
                    found[name] = ProxiedTool(
                        name, proxy.server, proxy.client_transport, proxy.protocol_version
                    )
                    break
        return found

    def _runtime_tools(self, definitions: list[Any]) -> dict[str, McpTool]:
        module = sys.modules.get("agentbench.runtime.mcp.tools")
        made = getattr(module, "made_tools", None)
        if made is None:
            return {}
        by_name: dict[str, list[McpTool]] = {}
        for tool in made():
            by_name.setdefault(tool.name, []).append(tool)
        if not by_name:
            return {}
        found: dict[str, McpTool] = {}
        for definition in definitions:
            function = definition.get("function") if isinstance(definition, dict) else None
            name = function.get("name") if isinstance(function, dict) else None
            for tool in by_name.get(name, ()) if isinstance(name, str) else ():
                if tool.openai_schema() == definition:
                    found[name] = tool
                    break
        return found

    @staticmethod
    def started(tool: McpTool | ProxiedTool) -> dict[str, Any]:
        """The attributes an MCP tool's `execute_tool` span starts with: the method, the
        transport and server, and the session's id and protocol version once it has one."""
        from agentbench.runtime.mcp.servers import HttpServer

        if isinstance(tool, ProxiedTool):
            _, attributes = mcp_call_attributes(
                TOOLS_CALL,
                tool=tool.name,
                transport=tool.transport,
                protocol_version=tool.protocol_version,
            )
            attributes[MCP_SERVER] = f"agentbench mcp-proxy: {tool.server}"
            return attributes

        server = tool.server
        transport = "http" if isinstance(server, HttpServer) else "stdio"
        address = port = None
        if isinstance(server, HttpServer):
            parts = urlsplit(server.url)
            address = parts.hostname
            port = parts.port or (443 if parts.scheme == "https" else 80)
        _, attributes = mcp_call_attributes(
            TOOLS_CALL, tool=tool.name, transport=transport, address=address, port=port
        )
        attributes[MCP_SERVER] = server.describe()
        if tool.remote_name != tool.name:
            attributes[MCP_REMOTE_NAME] = tool.remote_name
        attributes.update(McpToolIndex.session(tool))
        return attributes

    @staticmethod
    def session(tool: McpTool | ProxiedTool) -> dict[str, Any]:
        """`mcp.session.id` and `mcp.protocol.version` of the server's live session, when
        there is one (a server not started yet has neither; stdio has no session id)."""
        from agentbench.runtime.mcp import connection as conn

        if isinstance(tool, ProxiedTool):
            return {}  # what the proxy knows was given at the start

        link = conn.find(tool.server)
        if link is None:
            return {}
        attributes: dict[str, Any] = {}
        if link.protocol_version:
            attributes[PROTOCOL_VERSION] = link.protocol_version
        if link.session_id:
            attributes[SESSION_ID] = link.session_id
        return attributes
