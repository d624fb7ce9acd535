"""`agentbench run PATH…`: run golden suites, print the summary, exit by the quality gate.

By default every case replays its cassette (no network, no API key); `--live` sends every
model call of every case to a real endpoint (OPENAI_BASE_URL / OPENAI_API_KEY, or `--base-url`
and `--model`) and never reads a cassette, and writes them only as `--record-mode` says;
`--live-from-divergence` replays each case up to its first drifted request and lets the live
model answer the rest. Exit codes: 0 passed, 1 the gate failed (a failing case, a pass rate
under `--fail-under`, an XPASS with `--strict-xfail`, or with `--fail-on-change` a case that
behaves differently from the baseline), 2 a suite file is invalid or the options cannot work
together (the valid suites still run), 3 a case could not run at all (a missing or corrupt
cassette, a live model that failed), 130 interrupted (the message names the eval and the
`--resume` command that finishes it).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from pathlib import Path
from typing import Any

import click

from agentbench.commands import summary as summary_text
from agentbench.commands.interrupted import command_line, explains_interruption
from agentbench.commands.interrupted import note as interruption_note
from agentbench.commands.run_outputs import (
    check_shard_options,
    finish,
    gate_options,
    judge,
    nothing_runnable,
    show,
    write_outputs,
)
from agentbench.commands.traces import open_store, store_options
from agentbench.errors import UsageError
from agentbench.evals.comparing.against import run_against
from agentbench.evals.comparing.baseline import check_baseline_spec
from agentbench.evals.running.executor_choice import make_executor
from agentbench.evals.running.harness import Harness, HarnessOptions
from agentbench.evals.running.shards import Shard
from agentbench.evals.storage.lake import lake_folder, write_lake
from agentbench.evals.storage.results_store import check_resumable
from agentbench.evals.suites.dataset import discover
from agentbench.replay.cassette import RecordMode
from agentbench.trace.code_version import anchor, code_version, find_work_tree
from agentbench.trace.store import default_path

EXIT_OK, EXIT_GATE, EXIT_USAGE, EXIT_INFRA = 0, 1, 2, 3


@click.command(
    "run",
    epilog="""\b
Examples:
  agentbench run golden/
  agentbench run golden/ --filter tag:smoke --trials 3 --junit junit.xml --baseline latest
  agentbench run golden/sre --live --record-mode all --model gpt-4o-mini
""",
)
@click.argument("paths", nargs=-1, type=click.Path(exists=True, path_type=Path), required=True)
@click.option(
    "--trials",
    "-k",
    type=click.IntRange(min=1),
    default=None,
    help="Runs of each case (default: each suite's own).",
)
@click.option(
    "--concurrency",
    "-n",
    type=click.IntRange(min=1),
    default=4,
    show_default=True,
    help="Trials run at once, over all suites.",
)
@click.option(
    "--filter",
    "filters",
    multiple=True,
    metavar="ID|tag:NAME",
    help="Only cases whose id matches (glob, or suite/id) or that have the tag.",
)
@click.option(
    "--live",
    is_flag=True,
    help="Call the real model for every model call of every case; no cassette is read, and "
    "none is written unless --record-mode once|all. A call that fails (no connection, a "
    "timeout, 5xx after retries) makes its case an infrastructure error (exit 3) and leaves "
    "its cassette as it was.",
)
@click.option(
    "--record-mode",
    type=click.Choice([m.value for m in RecordMode]),
    default=None,
    help="What is written to the cassettes [default: none]. With --live: none (nothing), "
    "once (a cassette for each case that has none), all (every case's, anew). Without "
    "--live: once (replay a case that has a cassette, record one that has none, live), "
    "new_episodes (replay, and record the calls beyond the recording, live).",
)
@click.option("--model", "model", default=None, help="Live model name (default: each suite's).")
@click.option("--base-url", default=None, help="Live endpoint (default: OPENAI_BASE_URL).")
@click.option("--strict", is_flag=True, help="Stop a case at its first drifted request.")
@click.option(
    "--allow-drift",
    is_flag=True,
    help="Report request drift instead of failing on it (a case that went on with recorded "
    "answers after it still cannot pass: see --live-from-divergence).",
)
@click.option(
    "--live-from-divergence",
    is_flag=True,
    help="Continue each case live from its first drifted request (--model/--base-url, "
    "OPENAI_BASE_URL, or the suite's model:) and score the real continuation.",
)
@click.option(
    "--resume",
    default=None,
    metavar="EVAL_ID",
    help="Continue an interrupted eval: run only the trials it has no result for.",
)
@click.option(
    "--against",
    default=None,
    metavar="REF",
    help="First run the same suites at git REF (a temporary worktree) as the baseline.",
)
@click.option(
    "--shard",
    default=None,
    metavar="K/N",
    help="Run part K of N of the trials (balanced by recorded steps, stable as cases are "
    "added), for a CI job matrix; `agentbench merge` joins the parts.",
)
@click.option(
    "--eval-id",
    default=None,
    metavar="ID",
    help="Record under this eval id [default: new; with --shard, one every shard of the CI "
    "run derives alike].",
)
@click.option(
    "--executor",
    type=click.Choice(["local", "ray"]),
    default="local",
    show_default=True,
    help="Where trials run: this process, or Ray tasks (the `ray` extra).",
)
@click.option(
    "--ray-address",
    default=None,
    metavar="ADDRESS",
    help="With --executor ray: the cluster to join (auto, ray://host:10001) [default: a "
    "local Ray started for this run].",
)
@click.option(
    "--results",
    "results_lake",
    default=None,
    metavar="parquet://DIR",
    help="Also write this eval's evals, results and traces to DIR as date-partitioned Parquet.",
)
@gate_options
@store_options
@explains_interruption(command_line)
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
    live_from_divergence: bool,
    fail_under: float | None,
    resume: str | None,
    baseline: str | None,
    against: str | None,
    budget_pct: float,
    fail_on_change: bool,
    strict_xfail: bool,
    junit: Path | None,
    summary_md: Path | None,
    report_dir: Path | None,
    no_report: bool,
    as_json: bool,
    shard: str | None,
    eval_id: str | None,
    executor: str,
    ray_address: str | None,
    results_lake: str | None,
    db: Path | None,
    wait_s: float,
) -> int:
    """Run the golden suites under PATHS (replaying cassettes unless --live)."""
    found = discover(list(paths))
    for error in found.errors:
        click.echo(f"error: {error}", err=True)
    if not found.suites:
        click.echo("no runnable suite found", err=True)
        click.echo(nothing_runnable([str(e) for e in found.errors]).text(), err=True)
        return EXIT_USAGE
    # Everything is anchored at the repository holding the suites, wherever this was typed.
    root = project_root(paths[0], found.suites[0])
    anchor(root)
    options = HarnessOptions(
        trials=trials,
        concurrency=concurrency,
        record_mode=RecordMode.parse(record_mode or "none"),
        live=live,
        model=model,
        base_url=base_url,
        filters=filters,
        strict=strict,
        allow_drift=allow_drift,
        live_from_divergence=live_from_divergence,
        resume=resume,
        shard=_shard(shard, resume, eval_id),
        eval_id=eval_id,
    )
    lake = lake_folder(results_lake) if results_lake is not None else None
    if baseline is not None and against is not None:
        raise UsageError("--baseline and --against both name a baseline; give one")
    check_shard_options(options.shard, baseline, against, fail_on_change)
    store = open_store(db or default_path(root), wait_s, recording_process=_recording_process())
    # Closed at the end: the recording process stores the last runs and exits with the command.
    with store:
        harness = Harness(store, options, executor=make_executor(executor, ray_address, root))
        harness.check_live_model(found.suites)
        total = harness.planned_trials(found.suites)
        if filters and total == 0:
            names = ", ".join(s.name for s in found.suites)
            raise UsageError(
                f"--filter {' '.join(filters)}: no case of {names} matches (a case id, a glob such "
                "as 'refund-*' or 'sre/*', or tag:NAME)"
            )
        check_baseline_spec(store, baseline, repo=root)
        if resume is not None:
            check_resumable(store, resume, found.suites, code_version(), options)
        baseline_id = None
        if against is not None:
            click.echo(f"running the suites at {against} for the baseline…", err=True)
            baseline_id = run_against(
                against,
                [str(p) for p in paths],
                _harness_args(trials, concurrency, filters, strict, allow_drift),
                db=store.path,
            )
        # The eval's id from now on, so that a Ctrl-C can name it, and its --resume command.
        note = interruption_note()
        options.eval_id = note.eval_id = harness.eval_id_for(found.suites, code_version())
        note.store, note.planned = store.path, total
        note.started, note.finished = (
            lambda: harness.eval_started,
            lambda: harness.finished_trials,
        )
        note.unkept = lambda: store.unkept()[1]
        with summary_text.progress(total, enabled=sys.stderr.isatty() and not as_json) as tick:
            harness.progress = tick
            result = asyncio.run(harness.run(found.suites, [str(e) for e in found.errors]))
        with contextlib.closing(result):
            store.flush()
            if lake is not None:
                written_to = write_lake(store, result.eval_id, lake, options.shard)
                click.echo(f"results: {written_to} (Parquet)", err=True)
            verdict = judge(
                store,
                result,
                baseline_id,
                baseline,
                repo=root,
                budget_pct=budget_pct,
                fail_under=fail_under,
                fail_on_change=fail_on_change,
                strict_xfail=strict_xfail,
                shard=options.shard,
            )
            written = write_outputs(
                store,
                result,
                verdict,
                report_dir=None if no_report else (report_dir or root / "reports").absolute(),
                junit=junit,
                summary_md=summary_md,
                as_json=as_json,
            )
            show(
                result,
                verdict,
                written,
                store_path=store.path,
                fail_under=fail_under,
                as_json=as_json,
            )
            # The eval and every output that could be written are kept: exit as the verdict says.
            return finish(verdict, written)


def _recording_process() -> bool:
    """Record in a process of its own when there is a core for it: recording a replayed run
    costs about as much as running it, and this process's GIL would run them one at a time.
    AGENTBENCH_RECORDING_PROCESS=0 (or 1) decides instead."""
    given = os.environ.get("AGENTBENCH_RECORDING_PROCESS")
    if given:
        return given not in ("0", "false", "no")
    usable = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    return (len(usable) if usable is not None else os.cpu_count() or 1) > 1


def _shard(text: str | None, resume: str | None, eval_id: str | None) -> Shard | None:
    """--shard parsed; --resume names the eval to continue, so it takes no --eval-id."""
    if resume is not None and eval_id is not None and resume != eval_id:
        raise UsageError("--resume names the eval to continue; leave --eval-id out")
    return Shard.parse(text) if text is not None else None


def _harness_args(
    trials: int | None,
    concurrency: int,
    filters: tuple[str, ...],
    strict: bool,
    allow_drift: bool,
) -> list[str]:
    """The flags that make the baseline run comparable with this one."""
    args = ["--concurrency", str(concurrency)]
    if trials is not None:
        args += ["--trials", str(trials)]
    for item in filters:
        args += ["--filter", item]
    if strict:
        args.append("--strict")
    if allow_drift:
        args.append("--allow-drift")
    return args


def project_root(first_path: Path, first_suite: Any) -> Path:
    """The repository the suites belong to: the git checkout around the first path, else
    the first suite's repository root (the parent of the folder holding the suites)."""
    return find_work_tree(first_path) or first_suite.root
