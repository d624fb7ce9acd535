"""The `agentbench` command line: thin glue over the library.

Exit codes (DESIGN.md): 0 passed, 1 quality gate failed, 2 usage error, 3 harness or
infrastructure error.
"""

from __future__ import annotations

import sys

import click

from agentbench._version import __version__
from agentbench.commands.promote import promote
from agentbench.commands.replay import diff, replay
from agentbench.commands.report import report
from agentbench.commands.run import run as run_command
from agentbench.commands.schema import schema
from agentbench.commands.traces import traces
from agentbench.errors import AgentbenchError, UsageError

EXIT_OK, EXIT_GATE_FAILED, EXIT_USAGE, EXIT_INFRA = 0, 1, 2, 3


@click.group(
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="""\b
Examples:
  agentbench run golden/
  agentbench replay replays/weather.yaml --strict
""",
)
@click.version_option(__version__, "-V", "--version", prog_name="agentbench")
def cli() -> None:
    """agentbench: run agents, record them as traces, replay and score them."""


cli.add_command(run_command)
cli.add_command(traces)
cli.add_command(replay)
cli.add_command(diff)
cli.add_command(promote)
cli.add_command(schema)
cli.add_command(report)


def main(argv: list[str] | None = None) -> int:
    """Entry point: map agentbench errors to the documented exit codes."""
    try:
        # Commands that gate (run, replay, diff) return their exit code.
        code = cli.main(args=argv, prog_name="agentbench", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return EXIT_INFRA
    except click.ClickException as exc:
        exc.show()
        return EXIT_USAGE
    except UsageError as exc:
        click.echo(f"error: {exc}", err=True)
        return EXIT_USAGE
    except AgentbenchError as exc:
        click.echo(f"error: {exc}", err=True)
        return EXIT_INFRA
    return code if isinstance(code, int) else EXIT_OK


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())
