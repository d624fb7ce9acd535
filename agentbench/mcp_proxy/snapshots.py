"""`agentbench mcp-proxy --update FILE`: refresh what a file keeps of a server's lists, on purpose.

Three kinds of file keep a server's tool list, and each is refreshed in place from the live
server, its recorded calls left as they were: a recording the proxy wrote (`servers:`), a
case's cassette (its `agentbench.mcp.<server>`), and the tool snapshot an agentbench agent's
`mcp_tools(..., schema=PATH)` keeps. What changed is returned, tool by tool and field by field,
for the command to print: an update is a decision, and the reader sees what it decided.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from agentbench.errors import UsageError
from agentbench.mcp_proxy.matching import tool_list_changes
from agentbench.mcp_proxy.proxy import DEFAULT_INITIALIZE
from agentbench.mcp_proxy.recording import (
    LIST_METHODS,
    McpRecording,
    RecordingError,
    load_file,
    recordings_data,
    recordings_from,
    save_file,
)
from agentbench.mcp_proxy.upstream import Upstream, UpstreamError
from agentbench.replay.drift import Change

# The capability that says a server has each list (a server without it is not asked).
_CAPABILITY = {
    "tools/list": "tools",
    "resources/list": "resources",
    "resources/templates/list": "resources",
    "prompts/list": "prompts",
}
MAX_PAGES = 100  # a server whose cursor never ends is not followed forever


@dataclass(frozen=True)
class Listed:
    """What a live server said when asked for its lists."""

    initialize: dict[str, Any]
    lists: dict[str, Any]  # method (and cursor) -> result

    @property
    def tools(self) -> list[dict[str, Any]]:
        return McpRecording("", None, self.lists).tools or []


async def list_server(upstream: Upstream, timeout_s: float) -> Listed:
    """Handshake with the live server and ask for every list it has, every page."""
    await upstream.start()
    try:
        answer = await upstream.request("initialize", DEFAULT_INITIALIZE, timeout_s)
        result = answer.get("result")
        if not isinstance(result, dict):
            raise UpstreamError(f"the MCP server ({upstream.describe()}) refused the handshake")
        await upstream.notify("notifications/initialized", None)
        capabilities = result.get("capabilities") or {}
        lists: dict[str, Any] = {}
        for method in LIST_METHODS:
            if _CAPABILITY[method] not in capabilities:
                continue
            cursor = None
            for _ in range(MAX_PAGES):
                params = {"cursor": cursor} if cursor else {}
                page = await upstream.request(method, params, timeout_s)
                if not isinstance(page.get("result"), dict):
                    break  # a server may not have resource templates though it has resources
                lists[f"{method}?cursor={cursor}" if cursor else method] = page["result"]
                cursor = page["result"].get("nextCursor")
                if not cursor:
                    break
        return Listed(result, lists)
    finally:
        await upstream.close()


def update_file(path: Path, server: str | None, listed: Listed) -> tuple[str, list[Change]]:
    """Write the live lists into `path`; (what kind of file it was, the tool changes)."""
    if path.suffix.lower() == ".json" and _is_tool_snapshot(path):
        return "tool snapshot", _update_snapshot(path, listed)
    if path.exists() and _is_cassette(path):
        return "cassette", _update_cassette(path, server, listed)
    recordings = load_file(path) if path.exists() else {}
    name = _server_name(path, server, recordings)
    old = recordings.get(name) or McpRecording(name)
    changes = tool_list_changes(old.tools or [], listed.tools)
    recordings[name] = McpRecording(name, listed.initialize, listed.lists, old.calls)
    save_file(path, recordings)
    return "recording", changes


def _server_name(path: Path, server: str | None, recordings: dict[str, McpRecording]) -> str:
    if server is not None:
        return server
    if len(recordings) == 1:
        return next(iter(recordings))
    if not recordings:
        return "server"
    names = ", ".join(sorted(recordings))
    raise UsageError(f"{path} keeps several MCP servers ({names}): name one with --server")


def _is_tool_snapshot(path: Path) -> bool:
    try:
        data = orjson.loads(path.read_bytes()) if path.exists() else None
    except (OSError, orjson.JSONDecodeError):
        return False
    return isinstance(data, dict) and "tools" in data and "servers" not in data


def _update_snapshot(path: Path, listed: Listed) -> list[Change]:
    data = orjson.loads(path.read_bytes())
    changes = tool_list_changes(data.get("tools") or [], listed.tools)
    data["tools"] = listed.tools
    path.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n")
    return changes


def _is_cassette(path: Path) -> bool:
    if path.suffix.lower() not in (".yaml", ".yml", ".json"):
        return False
    try:
        head = path.read_bytes()[:4096]
    except OSError:
        return False
    return b"interactions" in head or b"requests" in head


def _update_cassette(path: Path, server: str | None, listed: Listed) -> list[Change]:
    from agentbench.replay.cassette import Cassette, CassetteError

    try:
        cassette = Cassette.load(path)
    except CassetteError as exc:
        raise UsageError(f"--update: {exc}") from None
    try:
        recordings = recordings_from(cassette.info.get("mcp"), f"{path}: mcp")
    except RecordingError as exc:
        raise UsageError(f"--update: {exc}") from None
    name = _server_name(path, server, recordings)
    old = recordings.get(name) or McpRecording(name)
    changes = tool_list_changes(old.tools or [], listed.tools)
    recordings[name] = McpRecording(name, listed.initialize, listed.lists, old.calls)
    cassette.update_info(mcp=recordings_data(recordings, packed=True))
    cassette.save(path)
    return changes
