"""`--executor ray`: trials as Ray tasks, a batch of trials per task (the `ray` extra).

The driver ships the suites' repository to a cluster it joins (`--ray-address`) as Ray's
runtime environment (`working_dir`; a Ray it starts on this machine reads the suites in
place), splits the queued trials into batches — enough for every CPU to have a few,
few enough that scheduling stays a small part of the time — and submits one task per batch.
A task loads its suites (once per worker process), runs its trials with the same harness code
as the local executor, and records their runs into rows in memory instead of a store: the
recorder's own rows, returned with the outcomes. Only the driver writes the store, once per
batch as each comes back, so DuckDB's single writer is respected by design. A worker that
dies takes its batch with it; Ray runs the task again (`max_retries`) and nothing of the lost
attempt was stored, so nothing is stored twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import itertools
import math
import sys
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import ray

from agentbench.errors import AgentbenchError, UsageError, one_line
from agentbench.evals.running.executors import (
    Finished,
    LocalExecutor,
    Queued,
    TrialRunner,
    store_batch,
)
from agentbench.evals.running.harness import Harness, agent_for, run_setup
from agentbench.evals.suites.dataset import load_suite
from agentbench.trace.recorder import RunLabels, TraceRecorder
from agentbench.trace.redaction.redactor import Redactor
from agentbench.trace.redaction.rules import RedactionRules
from agentbench.trace.schema import RunRows

# Left out of what is shipped to the cluster: environments, stores, reports, history.
SHIPPED_EXCLUDES = [
    ".venv",
    "venv",
    ".git",
    ".cache",
    ".hypothesis",
    ".pytest_cache",
    ".ruff_cache",
    "__pycache__",
    "reports",
    ".agentbench",
    "*.duckdb",
    "*.duckdb.*",
]
TASK_RETRIES = 3  # a worker lost mid-batch: its batch runs again, up to this many times
BATCHES_PER_CPU = 4
# At most this many trials a task: a task is then a second or so of replays (scheduling stays
# a small part of it), and what one returns stays small in the driver.
MAX_BATCH = 64
IN_FLIGHT_PER_CPU = 2  # tasks submitted ahead of what has come back, per CPU of the cluster
STORE_BACKLOG = 8  # batches handed to the store and not yet written: the driver waits above


class ExecutorError(AgentbenchError):
    """The executor's cluster could not be reached or started (CLI exit code 3)."""


@dataclass
class BatchStore:
    """What a remote trial records into: the rows of its runs, kept until the batch returns."""

    redaction: RedactionRules = field(default_factory=RedactionRules)
    rows: RunRows = field(default_factory=RunRows)

    def with_labels(self, **labels: Any) -> _Labelled:
        return _Labelled(self, RunLabels(**labels))

    def run_started(self, row: dict[str, Any]) -> None:
        """Nothing to keep until the run ends: the batch is all or nothing anyway."""

    def run_part(self, rows: RunRows) -> None:
        self.rows.extend(rows)

    def run_finished(self, rows: RunRows) -> None:
        self.rows.extend(rows)


@dataclass
class _Labelled:
    store: BatchStore
    labels: RunLabels

    def run_hook(self) -> TraceRecorder:
        return TraceRecorder(
            self.store, redactor=Redactor(self.store.redaction), labels=self.labels
        )


# -- the worker side ---------------------------------------------------------------------------
_loaded: dict[str, tuple[Any, Any]] = {}  # suite folder → (suite, agent), per worker process


def _suite(folder: str) -> tuple[Any, Any]:
    if folder not in _loaded:
        suite = load_suite(Path(folder))
        run_setup(suite)  # before the agent: it builds what the agent may open at import
        agent = agent_for(suite)
        _loaded[folder] = (suite, agent)
    return _loaded[folder]


def run_batch(
    eval_id: str, batch: list[tuple[str, str, int]], options: Any, redaction: RedactionRules
) -> tuple[list[Any], RunRows]:
    """Run one batch of trials in a worker: their outcomes, and the rows of their runs."""
    store = BatchStore(redaction)
    harness = Harness(store, options)
    queued: list[Queued] = []
    for folder, case_id, trial in batch:
        suite, agent = _suite(folder)
        case = suite.case(case_id)
        queued.append((suite, agent, case, trial))
    outcomes: list[Any] = []
    asyncio.run(LocalExecutor().run(harness, queued, eval_id, outcomes.append))
    return outcomes, store.rows


# -- the driver side ---------------------------------------------------------------------------
class RayExecutor:
    """Submits batches of trials to Ray and stores each batch as it comes back."""

    name = "ray"

    def __init__(self, address: str | None = None, root: Path | None = None) -> None:
        self.address = address
        self.root = (root or Path.cwd()).resolve()
        self.shipped = False  # whether tasks run in a shipped copy of the repository

    def _connect(self) -> None:
        """Join the cluster at `address` with the repository as the job's working directory
        (Ray uploads it once, and every task runs the suites' code as it is here, on any
        node), or start a Ray on this machine, whose workers read the suites where they are:
        uploading means packing the whole repository, cassettes included, in the driver's
        memory (2 GB for a 10,000-case suite), for workers that share this disk anyway. Ray
        set up by the caller (a test, a notebook) is used as it is."""
        if ray.is_initialized():
            shipped = (ray.get_runtime_context().runtime_env or {}).get("working_dir")
            self.shipped = bool(shipped)
            return
        try:
            if self.address is None:
                ray.init(include_dashboard=False, log_to_driver=False)
                self.shipped = False
                return
            ray.init(
                address=self.address,
                runtime_env={"working_dir": str(self.root), "excludes": SHIPPED_EXCLUDES},
                include_dashboard=False,
                log_to_driver=False,
            )
        except (ConnectionError, RuntimeError, TimeoutError, OSError) as exc:
            # Ray's node did not come up (a loaded machine, a port taken) or the cluster is
            # out of reach: the infrastructure's failure, not a bug (exit 3).
            where = self.address or "a local Ray started for this run"
            raise ExecutorError(
                f"--executor ray: could not join {where}: {one_line(exc, 300)}"
            ) from None
        self.shipped = True

    def _folder(self, suite: Any) -> str:
        """The suite's folder as a worker sees it: relative to the shipped repository."""
        path = Path(suite.path).resolve()
        if path.is_file():
            path = path.parent
        if not self.shipped:
            return str(path)
        try:
            return str(path.relative_to(self.root))
        except ValueError:
            raise UsageError(
                f"--executor ray ships {self.root} to the workers, and suite {suite.name} "
                f"({path}) is outside it: run from the repository holding the suites"
            ) from None

    def batches(
        self, items: list[tuple[str, str, int]], cpus: int
    ) -> list[list[tuple[str, str, int]]]:
        size = max(1, min(MAX_BATCH, math.ceil(len(items) / (cpus * BATCHES_PER_CPU))))
        return [items[i : i + size] for i in range(0, len(items), size)]

    async def run(
        self, harness: TrialRunner, queued: Iterable[Queued], eval_id: str, finished: Finished
    ) -> None:
        options = harness.options
        if options.live and options.record_mode.value != "none":
            raise UsageError(
                "--executor ray does not record cassettes (a worker's files stay on the worker): "
                "record with the local executor, then replay on Ray"
            )
        # What a worker needs to find a trial: ~100 bytes each, the only per-trial state the
        # driver holds (the batch sizes depend on how many there are).
        folders: dict[str, str] = {}
        items = [
            (
                folders.get(suite.name) or folders.setdefault(suite.name, self._folder(suite)),
                case.id,
                trial,
            )
            for suite, _, case, trial in queued
        ]
        if not items:
            return
        self._connect()
        remote = ray.remote(max_retries=TASK_RETRIES)(run_batch)
        worker_options = replace(options, shard=None, resume=None)
        redaction = getattr(harness.store, "redaction", None) or RedactionRules()
        cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        # Submitted a window at a time, and taken back as they finish: neither the tasks'
        # results nor the store's queue grow with the number of trials (the driver's memory
        # stays flat however many there are).
        waiting = iter(self.batches(items, cpus))
        window = cpus * IN_FLIGHT_PER_CPU
        pending = [
            remote.remote(eval_id, batch, worker_options, redaction)
            for batch in itertools.islice(waiting, window)
        ]
        with _notices_to_stderr():
            while pending:
                done, pending = await asyncio.to_thread(ray.wait, pending, num_returns=1)
                outcomes, rows = await asyncio.to_thread(ray.get, done[0])
                del done
                pending += [
                    remote.remote(eval_id, batch, worker_options, redaction)
                    for batch in itertools.islice(waiting, 1)
                ]
                store_batch(harness.store, rows)  # the driver alone writes the store
                del rows
                for outcome in outcomes:
                    finished(outcome)
                # The store is behind: let its writer thread catch up (a thread, so polled).
                while getattr(harness.store, "backlog", lambda: 0)() > STORE_BACKLOG:  # noqa: ASYNC110
                    await asyncio.sleep(0.01)


# Ray's driver prints cluster notices ("A worker died or was killed…") to stdout from a thread
# of its own; they belong on stderr, with the other diagnostics, so `--json` stays JSON.
_RAY_NOTICE_THREAD = "ray_listen_error_messages"


class _ThreadRouted(io.TextIOBase):
    def __init__(self, out: Any, err: Any) -> None:
        self._out, self._err = out, err

    def write(self, text: str) -> int:
        notice = threading.current_thread().name == _RAY_NOTICE_THREAD
        return (self._err if notice else self._out).write(text)

    def flush(self) -> None:
        self._out.flush()
        self._err.flush()


@contextlib.contextmanager
def _notices_to_stderr() -> Iterator[None]:
    before = sys.stdout
    sys.stdout = _ThreadRouted(before, sys.stderr)
    try:
        yield
    finally:
        sys.stdout = before
