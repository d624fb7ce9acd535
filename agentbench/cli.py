"""The `agentbench` command line: thin glue over the library.

Exit codes: 0 passed, 1 quality gate failed, 2 usage error, 3 harness or infrastructure error,
130 interrupted (Ctrl-C; the message says what was kept and how to go on).
"""

from __future__ import annotations

import sys

import click

from agentbench._version import __version__
from agentbench.commands.boundary import (
    DEBUG_ENV,
    DEBUG_FLAG,
    Invocation,
    disk_fault,
    unexpected,
)
from agentbench.commands.boundary import report as report_error
from agentbench.commands.lazy_group import LazyCommand, LazyGroup
from agentbench.errors import AgentbenchError, Interrupted, UsageError
from agentbench.terminal import escaping_output

EXIT_OK, EXIT_GATE_FAILED, EXIT_USAGE, EXIT_INFRA = 0, 1, 2, 3
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a process Ctrl-C ended


# Every command, imported only when it runs (`commands.lazy_group`): its module and the line
# `agentbench --help` lists it with.
COMMANDS = {
    "bisect": LazyCommand(
        "agentbench.commands.bisect:bisect_command",
        "Find the commit where a case began to fail.",
    ),
    "diff": LazyCommand(
        "agentbench.commands.replay:diff", "Compare two stored runs, or two evals."
    ),
    "gate": LazyCommand(
        "agentbench.commands.gate:gate", "Gate a stored eval as `agentbench run` would."
    ),
    "history": LazyCommand(
        "agentbench.commands.history:history",
        "Pass rate, cost and latency per eval along git history.",
    ),
    "mcp-proxy": LazyCommand(
        "agentbench.commands.mcp_proxy:mcp_proxy",
        "Record, replay or fault an MCP server for any client.",
    ),
    "merge": LazyCommand(
        "agentbench.commands.merge:merge", "Merge store files (shards) into one store."
    ),
    "promote": LazyCommand(
        "agentbench.commands.promote:promote", "Turn a stored run into a golden case."
    ),
    "proxy": LazyCommand(
        "agentbench.commands.proxy:proxy",
        "Record or replay any agent's model calls at a local base URL.",
    ),
    "replay": LazyCommand(
        "agentbench.commands.replay:replay",
        "Replay a stored run or a cassette against the current code.",
    ),
    "report": LazyCommand("agentbench.commands.report:report", "Write the HTML report of an eval."),
    "run": LazyCommand(
        "agentbench.commands.run:run",
        "Run golden suites and gate on the results.",
    ),
    "schema": LazyCommand(
        "agentbench.commands.schema:schema",
        "Write the JSON schemas of suite and case files.",
    ),
    "serve": LazyCommand(
        "agentbench.commands.serve:serve", "Serve agents over HTTP, recording every run."
    ),
    "tools": LazyCommand("agentbench.commands.tools:tools", "Inspect the tools of an agent."),
    "traces": LazyCommand(
        "agentbench.commands.traces:traces",
        "Recorded runs: list, show, query with SQL, export and import.",
    ),
}


@click.group(
    cls=LazyGroup,
    lazy=COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="""\b
Examples:
  agentbench run golden/
  agentbench replay replays/weather.yaml --strict
""",
)
@click.version_option(__version__, "-V", "--version", prog_name="agentbench")
@click.option(
    DEBUG_FLAG,
    "debug",
    is_flag=True,
    help=f"On an unexpected error, print the full traceback (or set {DEBUG_ENV}=1); "
    "accepted anywhere on the command line.",
)
def cli(debug: bool) -> None:
    """agentbench: run agents, record them as traces, replay and score them."""


def main(argv: list[str] | None = None) -> int:
    """Entry point: map every error to the documented exit codes; no traceback unless asked.
    Everything a command prints for people has its control characters escaped: runs, tool
    output and error messages carry text from models, tools and users (see `terminal`)."""
    invocation = Invocation.parse(argv)
    with escaping_output(stdout=not invocation.document_on_stdout):
        return _run(invocation)


def _run(invocation: Invocation) -> int:
    try:
        # Commands that gate (run, replay, diff) return their exit code. `obj` carries the
        # command line, for the `--resume` command an interrupted run prints. `color`: click
        # would strip colour codes from output that is not a terminal; they are escaped
        # instead, so a pipe gets what a terminal shows.
        code = cli.main(
            args=invocation.args,
            prog_name="agentbench",
            standalone_mode=False,
            obj={"argv": invocation.args},
            color=True,
        )
    except Interrupted as exc:
        return report_error(invocation, exc, str(exc), EXIT_INTERRUPTED, "interrupted")
    except KeyboardInterrupt as exc:
        return report_error(invocation, exc, "interrupted", EXIT_INTERRUPTED, "interrupted")
    except click.exceptions.Abort as exc:
        if isinstance(exc.__cause__, KeyboardInterrupt):  # how click passes on a Ctrl-C
            return report_error(invocation, exc, "interrupted", EXIT_INTERRUPTED, "interrupted")
        return report_error(invocation, exc, "aborted", EXIT_INFRA, "aborted")
    except click.ClickException as exc:
        if not invocation.as_json:
            exc.show()
            return EXIT_USAGE
        return report_error(invocation, exc, f"error: {exc.format_message()}", EXIT_USAGE, "usage")
    except UsageError as exc:
        return report_error(invocation, exc, f"error: {exc}", EXIT_USAGE, "usage")
    except AgentbenchError as exc:
        return report_error(invocation, exc, f"error: {exc}", EXIT_INFRA, "infrastructure")
    except Exception as exc:
        if user_interrupted(exc):  # a Ctrl-C that Python wrapped (one inside a class's creation)
            return report_error(invocation, exc, "interrupted", EXIT_INTERRUPTED, "interrupted")
        command = invocation.command(set(cli.list_commands(None)))
        line = disk_fault(command, exc)
        if line is not None:
            return report_error(invocation, exc, line, EXIT_INFRA, "infrastructure")
        line = unexpected(command, exc, debug=invocation.debug)
        return report_error(invocation, exc, line, EXIT_INFRA, "unexpected")
    return code if isinstance(code, int) else EXIT_OK


def user_interrupted(exc: BaseException) -> bool:
    """Whether `exc` is a Ctrl-C, or an error raised because of one (its cause or context)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def run() -> None:
    """Console-script entry point (the installed `agentbench` starts at `_console.run`, which
    also covers a Ctrl-C while this module is still being imported)."""
    sys.exit(main())
