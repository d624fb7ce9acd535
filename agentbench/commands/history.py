"""`agentbench history`: the store's evals along the git history, as text or `--json`.

The same data as `agentbench report --history`: per eval its commit (date, branch, subject),
pass rate, tokens, cost and latency, the regressions and fixes since the previous eval of the
same suite, and the cases that flipped without a code change (flaky).
"""

from __future__ import annotations

from pathlib import Path

import click
import orjson

from agentbench.commands.traces import open_store, parse_since, store_options
from agentbench.evals.history.history import History, load_history
from agentbench.trace.code_version import find_work_tree

EPILOG = """\b
Examples:
  agentbench history
  agentbench history --suite sre --since 30d --json
"""


@click.command("history", epilog=EPILOG)
@click.option("--suite", default=None, help="Only this suite's evals and cases.")
@click.option("--since", default=None, help="Evals started since then (2025-01-31, 6h, 30d, 2w).")
@click.option("--json", "as_json", is_flag=True, help="Print the history as JSON.")
@store_options
def history(
    suite: str | None, since: str | None, as_json: bool, db: Path | None, wait_s: float
) -> None:
    """Pass rate, cost, tokens and latency per eval along the git history; flaky cases."""
    store = open_store(db, wait_s, existing=True)
    repo = find_work_tree(Path.cwd()) or Path.cwd()
    found = load_history(store, suite=suite, since=parse_since(since) if since else None, repo=repo)
    if as_json:
        document = orjson.dumps(found.as_dict(), option=orjson.OPT_INDENT_2, default=str)
        click.echo(document.decode())
        return
    click.echo(history_text(found))


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}"


def history_text(found: History) -> str:
    """The history as a person reads it in a terminal, newest eval first."""
    if not found.points:
        return (
            "no finished eval"
            + (f" of suite {found.suite}" if found.suite else "")
            + " in the store"
        )
    lines = [
        f"{'started':<17} {'commit':<12} {'branch':<12} {'pass':>7} {'trials':>6} "
        f"{'tokens':>9} {'cost':>9}  subject"
    ]
    for p in reversed(found.points):
        commit = (p.commit or "—")[:10] + ("+" if p.dirty else "")
        cost = "—" if p.cost_usd is None else f"${p.cost_usd:,.4f}"
        lines.append(
            f"{p.started_at:%Y-%m-%d %H:%M} {commit:<12} {(p.branch or '—')[:12]:<12} "
            f"{_pct(p.pass_rate):>7} {p.trials:>6} {p.tokens:>9,} {cost:>9}  {p.subject or ''}"
        )
        for move in p.regressions:
            where = f" ({move.source})" if move.source else ""
            lines.append(
                f"    regressed: {move.suite}/{move.case_id}{where} {move.before} → {move.after}"
            )
        for move in p.fixed:
            lines.append(f"    fixed: {move.suite}/{move.case_id} {move.before} → {move.after}")
    if found.flaky:
        lines.append("")
        lines.append(f"flaky ({len(found.flaky)}):")
        for f in found.flaky:
            where = f" ({f.source})" if f.source else ""
            results = " ".join(v for _, v in f.results)
            lines.append(f"  {f.suite}/{f.case_id}{where}: {f.why} [{results}]")
    return "\n".join(lines)
