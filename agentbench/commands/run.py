"""`agentbench run PATH…`: run golden suites, print the summary, exit by the quality gate.

By default every case replays its cassette (no network, no API key); `--live` sends the model
calls to a real endpoint (OPENAI_BASE_URL / OPENAI_API_KEY, or `--base-url` and `--model`)
and, with `--record-mode`, writes the cassettes. Exit codes: 0 passed, 1 the gate failed (a
failing case, or a pass rate under `--fail-under`), 2 a suite file is invalid (the valid suites
still run), 3 a case could not run at all (a missing or corrupt cassette).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import click
import orjson

from agentbench.commands import summary as summary_text
from agentbench.commands.traces import open_store, store_options
from agentbench.evals.dataset import discover
from agentbench.evals.harness import Harness, HarnessOptions
from agentbench.evals.stats import TrialOutcome
from agentbench.replay.cassette import RecordMode

EXIT_OK, EXIT_GATE, EXIT_USAGE, EXIT_INFRA = 0, 1, 2, 3


@click.command("run")
@click.argument("paths", nargs=-1, type=click.Path(exists=True, path_type=Path), required=True)
@click.option(
    "--trials",
    "-k",
    type=click.IntRange(min=1),
    default=None,
    help="Runs of each case (default: each suite's own).",
)
@click.option("--concurrency", "-n", type=click.IntRange(min=1), default=4, show_default=True)
@click.option(
    "--filter",
    "filters",
    multiple=True,
    metavar="ID|tag:NAME",
    help="Only cases whose id matches (glob, or suite/id) or that have the tag.",
)
@click.option("--live", is_flag=True, help="Call a real model instead of replaying cassettes.")
@click.option(
    "--record-mode",
    type=click.Choice([m.value for m in RecordMode]),
    default=None,
    help="With --live: none, once (record missing cassettes), new_episodes, all.",
)
@click.option("--model", "model", default=None, help="Live model name (default: each suite's).")
@click.option("--base-url", default=None, help="Live endpoint (default: OPENAI_BASE_URL).")
@click.option("--strict", is_flag=True, help="Stop a case at its first drifted request.")
@click.option(
    "--allow-drift",
    is_flag=True,
    help="Report request drift without failing the case (it fails by default).",
)
@click.option(
    "--fail-under",
    type=click.FloatRange(0, 1),
    default=None,
    metavar="RATE",
    help="Gate on the pass rate (0-1) instead of on every case passing.",
)
@click.option(
    "--resume",
    default=None,
    metavar="EVAL_ID",
    help="Continue an interrupted eval: run only the trials it has no result for.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary and results as JSON.")
@store_options
def run(
    paths: tuple[Path, ...],
    trials: int | None,
    concurrency: int,
    filters: tuple[str, ...],
    live: bool,
    record_mode: str | None,
    model: str | None,
    base_url: str | None,
    strict: bool,
    allow_drift: bool,
    fail_under: float | None,
    resume: str | None,
    as_json: bool,
    db: Path | None,
    wait_s: float,
) -> int:
    """Run the golden suites under PATHS (replaying cassettes unless --live)."""
    found = discover(list(paths))
    for error in found.errors:
        click.echo(f"error: {error}", err=True)
    options = HarnessOptions(
        trials=trials,
        concurrency=concurrency,
        record_mode=RecordMode.parse(record_mode or ("once" if live else "none")),
        live=live,
        model=model,
        base_url=base_url,
        filters=filters,
        strict=strict,
        allow_drift=allow_drift,
        resume=resume,
    )
    store = open_store(db, wait_s)
    harness = Harness(store, options)
    total = harness.planned_trials(found.suites)
    if not found.suites:
        click.echo("no runnable suite found", err=True)
        return EXIT_USAGE
    with summary_text.progress(total, enabled=sys.stderr.isatty() and not as_json) as tick:
        harness.progress = tick
        result = asyncio.run(harness.run(found.suites, [str(e) for e in found.errors]))
    store.flush()
    summary = result.summary
    gate_failed = (
        summary.pass_rate is not None and summary.pass_rate < fail_under
        if fail_under is not None
        else summary.failed > 0 or summary.errors > 0
    )
    if as_json:
        click.echo(
            orjson.dumps(
                {
                    "eval_id": result.eval_id,
                    "store": str(store.path),
                    "summary": summary.as_dict(),
                    "suite_errors": result.suite_errors,
                    "results": [_outcome(o) for o in result.outcomes],
                },
                option=orjson.OPT_INDENT_2,
                default=str,
            ).decode()
        )
    else:
        click.echo(summary_text.render(result, store.path, fail_under=fail_under))
    if found.errors or len(result.suite_errors) > len(found.errors):
        return EXIT_USAGE
    if summary.errors and fail_under is None:
        return EXIT_INFRA
    return EXIT_GATE if gate_failed else EXIT_OK


def _outcome(outcome: TrialOutcome) -> dict[str, object]:
    return dict(outcome.__dict__)
