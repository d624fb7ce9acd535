"""`agentbench report EVAL_ID` (one eval's page) and `agentbench report --history` (all of them).

An eval's report is one self-contained file, `<report-dir>/<eval_id>/index.html`, that opens
offline in any browser; `latest` names the most recently started eval in the store. With
`--history` the page is the store's evals along the git history (`<report-dir>/history/`,
or `history-<suite>/` with `--suite`): pass rate, cost, tokens and latency per eval, the
regressions each introduced, links to the evals' reports (`--with-reports` writes the
missing ones) and the flaky cases. The folder option is `--report-dir`, as in
`agentbench run` and `agentbench diff`; `--out`, its old name, still works but is hidden and
deprecated.
"""

from __future__ import annotations

from pathlib import Path

import click

from agentbench.commands.traces import open_store, parse_since, reports_dir, store_options
from agentbench.errors import UsageError
from agentbench.evals.history.history import load_history
from agentbench.report import resolve_eval_id, write_report
from agentbench.report.history_page import write_history_report
from agentbench.trace.code_version import find_work_tree

EPILOG = """\b
Examples:
  agentbench report latest
  agentbench report eval_20250131T120000_ab12cd --report-dir site/reports
  agentbench report --history --suite sre --since 30d
"""


@click.command("report", epilog=EPILOG)
@click.argument("eval_id", required=False)
@click.option(
    "--history",
    "history",
    is_flag=True,
    help="Write the history page of the store's evals instead of one eval's report.",
)
@click.option("--suite", default=None, help="With --history: only this suite's evals and cases.")
@click.option(
    "--since",
    default=None,
    help="With --history: evals started since then (2025-01-31, or an age: 6h, 30d, 2w).",
)
@click.option(
    "--with-reports",
    is_flag=True,
    help="With --history: also write each listed eval's report that is not written yet.",
)
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
    eval_id: str | None,
    history: bool,
    suite: str | None,
    since: str | None,
    with_reports: bool,
    out_dir: Path | None,
    legacy_out: Path | None,
    db: Path | None,
    wait_s: float,
) -> None:
    """Write the HTML report of EVAL_ID (or `latest`), or with --history the history page."""
    if legacy_out is not None:
        click.echo("warning: --out is deprecated; use --report-dir", err=True)
        out_dir = legacy_out
    folder = reports_dir(out_dir)
    if history:
        if eval_id is not None:
            raise UsageError(f"report --history takes no EVAL_ID (got {eval_id!r})")
        _history(folder, suite, since, with_reports, db, wait_s)
        return
    for flag, value in (("--suite", suite), ("--since", since), ("--with-reports", with_reports)):
        if value:
            raise UsageError(f"report {flag} goes with --history (or drop it)")
    if eval_id is None:
        raise UsageError("report: expected EVAL_ID (an eval id, or `latest`) or --history")
    store = open_store(db, wait_s)
    resolved = resolve_eval_id(store, eval_id)
    path = write_report(store, resolved, folder)
    click.echo(f"report of eval {resolved}: {path}")


def _history(
    folder: Path,
    suite: str | None,
    since: str | None,
    with_reports: bool,
    db: Path | None,
    wait_s: float,
) -> None:
    store = open_store(db, wait_s, existing=True)
    repo = find_work_tree(Path.cwd()) or Path.cwd()
    found = load_history(store, suite=suite, since=parse_since(since) if since else None, repo=repo)
    if with_reports:
        for point in found.points:
            if not (folder / point.eval_id / "index.html").exists():
                write_report(store, point.eval_id, folder)
    path = write_history_report(store, found, folder)
    click.echo(f"history of {len(found.points)} eval(s): {path}")
