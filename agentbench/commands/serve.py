"""`agentbench serve module:attribute`: agents behind an OpenAI-compatible API on uvicorn,
every request a stored trace."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from agentbench.commands.traces import open_store, store_options
from agentbench.errors import UsageError
from agentbench.loading import import_module, load_object
from agentbench.trace.code_version import anchor

if TYPE_CHECKING:
    from agentbench.serve.callers import Keyring


@click.command(
    epilog="""\b
Examples:
  agentbench serve examples/served_desk.py:desk --port 8000
  agentbench serve myapp.agents:router --host 0.0.0.0 --keys /run/secrets/serve-keys
  agentbench serve myapp.agents:router --concurrency 16 --api-key-env AGENTBENCH_SERVE_KEYS
  agentbench serve myapp.agents:triage --model gpt-4o-mini --base-url http://127.0.0.1:8080/v1
""",
)
@click.argument("target")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on; any but loopback needs keys (--keys or --api-key-env).",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8000,
    show_default=True,
    help="Port to listen on; 0 picks a free one (the address is printed).",
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=8,
    show_default=True,
    help="Runs at once; more requests wait for a slot.",
)
@click.option(
    "--queue",
    type=click.IntRange(min=0),
    default=64,
    show_default=True,
    help="Requests that may wait for a slot; past it: 429 with Retry-After.",
)
@click.option(
    "--timeout",
    "timeout_s",
    type=click.FloatRange(min=0, min_open=True),
    default=300.0,
    show_default=True,
    help="Seconds a request may take, waiting for its slot included.",
)
@click.option(
    "--max-body",
    "max_body",
    type=click.IntRange(min=1),
    default=1_000_000,
    show_default=True,
    help="Largest request body in bytes; larger: 413.",
)
@click.option(
    "--drain",
    "drain_s",
    type=click.FloatRange(min=0),
    default=30.0,
    show_default=True,
    help="On SIGTERM, seconds running requests get to finish before they are cancelled.",
)
@click.option(
    "--header-timeout",
    "header_timeout_s",
    type=click.FloatRange(min=0, min_open=True),
    default=10.0,
    show_default=True,
    help="Seconds a client gets to send a request's headers; then its connection is closed.",
)
@click.option(
    "--body-timeout",
    "body_timeout_s",
    type=click.FloatRange(min=0, min_open=True),
    default=30.0,
    show_default=True,
    help="Seconds a client gets to send a request's body once its headers came; then 408.",
)
@click.option(
    "--keys",
    "key_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Key file: one 'name: key' a line ('name: key admin' may read every served run). "
    "Every route but /healthz then needs 'Authorization: Bearer <key>'.",
)
@click.option(
    "--api-key-env",
    metavar="NAME",
    help="Keys from this environment variable: 'name: key' entries separated by commas or "
    "newlines, or one bare key (the caller 'default').",
)
@click.option(
    "--model",
    help="Model name every served conversation runs on [default: each served agent's own].",
)
@click.option(
    "--base-url", help="OpenAI-compatible endpoint for --model [default: OPENAI_BASE_URL]."
)
@store_options
def serve(
    target: str,
    host: str,
    port: int,
    concurrency: int,
    queue: int,
    timeout_s: float,
    max_body: int,
    drain_s: float,
    header_timeout_s: float,
    body_timeout_s: float,
    key_file: Path | None,
    api_key_env: str | None,
    model: str | None,
    base_url: str | None,
    db: Path | None,
    wait_s: float,
) -> None:
    """Serve the agent(s) at TARGET (module:attribute — an agent, a router, or a list or dict
    of agents) over HTTP: POST /v1/chat/completions (OpenAI-compatible, streaming too),
    POST /v1/runs (202; GET, DELETE, /events as SSE), GET /v1/models, /healthz, /metrics.
    Every request is recorded in the trace store with its request id, conversation id
    (X-Conversation-Id or the `user` field), code version and caller (its key's name); a
    caller sees and cancels only the runs it started. Without keys the server is one user's
    and listens on loopback only."""
    try:
        from agentbench.serve.callers import is_loopback
        from agentbench.serve.server import DrainingServer, server_config
        from agentbench.serve.service import ServeSettings, Service, agent_refs, served_agents
    except ImportError as exc:
        raise UsageError(
            f"agentbench serve needs the 'serve' extra ({exc.name} is missing): "
            "pip install 'agentbench[serve]'"
        ) from None
    keys = _keys(key_file, api_key_env)
    if not keys and not is_loopback(host):
        raise UsageError(
            f"--host {host}: without keys anyone who can reach that address could run the "
            "agents and read every served run; give keys (--keys FILE or --api-key-env NAME) "
            "or listen on 127.0.0.1"
        )
    anchor(Path.cwd())  # the code version stamped on every trace is this checkout's
    loaded = load_object(target, what="agent", search_path=Path.cwd())
    agents = served_agents(loaded, target)
    module = import_module(target.partition(":")[0], search_path=Path.cwd())
    refs = agent_refs(target, loaded, agents, module)
    chat_model = _default_model(model, base_url)
    store = open_store(db, wait_s)
    # Before any request: a store that cannot keep runs is exit 3 now, not a run lost each time.
    store.check_writable()
    settings = ServeSettings(
        concurrency=concurrency,
        queue=queue,
        timeout_s=timeout_s,
        max_body_bytes=max_body,
        drain_s=drain_s,
        keys=keys,
        header_timeout_s=header_timeout_s,
        body_timeout_s=body_timeout_s,
    )
    service = Service(agents, settings=settings, model=chat_model, store=store, agent_refs=refs)
    # No colours: what the server logs is escaped for the terminal (see agentbench.terminal).
    config = server_config(
        service, host=host, port=port, log_level="info", access_log=True, use_colors=False
    )
    server = DrainingServer(config, service)
    # Bound here, not by uvicorn, so --port 0 (any free port) can say which port it got.
    sock = _listen(host, port)
    callers = f"{len(keys)} key(s)" if keys else "no keys: this user only, on loopback"
    click.echo(
        f"serving {', '.join(sorted(agents))} on http://{host}:{sock.getsockname()[1]}/v1 "
        f"(store {store.path}; concurrency {concurrency}, queue {queue}; {callers})",
        err=True,
    )
    server.run(sockets=[sock])


def _keys(key_file: Path | None, variable: str | None) -> Keyring:
    """The callers' keys from --keys and --api-key-env (both may be given)."""
    from agentbench.serve.callers import KeyEntries, read_key_file, read_key_variable

    entries = KeyEntries()
    if key_file is not None:
        read_key_file(key_file, entries)
        mode = key_file.stat().st_mode
        if mode & 0o077:
            click.echo(
                f"warning: --keys {key_file} can be read by other users (mode {mode & 0o777:o}); "
                f"chmod 600 {key_file}",
                err=True,
            )
    if variable:
        read_key_variable(variable, os.environ.get(variable), entries)
        # Read once: the agents' tools, and the processes they start, do not inherit it.
        os.environ.pop(variable, None)
    return entries.keyring()


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP spelled out: asyncio sets TCP_NODELAY only on sockets that say they are TCP,
    # and without it every response on a kept-alive connection waits ~40 ms for an ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    # Listening before the address is printed: a client that reads it may connect at once.
    sock.listen(2048)
    return sock


def _default_model(name: str | None, base_url: str | None) -> Any:
    if not name:
        if base_url:
            raise UsageError("--base-url needs --model NAME")
        return None
    if not (base_url or os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_KEY")):
        raise UsageError(
            f"--model {name}: no endpoint (pass --base-url URL, or set OPENAI_BASE_URL, or "
            "OPENAI_API_KEY for OpenAI's)"
        )
    from agentbench.runtime.openai_model import OpenAIModel

    return OpenAIModel(name, base_url=base_url)
