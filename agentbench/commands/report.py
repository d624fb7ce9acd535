"""`agentbench report EVAL_ID`: write the HTML report of a stored eval.

The report is one self-contained file, `<out>/<eval_id>/index.html`, that opens offline in
any browser; `latest` names the most recently started eval in the store.
"""

from __future__ import annotations

from pathlib import Path

import click

from agentbench.commands.traces import open_store, store_options
from agentbench.report import resolve_eval_id, write_report


@click.command("report")
@click.argument("eval_id")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("reports"),
    show_default=True,
    help="Folder the report goes into (as <out>/<eval_id>/index.html).",
)
@store_options
def report(eval_id: str, out_dir: Path, db: Path | None, wait_s: float) -> None:
    """Write the HTML report of EVAL_ID (or `latest`) from the trace store."""
    store = open_store(db, wait_s)
    resolved = resolve_eval_id(store, eval_id)
    path = write_report(store, resolved, out_dir)
    click.echo(f"report of eval {resolved}: {path}")
