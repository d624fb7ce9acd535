"""`agentbench mcp-proxy`: record, replay or fault any MCP client's server, over stdio or HTTP.

Glue: reads the recording, builds the `mcp_proxy.proxy.McpProxy` with the real server behind
it (a command after `--`, or `--upstream URL`), serves it on this process's stdin and stdout
(what a client that starts a command talks to) or on `--port` over Streamable HTTP, then
writes the recording and says on stderr what it did and what differed. stdout carries the
protocol, never a word of ours. Exit code 0: every call answered as recorded; 1: something
differed from the recording (a call it has no answer for, a changed tool list or answer);
2: usage; 3: the real server failed.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from agentbench.errors import UsageError

if TYPE_CHECKING:  # what the command runs is imported when it runs: `--help` stays fast
    from agentbench.mcp_proxy.proxy import McpProxy
    from agentbench.mcp_proxy.recording import McpRecording
    from agentbench.mcp_proxy.upstream import Upstream
    from agentbench.replay.tool_policy import ToolPolicies

EXIT_OK, EXIT_DIFFERED, EXIT_INFRA = 0, 1, 3


@click.command(
    "mcp-proxy",
    context_settings={"ignore_unknown_options": False},
    epilog="""\b
Examples:
  agentbench mcp-proxy --record time.mcp.yaml -- uvx mcp-server-time
  agentbench mcp-proxy --replay time.mcp.yaml
  agentbench mcp-proxy --replay time.mcp.yaml --live -- uvx mcp-server-time
  agentbench mcp-proxy --replay time.mcp.yaml --tool convert_time=fault:timeout
  agentbench mcp-proxy --record docs.mcp.yaml --port 8765 --upstream https://mcp.example.com/mcp
  agentbench mcp-proxy --update time.mcp.yaml -- uvx mcp-server-time
""",
)
@click.option(
    "--record",
    "record_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Forward everything to the real server and write what it said to this file "
    "(replacing it) when the client is done.",
)
@click.option(
    "--replay",
    "replay_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Be the server: answer from this recording, with no real server started. A call "
    "it has no answer for is a JSON-RPC error naming the nearest recorded call.",
)
@click.option(
    "--live",
    is_flag=True,
    help="With --replay and a real server: forward everything, and report where the "
    "server's tool list, handshake or answers differ from the recording (exit 1).",
)
@click.option(
    "--update",
    "update_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Refresh the lists (tools, resources, prompts) this file keeps from the live server "
    "and print what changed: a recording, a case's cassette, or an mcp_tools(schema=) "
    "snapshot. Recorded calls are kept.",
)
@click.option(
    "--server",
    "server_name",
    metavar="NAME",
    help="The server's name in the recording [default: its only server, else 'server'].",
)
@click.option(
    "--tool",
    "tool_specs",
    multiple=True,
    metavar="NAME=POLICY",
    help="What one tool does: live, recorded, stub:VALUE, fault (error), fault:jsonrpc, "
    "fault:timeout, fault:crash, fault:slow:SECONDS. Repeatable.",
)
@click.option(
    "--upstream",
    metavar="URL",
    help="The real server over Streamable HTTP, in place of a command after --.",
)
@click.option(
    "--header",
    "headers",
    multiple=True,
    metavar="NAME:VALUE",
    help="A header for --upstream (Authorization: Bearer …). Repeatable; never recorded.",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Serve Streamable HTTP on 127.0.0.1:PORT/mcp (0: a free port; the URL is printed) "
    "instead of stdio; runs until Ctrl-C or SIGTERM.",
)
@click.option(
    "--timeout",
    "timeout_s",
    type=click.FloatRange(0.1, 3600),
    default=120.0,
    show_default=True,
    help="Seconds the real server may take to answer one request.",
)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def mcp_proxy(
    record_path: Path | None,
    replay_path: Path | None,
    live: bool,
    update_path: Path | None,
    server_name: str | None,
    tool_specs: tuple[str, ...],
    upstream: str | None,
    headers: tuple[str, ...],
    port: int | None,
    timeout_s: float,
    command: tuple[str, ...],
) -> int:
    """Record, replay or fault an MCP server for any client: put this command where the
    client starts its server (`-- the server's command`), or give clients that take a URL
    --port. Tools, their descriptions and schemas are part of the recording."""
    from agentbench.replay.tool_policy import ToolPolicies, ToolPolicy

    modes = [p for p in (record_path, replay_path, update_path) if p is not None]
    if len(modes) != 1:
        raise UsageError("agentbench mcp-proxy needs one of --record, --replay or --update FILE")
    real = _upstream(command, upstream, headers, timeout_s)
    if update_path is not None:
        return _update(update_path, server_name, real, timeout_s)
    policies = ToolPolicies.parse(
        "live" if (record_path is not None or live) else "recorded", tool_specs
    )
    if record_path is not None and real is None:
        raise UsageError("--record needs the real server: a command after --, or --upstream URL")
    if live and (replay_path is None or real is None):
        raise UsageError("--live goes with --replay and the real server (a command after --)")
    if real is None and ToolPolicy.LIVE in policies.per_tool.values():
        raise UsageError("a --tool NAME=live needs the real server: a command after --")
    recorded, name = _recorded(replay_path, server_name, command, upstream)
    return _serve(
        name, recorded, real, policies, record_path, port, timeout_s, recording=bool(record_path)
    )


def _upstream(
    command: tuple[str, ...], url: str | None, headers: tuple[str, ...], timeout_s: float
) -> Upstream | None:
    from agentbench.mcp_proxy.upstream import HttpUpstream, StdioUpstream

    if command and url:
        raise UsageError("give the real server once: a command after --, or --upstream URL")
    if headers and not url:
        raise UsageError("--header goes with --upstream URL")
    if command:
        return StdioUpstream(command)
    if url:
        if not url.startswith(("http://", "https://")):
            raise UsageError(f"--upstream {url!r}: expected an http:// or https:// URL")
        pairs = {}
        for header in headers:
            key, sep, value = header.partition(":")
            if not sep or not key.strip():
                raise UsageError(f"--header {header!r}: expected NAME:VALUE")
            pairs[key.strip()] = value.strip()
        return HttpUpstream(url, headers=pairs)
    return None


def _recorded(
    path: Path | None, server: str | None, command: tuple[str, ...], url: str | None
) -> tuple[McpRecording | None, str]:
    from agentbench.mcp_proxy.recording import RecordingError, load_file

    default = server or _name_of(command, url)
    if path is None:
        return None, default
    try:
        recordings = load_file(path)
    except RecordingError as exc:
        raise UsageError(f"--replay: {exc}") from None
    if server is None and len(recordings) == 1:
        name = next(iter(recordings))
        return recordings[name], name
    if default not in recordings:
        known = ", ".join(sorted(recordings)) or "none"
        raise UsageError(f"--replay: {path} has no server {default!r} (it has: {known})")
    return recordings[default], default


def _name_of(command: tuple[str, ...], url: str | None) -> str:
    if command:
        words = [w for w in command if not w.startswith("-")]
        return Path(words[-1] if words else command[0]).name or "server"
    return "server"


def _serve(
    name: str,
    recorded: McpRecording | None,
    real: Upstream | None,
    policies: ToolPolicies,
    record_path: Path | None,
    port: int | None,
    timeout_s: float,
    *,
    recording: bool,
) -> int:
    from agentbench.mcp_proxy.proxy import McpProxy

    proxy = McpProxy(
        name,
        recorded=recorded,
        upstream=(lambda: real) if real is not None else None,
        policies=policies,
        recording=recording,
        timeout_s=timeout_s,
    )
    crashed = False
    try:
        crashed = not asyncio.run(_run(proxy, port))
    finally:
        if record_path is not None:
            _save(record_path, name, proxy)
    failed = list(proxy.findings)
    for finding in failed:
        _say(finding.describe())
    ended = " (ended by an injected crash)" if crashed else ""
    _say(f"answered {proxy.answered} request(s){ended}; {len(failed)} difference(s)")
    if proxy.upstream_failures:
        return EXIT_INFRA
    return EXIT_DIFFERED if failed else EXIT_OK


def _save(path: Path, name: str, proxy: McpProxy) -> None:
    """Write what the server said; a server that never answered the handshake left nothing
    to keep, and a recording already there is not replaced by nothing."""
    from agentbench.mcp_proxy.recording import save_file

    if proxy.made.initialize is None:
        kept = "left as it was" if path.exists() else "not written"
        _say(f"the server never answered the handshake: nothing recorded; {path} {kept}")
        return
    save_file(path, {name: proxy.made})
    _say(f"recorded {len(proxy.made.calls)} call(s) of {name} to {path}")


async def _run(proxy: McpProxy, port: int | None) -> bool:
    from agentbench.mcp_proxy.stdio_front import serve_stdio

    try:
        if port is None:
            return await serve_stdio(proxy)
        await _serve_http(proxy, port)
        return True
    finally:
        await proxy.close()


async def _serve_http(proxy: McpProxy, port: int) -> None:
    from agentbench.boundary.server import BoundaryServer
    from agentbench.mcp_proxy.http_front import McpRoutes

    async def no_model(*_: object) -> tuple[int, str, bytes]:
        return 404, "application/json", b'{"error": "this is an MCP proxy: POST /mcp"}'

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    routes = McpRoutes(lambda name: proxy if name in ("", proxy.server) else None)
    server = BoundaryServer(no_model, port=port, mcp=routes)
    try:
        await server.start()
    except OSError as exc:
        raise UsageError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror}") from None
    try:
        click.echo(f"agentbench mcp-proxy: serving {server.root_url}/mcp")
        sys.stdout.flush()
        await stop.wait()
    finally:
        await server.close()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)


def _update(path: Path, server: str | None, real: Upstream | None, timeout_s: float) -> int:
    from agentbench.mcp_proxy.recording import RecordingError
    from agentbench.mcp_proxy.snapshots import list_server, update_file
    from agentbench.mcp_proxy.upstream import UpstreamError

    if real is None:
        raise UsageError("--update needs the live server: a command after --, or --upstream URL")
    try:
        listed = asyncio.run(list_server(real, timeout_s))
    except UpstreamError as exc:
        _say(str(exc))
        return EXIT_INFRA
    try:
        kind, changes = update_file(path, server, listed)
    except RecordingError as exc:
        raise UsageError(f"--update: {exc}") from None
    for change in changes:
        _say(f"  {change.describe()}")
    what = f"{len(changes)} change(s) to the tools" if changes else "the tools are unchanged"
    _say(f"updated the {kind} {path} from the live server: {what}")
    return EXIT_OK


def _say(line: str) -> None:
    click.echo(f"agentbench mcp-proxy: {line}", err=True)
