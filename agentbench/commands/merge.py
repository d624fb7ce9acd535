"""`agentbench merge SOURCE… --into STORE`: shards' stores and Parquet exports made one store.

The usual end of a CI job matrix: each job ran `agentbench run golden/ --shard K/N` into its
own store and uploaded it; the last job downloads them all, merges, and runs `agentbench gate`
(and `report`, `diff`) over the one eval they make together.
"""

from __future__ import annotations

from pathlib import Path

import click

from agentbench.commands.traces import open_store
from agentbench.evals.storage.merging import merge as merge_sources


@click.command(
    epilog="""\b
Examples:
  agentbench merge shard-1.duckdb shard-2.duckdb shard-3.duckdb --into merged.duckdb
  agentbench merge lake/ --into merged.duckdb
""",
)
@click.argument("sources", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--into",
    "into",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="The store to merge into (made if it does not exist).",
)
@click.option(
    "--wait",
    "wait_s",
    type=click.FloatRange(min=0),
    default=30.0,
    show_default=True,
    help="Seconds to wait while another process writes a store.",
)
def merge(sources: tuple[Path, ...], into: Path, wait_s: float) -> None:
    """Add the runs, evals and results of store files and export folders to one store."""
    store = open_store(into, wait_s)
    summary = merge_sources(store, sources)
    for source, added in summary.added.items():
        counts = ", ".join(f"{rows} {table}" for table, rows in added.items() if rows)
        click.echo(f"{source}: +{counts or 'nothing new'}")
    for found in summary.evals:
        line = f"eval {found.eval_id}: {found.trials} trial(s)"
        if found.shards:
            line += f", shards {', '.join(found.shards)}"
        if found.missing:
            line += f" — missing {', '.join(found.missing)}"
        click.echo(line)
    click.echo(f"merged into {store.path}; `agentbench gate EVAL_ID --db {into}` gates it")
