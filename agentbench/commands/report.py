"""`agentbench report EVAL_ID`: write the HTML report of a stored eval.

The report is one self-contained file, `<report-dir>/<eval_id>/index.html`, that opens
offline in any browser; `latest` names the most recently started eval in the store. The folder
option is `--report-dir`, as in `agentbench run` and `agentbench diff`; `--out`, its old name,
still works but is hidden and deprecated.
"""

from __future__ import annotations

from pathlib import Path

import click

from agentbench.commands.traces import open_store, reports_dir, store_options
from agentbench.report import resolve_eval_id, write_report

EPILOG = """\b
Examples:
  agentbench report latest
  agentbench report eval_20250131T120000_ab12cd --report-dir site/reports
"""


@click.command("report", epilog=EPILOG)
@click.argument("eval_id")
@click.option(
    "--report-dir",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder the report goes into (as <dir>/<eval_id>/index.html) "
    "[default: reports/ at the root of the git checkout].",
)
@click.option(
    "--out",
    "legacy_out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    hidden=True,
    help="Deprecated: the old name of --report-dir.",
)
@store_options
def report(
    eval_id: str, out_dir: Path | None, legacy_out: Path | None, db: Path | None, wait_s: float
) -> None:
    """Write the HTML report of EVAL_ID (or `latest`) from the trace store."""
    if legacy_out is not None:
        click.echo("warning: --out is deprecated; use --report-dir", err=True)
        out_dir = legacy_out
    store = open_store(db, wait_s)
    resolved = resolve_eval_id(store, eval_id)
    path = write_report(store, resolved, reports_dir(out_dir))
    click.echo(f"report of eval {resolved}: {path}")
