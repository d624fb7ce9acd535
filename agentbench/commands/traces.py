"""`agentbench traces`: list, show, query, export and import recorded runs.

Every command takes `--db PATH` (default: AGENTBENCH_DB, else `.agentbench/traces.duckdb`)
and `--wait SECONDS`, how long to wait, saying so on stderr, while another process writes
the store. Errors are agentbench errors, which `cli.main` maps to exit codes.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import click
import orjson

from agentbench.commands import render
from agentbench.commands.lazy_group import LazyCommand, LazyGroup
from agentbench.errors import UsageError
from agentbench.runtime.events import StopReason
from agentbench.trace.code_version import find_work_tree
from agentbench.trace.errors import StoreNotFoundError
from agentbench.trace.journal.spool import spool_dir
from agentbench.trace.schema import RunStatus
from agentbench.trace.storage.doctor import diagnose
from agentbench.trace.store import TraceStore, default_path

F = TypeVar("F", bound=Callable[..., Any])
_RELATIVE = re.compile(r"^(\d+)\s*([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def store_options(command: F) -> F:
    command = click.option(
        "--wait",
        "wait_s",
        type=click.FloatRange(min=0),
        default=30.0,
        show_default=True,
        help="Seconds to wait while another process writes the store.",
    )(command)
    return click.option(
        "--db",
        "db",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="Trace store file [default: $AGENTBENCH_DB or .agentbench/traces.duckdb].",
    )(command)


def open_store(
    db: Path | None, wait_s: float, *, existing: bool = False, recording_process: bool = False
) -> TraceStore:
    """The store at `db` (or the default); `existing`: a command that only reads needs one
    recorded already, and a missing file is a usage error (exit 2), not a broken store;
    `recording_process`: a command that records many runs records them in a process of
    their own (see `TraceStore`)."""

    def tell(message: str) -> None:
        click.echo(f"{message}…", err=True)

    store = TraceStore(
        db or default_path(), wait_s=wait_s, on_wait=tell, recording_process=recording_process
    )
    # Journals without a file yet: runs recorded by a process that has not stored them, which
    # reading stores first; only a path with neither has nothing to read.
    if existing and not store.path.exists() and not spool_dir(store.path).is_dir():
        raise StoreNotFoundError(
            f"no trace store at {store.path}; run `agentbench run` first (or pass --db)"
        )
    return store


def reports_dir(given: Path | None) -> Path:
    """Where HTML reports go: the folder given (relative to where the command was typed), else
    `reports/` at the root of the git checkout around it, like the default store."""
    if given is not None:
        return given.absolute()
    return (find_work_tree(Path.cwd()) or Path.cwd()) / "reports"


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """`2025-01-31`, `2025-01-31T12:00`, or an age: `30m`, `6h`, `2d`, `1w`."""
    found = _RELATIVE.match(text.strip())
    if found:
        amount = timedelta(**{_UNITS[found[2]]: int(found[1])})
        return (now or datetime.now(UTC)) - amount
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(
            f"--since {text!r}: expected a date (2025-01-31), a time (2025-01-31T12:00) or an "
            "age such as 30m, 6h, 2d, 1w"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@click.group(
    "traces",
    cls=LazyGroup,
    # commands.otel reads this module's store options: imported when one of them runs.
    lazy={
        "export-otel": LazyCommand(
            "agentbench.commands.otel:export_otel",
            "Write stored runs as OpenTelemetry GenAI spans in OTLP/JSON.",
        ),
        "import-otel": LazyCommand(
            "agentbench.commands.otel:import_otel",
            "Store the GenAI spans in OTLP files (or folders of them).",
        ),
    },
    epilog="""\b
Examples:
  agentbench traces list --since 2h
  agentbench traces show run_630e997e --json
""",
)
def traces() -> None:
    """Recorded runs: list, show a timeline, query with SQL, export and import; doctor."""


@traces.command(
    "list",
    epilog="""\b
Examples:
  agentbench traces list --agent weather --stop-reason loop_detected --since 7d
  agentbench traces list --status incomplete --limit 5 --json
""",
)
@store_options
@click.option("--agent", help="Only runs of this agent.")
@click.option("--status", type=click.Choice([s.value for s in RunStatus]), help="Only this status.")
@click.option(
    "--stop-reason", type=click.Choice([s.value for s in StopReason]), help="Only this stop reason."
)
@click.option("--since", help="Only runs started since: a date, a time, or an age (2h, 7d).")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="At most this many runs, newest first.",
)
@click.option(
    "--conversation",
    metavar="ID",
    help="Only runs of this conversation (a served request's X-Conversation-Id or user).",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per run.")
def list_runs(
    db: Path | None,
    wait_s: float,
    agent: str | None,
    status: str | None,
    stop_reason: str | None,
    since: str | None,
    limit: int,
    conversation: str | None,
    as_json: bool,
) -> None:
    """Stored runs, newest first."""
    store = open_store(db, wait_s, existing=True)
    runs = store.runs(
        agent=agent,
        status=status,
        stop_reason=stop_reason,
        since=parse_since(since) if since else None,
        limit=limit,
        conversation_id=conversation,
    )
    if as_json:
        for run in runs:
            click.echo(orjson.dumps(run.decoded()).decode())
        return
    if not runs:
        click.echo(f"no runs match in {store.path}")
        return
    click.echo(render.runs_table(runs))
    click.echo(f"\n{len(runs)} run(s), newest first; `agentbench traces show RUN_ID` for one")


@traces.command(
    "show",
    epilog="""\b
Examples:
  agentbench traces show run_630e997e
  agentbench traces show run_630e997e --json > run.json
""",
)
@store_options
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True, help="The whole trace as one JSON document.")
def show(db: Path | None, wait_s: float, run_id: str, as_json: bool) -> None:
    """One run as a timeline (RUN_ID may be a unique prefix)."""
    trace = open_store(db, wait_s, existing=True).run(run_id)
    if as_json:
        document = {
            "run": trace.run.decoded(),
            "timeline": [{"table": item.table, **item.decoded()} for item in trace.timeline()],
            "children": [child.decoded() for child in trace.children],
        }
        click.echo(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode())
        return
    click.echo(render.timeline(trace))


@traces.command(
    "sql",
    epilog="""\b
Examples:
  agentbench traces sql "SELECT agent, count(*) AS runs FROM runs GROUP BY agent"
  agentbench traces sql "SELECT tool, result_kind, count(*) FROM tool_calls GROUP BY ALL" \\
      --format csv
""",
)
@store_options
@click.argument("query")
@click.option(
    "--format",
    "output",
    type=click.Choice(["table", "csv", "json"]),
    default="table",
    show_default=True,
    help="table for people; csv or json (a list of objects) for programs.",
)
@click.option(
    "--max-width",
    type=click.IntRange(min=8),
    default=render.CELL_CHARS,
    show_default=True,
    help="Table format: cut each cell to this many characters.",
)
def sql(db: Path | None, wait_s: float, query: str, output: str, max_width: int) -> None:
    """Run a read-only SQL query over the store (tables: runs, llm_calls, tool_calls, …)."""
    result = open_store(db, wait_s, existing=True).sql(query)
    if output == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(result.columns)
        writer.writerows(result.rows)
        click.echo(buffer.getvalue(), nl=False)
    elif output == "json":
        records = [dict(zip(result.columns, row, strict=True)) for row in result.rows]
        click.echo(orjson.dumps(records, default=str, option=orjson.OPT_INDENT_2).decode())
    else:
        click.echo(render.table(result.columns, result.rows, max_width))
        click.echo(f"({len(result.rows)} row{'s' if len(result.rows) != 1 else ''})")


@traces.command(
    "export",
    epilog="""\b
Examples:
  agentbench traces export lake/ --partition-by date
  agentbench traces export backup/ --db ci/traces.duckdb
""",
)
@store_options
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--format",
    "file_format",
    type=click.Choice(["parquet"]),
    default="parquet",
    show_default=True,
    help="File format of the tables (Parquet is the only one so far).",
)
@click.option(
    "--partition-by",
    type=click.Choice(["none", "date"]),
    default="none",
    show_default=True,
    help="date: a Hive-style tree by run start date (a Parquet lake).",
)
def export(
    db: Path | None, wait_s: float, directory: Path, file_format: str, partition_by: str
) -> None:
    """Write the whole store to DIRECTORY as Parquet files plus a manifest."""
    manifest = open_store(db, wait_s, existing=True).export_parquet(
        directory, partition_by_date=partition_by == "date"
    )
    counts = ", ".join(f"{name} {entry['rows']}" for name, entry in manifest["tables"].items())
    click.echo(f"exported to {directory} ({file_format}): {counts}")


@traces.command(
    "import",
    epilog="""\b
Examples:
  agentbench traces import lake/
  agentbench traces import backup/ --db merged.duckdb
""",
)
@store_options
@click.argument("directory", type=click.Path(file_okay=False, exists=True, path_type=Path))
def import_(db: Path | None, wait_s: float, directory: Path) -> None:
    """Add the runs of an exported DIRECTORY to the store (runs it has are skipped)."""
    counts = open_store(db, wait_s).import_parquet(directory)
    click.echo(
        f"imported {counts.get('runs', 0)} run(s) from {directory}: "
        + ", ".join(f"{name} {count}" for name, count in counts.items())
    )


@traces.command(
    "doctor",
    epilog="""\b
Examples:
  agentbench traces doctor
  agentbench traces doctor --db ci/traces.duckdb --json
""",
)
@store_options
@click.option("--json", "as_json", is_flag=True, help="One JSON object per finding.")
def doctor(db: Path | None, wait_s: float, as_json: bool) -> int:
    """Check the store and its spool, changing nothing: a half-created or damaged file,
    journals of running and of dead processes, quarantined journals and what the journals
    can rebuild. Exit code 0 when healthy, 1 when it found problems."""
    store = open_store(db, wait_s, existing=True)
    diagnosis = diagnose(store.path, wait_s=wait_s, on_wait=store.on_wait)
    if as_json:
        for finding in diagnosis.findings:
            click.echo(orjson.dumps(dataclasses.asdict(finding)).decode())
    else:
        for finding in diagnosis.findings:
            click.echo(f"{'problem' if finding.problem else 'ok':<8} {finding.where}")
            click.echo(f"         {finding.text}")
        count = len(diagnosis.problems)
        click.echo(f"\n{count} problem(s) found" if count else "\nhealthy: nothing to fix")
    return 1 if diagnosis.problems else 0
