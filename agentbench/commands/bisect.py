"""`agentbench bisect CASE_ID --good REF --bad REF`: the commit where a case's behaviour changed.

Prints each commit as it is evaluated (reused from the store, or run in a temporary
worktree), then the first commit where the case behaves differently from GOOD, its message,
and the first divergence between it and the commit before it. Exit 0 when found; 2 when the
refs or the case are wrong, or the case behaves the same at both ends; 3 when a commit could
not be evaluated.
"""

from __future__ import annotations

from pathlib import Path

import click
import orjson

from agentbench.commands.traces import open_store, store_options
from agentbench.evals.comparing.compare_text import describe_divergence, trials_text
from agentbench.evals.history.bisect import BisectResult, Probe, bisect
from agentbench.trace.code_version import find_work_tree

EPILOG = """\b
Examples:
  agentbench bisect refund-eligible --good v1.2 --bad HEAD
  agentbench bisect disk-full-alert --good main~20 --bad main --suite golden/sre --json
"""


@click.command("bisect", epilog=EPILOG)
@click.argument("case_id")
@click.option("--good", "good", required=True, help="A commit (ref) where the case behaved well.")
@click.option("--bad", "bad", required=True, help="A later commit where it behaves differently.")
@click.option(
    "--suite",
    "suite_path",
    default="golden",
    show_default=True,
    help="The suite folder holding the case, relative to the repository root.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@store_options
def bisect_command(
    case_id: str,
    good: str,
    bad: str,
    suite_path: str,
    as_json: bool,
    db: Path | None,
    wait_s: float,
) -> None:
    """Find the first commit between --good and --bad where CASE_ID behaves differently."""
    repo = find_work_tree(Path.cwd()) or Path.cwd()
    store = open_store(db, wait_s)

    def tell(probe: Probe) -> None:
        how = "stored" if probe.reused else "ran"
        verdict = "good" if probe.changed is None else (probe.kind or "?")
        click.echo(f"  {probe.sha[:12]}  {how:<6} {probe.eval_id}  {verdict}", err=as_json)

    click.echo(f"bisect {case_id}: {good} (good) .. {bad} (bad)", err=as_json)
    found = bisect(store, repo, case_id, good, bad, suite_path, on_probe=tell)
    if as_json:
        click.echo(orjson.dumps(found.as_dict(), option=orjson.OPT_INDENT_2, default=str).decode())
        return
    click.echo(result_text(found))


def result_text(found: BisectResult) -> str:
    """The answer as a person reads it: the commit, its message, the first divergence."""
    change = found.change
    ran = sum(not p.reused for p in found.probes)
    lines = [
        "",
        f"{len(found.probes)} of {found.commits + 1} commits evaluated ({ran} run, "
        f"{len(found.probes) - ran} reused from the store)",
        f"first commit where {found.suite}/{found.case_id} behaves differently:",
        f"  {found.first}  {found.subject}",
        f"compared with the commit before it, {found.parent[:12]}: {change.kind}",
    ]
    case = change.as_dict()
    where = f" ({case['source']})" if case.get("source") else ""
    lines.append(f"  {found.suite}/{found.case_id}{where}: {trials_text(case)}")
    lines.extend(f"  - {reason}" for reason in case["reasons"][:3])
    if case["divergences"]:
        first = describe_divergence(case["divergences"][0])
        lines.append("first divergence — " + first)
    else:
        lines.append("no step differs: only the scores moved")
    return "\n".join(lines)
