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
from agentbench.commands.options import (
    Execution,
    Gating,
    ModelCalls,
    Outputs,
    Selection,
    StoreOptions,
    check_shard,
    gate_options,
    gathered,
)
from agentbench.commands.run_outputs import conclude, nothing_runnable
from agentbench.commands.traces import store_options
from agentbench.errors import UsageError
from agentbench.evals.comparing.against import run_against
from agentbench.evals.comparing.baseline import check_baseline_spec
from agentbench.evals.running.executor_choice import make_executor
from agentbench.evals.running.harness import Harness, HarnessOptions
from agentbench.evals.storage.lake import write_lake
from agentbench.evals.storage.results_store import check_resumable
from agentbench.evals.suites.dataset import discover
from agentbench.replay.cassette import RecordMode
from agentbench.trace.code_version import anchor, code_version, find_work_tree
from agentbench.trace.store import default_path

EXIT_USAGE = 2


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
@gathered(
    selection=Selection,
    calls=ModelCalls,
    execution=Execution,
    outputs=Outputs,
    gating=Gating,
    storage=StoreOptions,
)
def run(
    selection: Selection,
    calls: ModelCalls,
    execution: Execution,
    outputs: Outputs,
    gating: Gating,
    storage: StoreOptions,
) -> int:
    """Run the golden suites under PATHS (replaying cassettes unless --live)."""
    check_shard(execution, gating)
    found = discover(list(selection.paths))
    for error in found.errors:
        click.echo(f"error: {error}", err=True)
    if not found.suites:
        click.echo("no runnable suite found", err=True)
        click.echo(nothing_runnable([str(e) for e in found.errors]).text(), err=True)
        return EXIT_USAGE
    # Everything is anchored at the repository holding the suites, wherever this was typed.
    root = project_root(selection.paths[0], found.suites[0])
    anchor(root)
    options = harness_options(selection, calls, execution)
    store = storage.open(default=default_path(root), recording=_recording_process())
    # Closed at the end: the recording process stores the last runs and exits with the command.
    with store:
        harness = Harness(
            store, options, executor=make_executor(execution.executor, execution.ray_address, root)
        )
        harness.check_live_model(found.suites)
        total = harness.planned_trials(found.suites)
        if selection.filters and total == 0:
            names = ", ".join(s.name for s in found.suites)
            raise UsageError(
                f"--filter {' '.join(selection.filters)}: no case of {names} matches (a case id, "
                "a glob such as 'refund-*' or 'sre/*', or tag:NAME)"
            )
        check_baseline_spec(store, gating.baseline, repo=root)
        if execution.resume is not None:
            check_resumable(store, execution.resume, found.suites, code_version(), options)
        baseline_id = None
        if gating.against is not None:
            click.echo(f"running the suites at {gating.against} for the baseline…", err=True)
            baseline_id = run_against(
                gating.against,
                [str(p) for p in selection.paths],
                baseline_flags(selection, calls, execution),
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
        with summary_text.progress(
            total, enabled=sys.stderr.isatty() and not outputs.as_json
        ) as tick:
            harness.progress = tick
            result = asyncio.run(harness.run(found.suites, [str(e) for e in found.errors]))
        with contextlib.closing(result):
            store.flush()
            if outputs.lake is not None:
                written_to = write_lake(store, result.eval_id, outputs.lake, options.shard)
                click.echo(f"results: {written_to} (Parquet)", err=True)
            # The eval and every output that could be written are kept: exit as the verdict says.
            return conclude(
                store,
                result,
                gating,
                outputs,
                repo=root,
                reports=root / "reports",
                against_id=baseline_id,
                shard=options.shard,
            )


def harness_options(
    selection: Selection, calls: ModelCalls, execution: Execution
) -> HarnessOptions:
    """The harness's options for what this run selects, how its model calls are answered and
    how its trials run."""
    return HarnessOptions(
        trials=selection.trials,
        concurrency=execution.concurrency,
        record_mode=calls.record_mode,
        live=calls.live,
        model=calls.model,
        base_url=calls.base_url,
        filters=selection.filters,
        strict=calls.strict,
        allow_drift=calls.allow_drift,
        live_from_divergence=calls.live_from_divergence,
        resume=execution.resume,
        shard=execution.shard,
        eval_id=execution.eval_id,
    )


def _recording_process() -> bool:
    """Record in a process of its own when there is a core for it: recording a replayed run
    costs about as much as running it, and this process's GIL would run them one at a time.
    AGENTBENCH_RECORDING_PROCESS=0 (or 1) decides instead."""
    given = os.environ.get("AGENTBENCH_RECORDING_PROCESS")
    if given:
        return given not in ("0", "false", "no")
    usable = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    return (len(usable) if usable is not None else os.cpu_count() or 1) > 1


def baseline_flags(selection: Selection, calls: ModelCalls, execution: Execution) -> list[str]:
    """The flags that make the baseline run (`--against`) comparable with this one."""
    args = ["--concurrency", str(execution.concurrency)]
    if selection.trials is not None:
        args += ["--trials", str(selection.trials)]
    for item in selection.filters:
        args += ["--filter", item]
    if calls.strict:
        args.append("--strict")
    if calls.allow_drift:
        args.append("--allow-drift")
    return args


def project_root(first_path: Path, first_suite: Any) -> Path:
    """The repository the suites belong to: the git checkout around the first path, else
    the first suite's repository root (the parent of the folder holding the suites)."""
    return find_work_tree(first_path) or first_suite.root
