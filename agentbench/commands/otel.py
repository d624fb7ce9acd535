"""`agentbench traces export-otel` and `import-otel`: stored runs to and from OTLP/JSON spans.

OpenTelemetry is an optional extra (`pip install 'agentbench[otel]'`); it is imported only
when one of these commands runs, so the rest of the CLI starts without it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from agentbench.commands.traces import open_store, parse_since, store_options
from agentbench.errors import UsageError
from agentbench.trace._json import well_formed

EXTRA_HINT = (
    "agentbench's OpenTelemetry support needs the otel extra: pip install 'agentbench[otel]'"
)


def _otel(module: str) -> Any:
    """Import an `agentbench.otel` module, or say which extra to install."""
    import importlib

    try:
        return importlib.import_module(f"agentbench.otel.{module}")
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] in ("opentelemetry", "google"):
            raise UsageError(f"{EXTRA_HINT} ({exc.name} is not installed)") from None
        raise


@click.command(
    "export-otel",
    epilog="""\b
Examples:
  agentbench traces export-otel --since 2h --out spans.jsonl --content
  agentbench traces export-otel run_630e997e --out run.jsonl
""",
)
@store_options
@click.argument("run_ids", nargs=-1)
@click.option("--since", help="Runs started since: a date, a time, or an age (2h, 7d).")
@click.option("--agent", help="Only runs of this agent.")
@click.option(
    "--out",
    "out",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="The OTLP/JSON file to write (one export request per line).",
)
@click.option(
    "--content/--no-content",
    default=None,
    help="Write messages, tool arguments and results on the spans (opt-in, as the GenAI "
    "conventions say) [default: as OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT with "
    "OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental, else off].",
)
def export_otel(
    db: Path | None,
    wait_s: float,
    run_ids: tuple[str, ...],
    since: str | None,
    agent: str | None,
    out: Path,
    content: bool | None,
) -> None:
    """Write stored runs as OpenTelemetry GenAI spans in OTLP/JSON."""
    conventions = _otel("conventions")
    export = _otel("export")
    if run_ids and (since or agent):
        raise UsageError("give run ids or --since/--agent, not both")
    store = open_store(db, wait_s, existing=True)
    if run_ids:
        with store.reading() as conn:
            from agentbench.trace.storage import queries

            chosen = [queries.resolve_run_id(conn, run_id, store.path) for run_id in run_ids]
    else:
        runs = store.runs(agent=agent, since=parse_since(since) if since else None)
        chosen = [run.run_id for run in runs]
    if not chosen:
        raise UsageError(f"no runs match in {store.path}; nothing to export")
    with_content = conventions.content_from_env() if content is None else content
    summary = export.export_runs(store, chosen, out, content=with_content)
    click.echo(
        f"wrote {summary.spans} span(s) of {summary.runs} run(s) in {summary.conversations} "
        f"conversation(s) to {out}"
    )
    if not with_content:
        click.echo(
            "without message content (pass --content to include it): the spans show what ran "
            "and how long, but cannot be imported for replay",
            err=True,
        )


@click.command(
    "import-otel",
    epilog="""\b
Examples:
  agentbench traces import-otel spans.jsonl
  agentbench traces import-otel collector-output/ --db prod.duckdb
""",
)
@store_options
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--max-mb",
    type=click.FloatRange(min=0, min_open=True),
    default=100,
    show_default=True,
    envvar="AGENTBENCH_OTEL_MAX_MB",
    show_envvar=True,
    help="The most OTLP data one import reads, all files together, in megabytes (an import "
    "holds about five times its files' size in memory).",
)
def import_otel(db: Path | None, wait_s: float, paths: tuple[Path, ...], max_mb: float) -> None:
    """Store the GenAI spans in OTLP FILES (or folders of them) as runs: OTLP/JSON lines, as
    the collector's file exporter writes them, or OTLP protobuf. All or nothing: a file wrong
    anywhere is named and nothing is stored."""
    importer = _otel("importer")
    max_bytes = _otel("otlp_files").max_bytes_of(max_mb)
    store = open_store(db, wait_s)
    summary = importer.import_files(store, paths, max_bytes=max_bytes)
    runs = summary.stored + summary.skipped
    if not runs:
        raise UsageError(
            f"no GenAI spans in {', '.join(map(str, paths))} ({summary.spans} span(s) read): "
            "expected spans with gen_ai.operation.name chat, invoke_agent or execute_tool, or "
            "OpenInference LLM spans"
        )
    unreplayable = 0
    for run in summary.stored:
        tools = len(run.tools) or sum(len(c.response.tool_calls) for _, c in run.calls)
        line = (
            f"stored {run.run_id}  {run.agent}  {len(run.calls)} model call(s), {tools} tool "
            f"call(s)  from {importer.instrumentation_of(run)}"
        )
        if run.joined_traces:
            line += f" ({len(run.joined_traces) + 1} traces joined by conversation)"
        # Names come from the spans: half an emoji in one is printed as it was stored (U+FFFD).
        click.echo(well_formed(line, counted=False))
        missing = run.missing()
        if missing:
            unreplayable += 1
            click.echo(f"  cannot be replayed: {missing}")
        elif (recorded := run.recorded_fields()) is not None:
            unknown = "" if "tools" in recorded else " (no tool definitions)"
            click.echo(
                f"  note: the spans record only {', '.join(recorded)} of each request"
                f"{unknown}: a replay compares only those, so what they could not know is "
                "never request drift"
            )
    click.echo(
        f"{len(summary.stored)} run(s) stored in {store.path}"
        + (f", {len(summary.skipped)} already there" if summary.skipped else "")
        + f"; {summary.spans} span(s) read"
        + (f", {summary.ignored_spans} not GenAI spans" if summary.ignored_spans else "")
        + (f"; {unreplayable} run(s) without content" if unreplayable else "")
    )
    if summary.stored:
        click.echo(
            "`agentbench traces show RUN_ID` for one; `agentbench promote RUN_ID --suite DIR "
            "--agent MODULE:ATTR` makes one a golden case"
        )
