"""Whether a stored eval holds every trial it planned, and the command that runs the rest.

`start_eval` keeps what an eval planned — its selection (`--filter`, `--trials`, `--shard`,
`--live`, …) and `planned_trials`, per part: `all`, or each shard of a CI matrix, which a merge
adds up — and marks it `running`; `finish_eval` marks it `finished`. An eval still `running`
was killed or interrupted (or is running now), and a finished one holding fewer results than
it planned lost some. Either way a verdict on it would be about part of the work, so `gate`
and `report` call it an error, exit 3: as with an outage, the code was not judged, and the
fix is to run the rest — the `--resume` command named here — not to change the code.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from agentbench.evals.storage.results_store import SELECTION_FLAGS


@dataclass(frozen=True)
class Completion:
    """What an eval planned against what it holds."""

    eval_id: str
    finished: bool
    planned: int | None  # trials planned (None: kept by an agentbench that did not say)
    held: int  # trials with a result
    resume: str  # the command that runs the rest
    suite_errors: int = 0  # suites that could not be loaded: their trials never run

    @property
    def missing(self) -> int | None:
        return None if self.planned is None else max(0, self.planned - self.held)

    def problem(self) -> str | None:
        """The sentence that makes the verdict an error, or None: the eval is complete (or
        what it lacks is its suite errors' doing, which say so themselves)."""
        if self.finished and (self.suite_errors or not self.missing):
            return None
        if self.missing is not None:
            lacks = f"{self.missing} of its {self.planned} planned trials have no result"
        else:
            lacks = f"it holds {self.held} trial(s), and how many it planned was not kept"
        state = (
            "did not finish (it was killed or interrupted, or is still running)"
            if not self.finished
            else "is incomplete"
        )
        return f"The eval {state}: {lacks}; run the rest with `{self.resume}`."

    def as_data(self) -> dict[str, Any]:
        return {"finished": self.finished, "planned": self.planned, "held": self.held}


def planned_trials(config: dict[str, Any]) -> int | None:
    """The trials an eval planned, over the parts it holds (None when not kept)."""
    plans = config.get("planned_trials")
    if not isinstance(plans, dict) or not plans:
        return None
    counts = [count for count in plans.values() if isinstance(count, int)]
    return sum(counts) if len(counts) == len(plans) else None


def completion_of(
    store: Any, eval_id: str, *, held: int, suite_errors: int = 0
) -> Completion | None:
    """The eval's `Completion` (None for an eval the store does not have); `held` is the
    number of its trials with a result, which the caller has counted."""
    with store.reading() as conn:
        row = conn.execute(
            "SELECT status, config FROM evals WHERE eval_id = ?", [eval_id]
        ).fetchone()
    if row is None:
        return None
    config = json_object(row[1])
    return Completion(
        eval_id,
        row[0] == "finished",
        planned_trials(config),
        held,
        resume_command(config, eval_id, store.path),
        suite_errors,
    )


def resume_command(config: dict[str, Any], eval_id: str, store_path: Path) -> str:
    """`agentbench run PATH… <its selection> --resume EVAL_ID --db STORE`: the selection it
    was started with, which `--resume` requires. For a merged eval of several shards, the
    shard is left as K/N: the job to resume is the one whose shard did not finish."""
    suites = config.get("suites")
    paths = [str(p) for p in suites.values()] if isinstance(suites, dict) and suites else []
    words = ["agentbench", "run", *(paths or ["PATH…"])]
    for key, flag in {**SELECTION_FLAGS, "base_url": "--base-url"}.items():
        value = config.get(key)
        if key == "shards" and isinstance(value, list) and len(value) > 1:
            value = ["K/N"]
        if key == "record_mode" and value == "none":
            continue
        if value is True:
            words.append(flag)
        elif isinstance(value, list):
            for item in value:
                words += [flag, str(item)]
        elif value not in (None, False):
            words += [flag, str(value)]
    words += ["--resume", eval_id, "--db", str(store_path)]
    return shlex.join(words)


def json_object(text: str | None) -> dict[str, Any]:
    """A stored JSON column as a mapping: {} for none, bad JSON or anything but an object."""
    try:
        value = orjson.loads(text) if text else None
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}
