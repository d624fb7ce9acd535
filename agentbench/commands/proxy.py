"""`agentbench proxy`: record or replay any agent's model calls at a base URL on 127.0.0.1.

The command is glue: it loads or creates the cassette, starts `boundary.proxy.Proxy` on a
`BoundaryServer`, prints the one line a script reads to learn the address, serves until SIGINT
or SIGTERM, then saves what was forwarded and prints the summary. Exit code 0: every call was
answered; 1: a call was refused (the replay diverged); 3: the upstream failed.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import click

from agentbench.boundary.forward import WireForwarder
from agentbench.boundary.proxy import Proxy, Refusal
from agentbench.boundary.server import BoundaryServer
from agentbench.errors import UsageError
from agentbench.replay.cassette import Cassette, CassetteError
from agentbench.trace.redaction.redactor import Redactor

EXIT_OK, EXIT_REFUSED, EXIT_INFRA = 0, 1, 3


@click.command(
    epilog="""\b
Examples:
  agentbench proxy --record replays/agent.yaml --upstream https://api.openai.com/v1
  agentbench proxy --replay replays/agent.yaml --port 8700
  agentbench proxy --replay replays/agent.yaml --live-from-divergence \\
      --upstream https://api.openai.com/v1 --save-to replays/agent-new.yaml
""",
)
@click.option(
    "--replay",
    "replay_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Answer from this cassette, with no network; a request it has no answer for is "
    "refused (HTTP 400 naming the nearest recorded call).",
)
@click.option(
    "--record",
    "record_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Forward every call to --upstream and write them to this cassette on exit (replacing it).",
)
@click.option(
    "--upstream",
    metavar="URL",
    help="The real endpoint, as a client's base URL (https://api.openai.com/v1, "
    "https://api.anthropic.com); keys come from the proxy's environment (OPENAI_API_KEY, "
    "ANTHROPIC_API_KEY), never from the agent.",
)
@click.option(
    "--anthropic-upstream",
    metavar="URL",
    help="Where Anthropic Messages calls go, for an agent that calls both providers "
    "[default: --upstream, without its /v1].",
)
@click.option(
    "--live-from-divergence",
    is_flag=True,
    help="With --replay and --upstream: a conversation whose request the cassette has no "
    "answer for goes to the upstream from there on; what was forwarded is appended.",
)
@click.option(
    "--save-to",
    type=click.Path(dir_okay=False, path_type=Path),
    help="With --live-from-divergence: write the cassette here instead of over --replay's.",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="Port on 127.0.0.1; 0 picks a free one (the address is printed).",
)
def proxy(
    replay_path: Path | None,
    record_path: Path | None,
    upstream: str | None,
    anthropic_upstream: str | None,
    live_from_divergence: bool,
    save_to: Path | None,
    port: int,
) -> int:
    """Serve model APIs on 127.0.0.1 for any agent, in any language, that takes a base URL
    (OPENAI_BASE_URL, ANTHROPIC_BASE_URL): replay a cassette, record one, or replay and go
    live where the agent diverges. Prints one line with the address, runs until Ctrl-C or
    SIGTERM, then saves and prints what it did."""
    recording, save_path = _plan(replay_path, record_path, upstream, live_from_divergence, save_to)
    forwarder = None
    if upstream is not None:
        root = anthropic_upstream or upstream.rstrip("/").removesuffix("/v1")
        forwarder = WireForwarder("upstream", base_url=upstream, anthropic_base_url=root)
    elif anthropic_upstream is not None:
        raise UsageError("--anthropic-upstream goes with --upstream")
    service = Proxy(recording=recording, upstream=forwarder, on_refusal=_say_refused)
    try:
        asyncio.run(_serve(service, port))
    finally:  # what was forwarded is kept, whatever ended the serving
        _save(service, save_path)
    for line in service.summary():
        click.echo(line)
    if service.tally.upstream_failures:
        return EXIT_INFRA
    return EXIT_REFUSED if service.tally.refused else EXIT_OK


def _plan(
    replay_path: Path | None,
    record_path: Path | None,
    upstream: str | None,
    live_from_divergence: bool,
    save_to: Path | None,
) -> tuple[Cassette | None, Path | None]:
    """The cassette to replay (None: record a new one) and where to save, or UsageError."""
    if (replay_path is None) == (record_path is None):
        raise UsageError("agentbench proxy needs one of --replay CASSETTE or --record CASSETTE")
    if record_path is not None:
        if upstream is None:
            raise UsageError("--record needs --upstream URL: the endpoint to forward to")
        if live_from_divergence or save_to is not None:
            raise UsageError("--live-from-divergence and --save-to go with --replay, not --record")
        return None, record_path
    assert replay_path is not None
    if live_from_divergence and upstream is None:
        raise UsageError("--live-from-divergence needs --upstream URL: where to go live")
    if not live_from_divergence and (upstream is not None or save_to is not None):
        raise UsageError(
            "--replay answers with no network: --upstream and --save-to go with "
            "--live-from-divergence"
        )
    try:
        recording = Cassette.load(replay_path)
    except CassetteError as exc:  # the flag names a file that is not a cassette: usage
        raise UsageError(f"--replay: {exc}") from None
    return recording, (save_to or replay_path) if live_from_divergence else None


def _save(service: Proxy, path: Path | None) -> None:
    if path is None:
        return
    if service.new_calls:
        saved = service.cassette.save(path, redactor=Redactor())
        click.echo(
            f"agentbench proxy: saved {len(service.cassette.interactions)} call(s) to {saved}"
        )
    elif service.calls:
        click.echo(f"agentbench proxy: nothing forwarded; {path} left as it was")


def _say_refused(refusal: Refusal) -> None:
    line = f"agentbench proxy: refused call {refusal.call} ({refusal.wire}): {refusal.reason}"
    click.echo(line, err=True)


async def _serve(service: Proxy, port: int) -> None:
    """Serve until SIGINT or SIGTERM."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    server = BoundaryServer(service.answer, port=port)
    try:
        await server.start()
    except OSError as exc:
        raise UsageError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror}") from None
    try:
        root = server.base_url.removesuffix("/v1")
        click.echo(
            f"agentbench proxy: listening on {root} (OPENAI_BASE_URL={server.base_url}, "
            f"ANTHROPIC_BASE_URL={root})"
        )
        await stop.wait()
    finally:
        await server.close()
        await service.aclose()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
