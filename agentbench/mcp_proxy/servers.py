"""A case's MCP servers, each behind a proxy on the case's loopback server.

A boundary target asks its `TargetContext` for a server (`target.mcp_stdio(name, command)`,
`target.mcp_url(name, ...)`) and hands what it gets to its framework's own MCP client; the
proxy behind it records, replays or faults by the case's tool policies
(`mcp_proxy.proxy`). One proxy per server name for the whole case (every turn), so a
recorded session is replayed in order across turns. When the case is over, `recordings`
is what the real servers said (kept in the cassette when the case was recorded) and
`drifts` what of it differs from the recording, as the request drift the harness reports.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentbench.errors import UsageError
from agentbench.mcp_proxy.http_front import McpRoutes
from agentbench.mcp_proxy.proxy import Finding, McpProxy
from agentbench.mcp_proxy.recording import McpRecording, recordings_data
from agentbench.mcp_proxy.upstream import HttpUpstream, StdioUpstream
from agentbench.replay.drift import Change
from agentbench.replay.drifted_calls import Drift
from agentbench.replay.fallback_paths import with_fallback_drifts
from agentbench.replay.tool_policy import ToolPolicies

BRIDGE = Path(__file__).with_name("bridge.py")
# What differs in the handshake or the lists is request drift: the model is shown the tools.
DRIFTING = ("tool_list_changed", "initialize_changed")


@dataclass(frozen=True)
class McpCommand:
    """A command that starts "the server" for a client that starts its servers: it reaches
    the case's proxy. `params` is the OpenAI Agents SDK's `MCPServerStdio(params=...)`;
    a client that takes a command and its arguments apart takes `command` and `args`."""

    command: str
    args: list[str] = field(default_factory=list)

    @property
    def params(self) -> dict[str, Any]:
        return {"command": self.command, "args": list(self.args)}

    @property
    def argv(self) -> list[str]:
        return [self.command, *self.args]


class CaseMcpServers:
    """The proxies of one case, by server name, and the routes that reach them."""

    def __init__(
        self,
        *,
        recorded: dict[str, McpRecording] | None = None,
        policies: ToolPolicies | None = None,
        recording: bool = False,
    ) -> None:
        self.recorded = dict(recorded or {})
        self.policies = policies or ToolPolicies()
        self.recording = recording
        self.proxies: dict[str, McpProxy] = {}
        self.routes = McpRoutes(self.proxies.get)
        self.root_url = ""  # the loopback server's, once it listens

    def url(self, name: str, upstream: Any, transport: str = "http") -> str:
        """The Streamable HTTP address of server `name`'s proxy (made on first ask)."""
        if not name or not name.replace("-", "").replace("_", "").isalnum():
            raise UsageError(f"MCP server name {name!r}: use letters, digits, '-' and '_'")
        if not self.root_url:
            raise UsageError("MCP servers are reached while a case runs, from its target")
        if name not in self.proxies:
            self.proxies[name] = McpProxy(
                name,
                recorded=self.recorded.get(name),
                upstream=upstream,
                policies=self.policies,
                recording=self.recording,
                client_transport=transport,
            )
        return f"{self.root_url}/mcp/{name}"

    def recordings(self) -> dict[str, Any]:
        """What the real servers said, as a cassette keeps it (`agentbench.mcp`)."""
        return recordings_data({name: p.made for name, p in self.proxies.items()}, packed=True)

    def tool_outcome(self, tool: str, arguments: dict[str, Any]) -> tuple[Any, str] | None:
        """How a call of `tool` through one of the proxies ended, with the tool's declared
        effect; None for a tool no proxy served (the framework's own)."""
        for proxy in self.proxies.values():
            ended = proxy.outcome(tool, arguments)
            if ended is not None:
                return ended, proxy.effect(tool) or "unknown"
        return None

    def findings(self) -> list[Finding]:
        return [f for proxy in self.proxies.values() for f in proxy.findings]

    def drifts(self, model_drifts: list[Drift]) -> list[Drift]:
        """The model's drifts, with the servers' changed handshakes and lists first, as drift
        of the first model call (the one that showed the model the tools)."""
        changes = [
            Change(f"mcp {f.server} {f.what}: {c.path}", c.kind, c.old, c.new)
            for f in self.findings()
            if f.kind in DRIFTING
            for c in f.changes
        ]
        return with_fallback_drifts([Drift(0, changes)] if changes else [], model_drifts)

    async def close(self) -> None:
        for proxy in self.proxies.values():
            await proxy.close()


def stdio_upstream(
    command: Sequence[str], env: dict[str, str] | None, cwd: str | Path | None
) -> Any:
    words = [str(w) for w in command]
    if not words:
        raise UsageError("an MCP server's command is empty")
    return lambda: StdioUpstream(words, env=env, cwd=str(cwd) if cwd is not None else None)


def http_upstream(url: str, headers: dict[str, str] | None) -> Any:
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"MCP server URL {url!r}: expected http:// or https://")
    return lambda: HttpUpstream(url, headers=headers)


def bridge_command(url: str) -> McpCommand:
    """The command a stdio client starts to reach the proxy at `url`."""
    return McpCommand(sys.executable, [str(BRIDGE), url])
