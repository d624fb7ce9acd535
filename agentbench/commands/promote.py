"""`agentbench promote RUN_ID --suite golden/NAME`: a stored run becomes a golden case.

The run (and the runs it handed off to) is converted to a cassette in the suite's cassette
folder, and a case is appended to the suite's `cases/promoted.yaml` with expectations drawn
from what the run did: its stop reason, the tools it called and its final output. The suite
is loaded again afterwards; if the new case does not validate, nothing is kept.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import click
import orjson
import yaml

from agentbench.commands.traces import open_store, store_options
from agentbench.errors import UsageError
from agentbench.evals.dataset import load_suite
from agentbench.replay.convert import cassette_from_store

PROMOTED = Path("cases") / "promoted.yaml"


def case_entry(case_id: str, info: dict[str, Any]) -> dict[str, Any]:
    """A case for the recorded session, expecting what it did."""
    expect: list[dict[str, Any]] = [{"stop_reason": info.get("stop_reason") or "completed"}]
    tools = []
    for result in info.get("tool_results", ()):
        if result["tool"] not in tools and not result["tool"].startswith("transfer_to_"):
            tools.append(result["tool"])
    expect += [{"tool_called": {"name": tool}} for tool in tools]
    output = info.get("output")
    if isinstance(output, str) and output:
        expect.append({"output_equals": {"value": output, "strip": True}})
    elif output is not None:
        expect.append({"output_equals": {"value": orjson.dumps(output).decode()}})
    entry: dict[str, Any] = {
        "id": case_id,
        "description": f"Promoted from stored run {info.get('source_run')}.",
        "input": info.get("input"),
    }
    session = (info.get("context") or {}).get("session") or {}
    if session:
        entry["context"] = session
    entry["tags"] = ["promoted"]
    entry["expect"] = expect
    return entry


@click.command(
    epilog="""\b
Examples:
  agentbench promote run_630e997e4ac54a5a8c591e404b948c8e --suite golden/sre
  agentbench promote run_630e997e4ac54a5a8c591e404b948c8e --suite golden/sre --id disk-full \\
      --db prod-traces.duckdb
""",
)
@click.argument("run_id")
@click.option(
    "--suite",
    "suite_dir",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="The golden suite folder to add the case to.",
)
@click.option("--id", "case_id", default=None, help="Case id (default: promoted-<run id>).")
@store_options
def promote(
    run_id: str, suite_dir: Path, case_id: str | None, db: Path | None, wait_s: float
) -> int:
    """Turn stored run RUN_ID into a golden case of the suite."""
    suite = load_suite(suite_dir)
    store = open_store(db, wait_s)
    cassette = cassette_from_store(store, run_id)
    info = cassette.info
    case_id = case_id or f"promoted-{re.sub(r'[^A-Za-z0-9]', '', info['source_run'])[-10:]}"
    if any(case.id == case_id for case in suite.cases):
        raise UsageError(f"suite {suite.name!r} already has a case {case_id!r}; pass --id")
    cases_file = suite_dir / PROMOTED
    before = cases_file.read_text() if cases_file.exists() else None
    cassette_path = suite.cassette_dir / f"{case_id}.yaml"
    text = yaml.safe_dump([case_entry(case_id, info)], sort_keys=False, allow_unicode=True)
    cases_file.parent.mkdir(parents=True, exist_ok=True)
    cases_file.write_text((before.rstrip() + "\n\n" if before else "") + text)
    try:
        load_suite(suite_dir)
    except UsageError:
        if before is None:
            cases_file.unlink()
        else:
            cases_file.write_text(before)
        raise
    cassette.save(cassette_path)
    click.echo(f"case {case_id} added to {cases_file}; cassette {cassette_path}")
    return 0
