"""The options of `agentbench run` and `agentbench gate`, gathered by concern into typed objects.

Click parses the flags; `gathered` builds them into these frozen objects in one place, checking
flags that cannot work together as each is built, and hands the command the objects instead of
the loose flags: what to run (`Selection`), how its model calls are answered (`ModelCalls`), how
the trials run (`Execution`), what the eval is judged by (`Gating`), where the outputs go
(`Outputs`) and which trace store holds it all (`StoreOptions`). `gate` shares the last three
with `run`, and `gate_options` declares their flags for both, so both read the same.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click

from agentbench.commands.traces import open_store
from agentbench.errors import UsageError
from agentbench.evals.running.shards import Shard
from agentbench.evals.storage.lake import lake_folder
from agentbench.replay.cassette import RecordMode
from agentbench.trace.store import TraceStore

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Selection:
    """What to run: the suites under `paths`, the cases `filters` pick (ids, globs or
    `tag:NAME`; none: every case), and `trials` runs of each (None: each suite's own)."""

    paths: tuple[Path, ...]
    filters: tuple[str, ...] = ()
    trials: int | None = None


@dataclass(frozen=True)
class ModelCalls:
    """How each case's model calls are answered: replayed from its cassette (the default),
    by the live model (`live`), or replayed up to the first drifted request and live from
    there (`live_from_divergence`); what is written to the cassettes (`record_mode`), and
    what a drifted request does (`strict` stops the case, `allow_drift` only reports it)."""

    live: bool = False
    record_mode: RecordMode = RecordMode.NONE
    model: str | None = None  # the live model's name (default: each suite's)
    base_url: str | None = None  # the live endpoint (default: OPENAI_BASE_URL)
    strict: bool = False
    allow_drift: bool = False
    live_from_divergence: bool = False

    @classmethod
    def from_flags(
        cls,
        *,
        live: bool,
        record_mode: str | None,
        model: str | None,
        base_url: str | None,
        strict: bool,
        allow_drift: bool,
        live_from_divergence: bool,
    ) -> ModelCalls:
        # Which modes work together is the harness's to say: it also runs without this CLI.
        mode = RecordMode.parse(record_mode or "none")
        return cls(live, mode, model, base_url, strict, allow_drift, live_from_divergence)


@dataclass(frozen=True)
class Execution:
    """How the trials run: `concurrency` at once, where (`executor`: this process, or Ray
    tasks on the cluster at `ray_address`), which of them (`shard`: one part of a CI job
    matrix), and the eval they are recorded under (`eval_id`, or the interrupted eval that
    `resume` continues)."""

    concurrency: int = 4
    executor: str = "local"
    ray_address: str | None = None
    shard: Shard | None = None
    eval_id: str | None = None
    resume: str | None = None

    def __post_init__(self) -> None:
        if self.resume is not None and self.eval_id is not None and self.resume != self.eval_id:
            raise UsageError("--resume names the eval to continue; leave --eval-id out")

    @classmethod
    def from_flags(
        cls,
        *,
        concurrency: int,
        executor: str,
        ray_address: str | None,
        shard: str | None,
        eval_id: str | None,
        resume: str | None,
    ) -> Execution:
        part = Shard.parse(shard) if shard is not None else None
        return cls(concurrency, executor, ray_address, part, eval_id, resume)


@dataclass(frozen=True)
class Gating:
    """What the eval is judged by: the baseline it is compared with (`baseline`, a stored
    eval, `latest` or `git:REF`; or the suites run at git ref `against` first), and the
    gate's thresholds."""

    baseline: str | None = None
    against: str | None = None  # `run` only
    fail_under: float | None = None  # the pass rate under which the gate fails
    budget_pct: float = 20.0  # tokens, cost or latency worse than this is a regression
    fail_on_change: bool = False  # any changed trajectory fails the gate
    strict_xfail: bool = False  # an xfail case that passes fails the gate

    def __post_init__(self) -> None:
        if self.baseline is not None and self.against is not None:
            raise UsageError("--baseline and --against both name a baseline; give one")


@dataclass(frozen=True)
class Outputs:
    """Where the verdict is written besides the terminal: JUnit, a Markdown summary, the HTML
    report (unless `no_report`), JSON on stdout instead of the summary (`as_json`), and, for
    `run`, a Parquet lake (`lake`, from `--results parquet://DIR`)."""

    junit: Path | None = None
    summary_md: Path | None = None
    report_dir: Path | None = None
    no_report: bool = False
    as_json: bool = False
    lake: Path | None = None

    @classmethod
    def from_flags(
        cls,
        *,
        junit: Path | None,
        summary_md: Path | None,
        report_dir: Path | None,
        no_report: bool,
        as_json: bool,
        results_lake: str | None = None,
    ) -> Outputs:
        lake = lake_folder(results_lake) if results_lake is not None else None
        return cls(junit, summary_md, report_dir, no_report, as_json, lake)

    def report_folder(self, default: Path) -> Path | None:
        """The folder the HTML report goes into: `--report-dir` (relative to where the
        command was typed), else `default`; None with `--no-report`."""
        return None if self.no_report else (self.report_dir or default).absolute()


@dataclass(frozen=True)
class StoreOptions:
    """The trace store a command uses (`--db`, else the default) and how long it waits
    while another process writes it (`--wait`)."""

    db: Path | None = None
    wait_s: float = 30.0

    def open(
        self, *, default: Path | None = None, existing: bool = False, recording: bool = False
    ) -> TraceStore:
        """The store, at `--db` or else `default` (else the usual default); see `open_store`
        for `existing` and `recording` (records in a process of its own)."""
        return open_store(
            self.db or default, self.wait_s, existing=existing, recording_process=recording
        )


def check_shard(execution: Execution, gating: Gating) -> None:
    """`run --shard` judges its own trials: the baseline comparison is the merged eval's."""
    shard = execution.shard
    if shard is None:
        return
    for flag, given in (
        ("--baseline", gating.baseline),
        ("--against", gating.against),
        ("--fail-on-change", gating.fail_on_change),
    ):
        if given:
            raise UsageError(
                f"--shard {shard} with {flag}: a shard is one part of the eval and is gated on "
                "its own trials; `agentbench merge` the shards' stores, then `agentbench gate "
                f"EVAL_ID {flag}{'' if flag == '--fail-on-change' else ' …'}` compares the "
                "whole eval"
            )


def gathered(**groups: Callable[..., Any]) -> Callable[[F], F]:
    """Hand the decorated click command its flags as option objects: `name=Group` passes
    `name`, a `Group` built from the flags named as the parameters of its `from_flags` (or of
    the class itself). Groups are built in the order given, so a flag error is told in that
    order; flags no group takes (the command's arguments) are passed on as they are."""

    def decorate(command: F) -> F:
        @functools.wraps(command)
        def wrapper(**flags: Any) -> Any:
            built = {name: _build(group, flags) for name, group in groups.items()}
            return command(**flags, **built)

        return wrapper  # type: ignore[return-value]

    return decorate


def _build(group: Callable[..., Any], flags: dict[str, Any]) -> Any:
    """`group` built from the flags it takes, which are taken out of `flags`."""
    make = getattr(group, "from_flags", group)
    names = [name for name in inspect.signature(make).parameters if name in flags]
    return make(**{name: flags.pop(name) for name in names})


def gate_options(command: F) -> F:
    """The flags of a gate (`Gating`) and its outputs (`Outputs`), shared by `run` (which
    gates the eval it runs) and `gate` (which gates a stored one), so both read the same."""
    options = [
        click.option(
            "--fail-under",
            type=click.FloatRange(0, 1),
            default=None,
            metavar="RATE",
            help="Gate on the pass rate (0-1) instead of on every case passing.",
        ),
        click.option(
            "--baseline",
            default=None,
            metavar="EVAL_ID|latest|git:REF",
            help="Compare with this stored eval [default: the latest eval of the merge-base].",
        ),
        click.option(
            "--budget-pct",
            type=click.FloatRange(min=0),
            default=20.0,
            show_default=True,
            help="Tokens, cost or latency worse than this percentage is a budget regression.",
        ),
        click.option(
            "--fail-on-change",
            is_flag=True,
            help="With a baseline: fail the gate when any case's trajectory differs from the "
            "baseline's, scores equal or not (for upgrades that must not change behaviour).",
        ),
        click.option(
            "--strict-xfail",
            is_flag=True,
            help="An xfail case that passes (XPASS) fails the gate, in every suite (a suite "
            "can ask for it alone with strict_xfail: true).",
        ),
        click.option(
            "--junit",
            type=click.Path(dir_okay=False, path_type=Path),
            default=None,
            help="Write a JUnit XML file (one testcase per case and trial).",
        ),
        click.option(
            "--summary-md",
            type=click.Path(dir_okay=False, path_type=Path),
            default=None,
            help="Write a Markdown summary (also appended to $GITHUB_STEP_SUMMARY when set).",
        ),
        click.option(
            "--report-dir",
            type=click.Path(file_okay=False, path_type=Path),
            default=None,
            help="Where the HTML report is written (<dir>/<eval_id>/index.html) "
            "[default: reports/ in the repository holding the suites].",
        ),
        click.option("--no-report", is_flag=True, help="Do not write the HTML report."),
        click.option(
            "--json", "as_json", is_flag=True, help="Print the summary and results as JSON."
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command
