"""Where an eval's trials run: the one small interface the harness calls, and the local executor.

The harness plans the trials (selection, shards, resumed ones) and owns the eval: its id,
the store, the results. An executor only runs the queued trials and hands each finished one
back through `Finished` — the local one as asyncio tasks in this process, the Ray one
(`ray_executor`, the `ray` extra) as Ray tasks of a batch of trials each. Nothing else
differs, so a gate, a report or a merge cannot tell which ran an eval. What an executor needs
of the harness is `TrialRunner`; `executor_choice` makes the one `--executor NAME` asks for.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from agentbench.evals.comparing.stats import TrialOutcome
    from agentbench.trace.schema import RunRows

# A queued trial: (suite, agent, case, trial number).
Queued = tuple[Any, Any, Any, int]
# Called with each trial's outcome as it finishes (and, from a remote executor, the rows of
# the runs it recorded, which the driver stores).
Finished = Callable[["TrialOutcome"], None]


class TrialRunner(Protocol):
    """What an executor needs of the harness: its options (`concurrency`; the Ray executor
    sends them to its workers), its store, and one trial run and scored."""

    options: Any
    store: Any

    async def run_trial(
        self, suite: Any, agent: Any, case: Any, trial: int = 1, *, eval_id: str | None = None
    ) -> TrialOutcome: ...


class Executor(Protocol):
    name: str

    async def run(
        self, harness: TrialRunner, queued: Iterable[Queued], eval_id: str, finished: Finished
    ) -> None: ...


class LocalExecutor:
    """Trials as asyncio tasks in this process, `concurrency` at once."""

    name = "local"

    async def run(
        self, harness: TrialRunner, queued: Iterable[Queued], eval_id: str, finished: Finished
    ) -> None:
        # As many workers as trials run at once, each taking the next trial when its last is
        # done: a task per trial, made up front, would hold a coroutine and a task for every
        # trial of the eval until it ends. `queued` may be a generator (trials are planned as
        # they are taken), so a worker that finds it empty simply ends.
        waiting = iter(queued)

        async def worker() -> None:
            for suite, agent, case, trial in waiting:
                finished(await harness.run_trial(suite, agent, case, trial, eval_id=eval_id))

        await asyncio.gather(*(worker() for _ in range(harness.options.concurrency)))


def store_batch(store: Any, rows: RunRows) -> None:
    """A remote batch's recorded runs, handed to the store in one call."""
    if not rows.is_empty():
        store.run_finished(rows)
