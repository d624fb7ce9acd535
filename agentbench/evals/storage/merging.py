"""Shards and lakes combined into one store: `agentbench merge SOURCE… --into STORE`.

A source is a store file (the store of one `run --shard K/N` job), a folder written by
`traces export` or `run --results parquet://DIR` (one export, or a folder of them), and each
is added with the trace layer's merge: runs the target lacks, results it lacks, evals joined
by id. Then every eval that gained results has its summary recomputed from all of its
results, exactly as the harness summarizes a whole eval, so the report, diff and gate over
the merged store see one eval — and say which of its shards are there.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from agentbench.errors import UsageError
from agentbench.evals.comparing.stats import summarize
from agentbench.evals.running.shards import ShardSet
from agentbench.evals.storage.results_store import iter_stored_outcomes, redactor_for
from agentbench.trace.storage.portable import MANIFEST
from agentbench.trace.store import TraceStore


@dataclass
class MergedEval:
    eval_id: str
    trials: int
    shards: list[str]  # K/N of each shard present
    missing: list[str]  # K/N of each shard of the same N not present


@dataclass
class MergeSummary:
    added: dict[str, dict[str, int]] = field(default_factory=dict)  # source → table → rows
    evals: list[MergedEval] = field(default_factory=list)


def sources_in(paths: Iterable[Path]) -> list[Path]:
    """Store files as given; an export folder as given; a folder of exports (a lake, at any
    depth), each export."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            if (path / MANIFEST).is_file():
                found.append(path)
                continue
            exports = sorted(p.parent for p in path.glob(f"**/{MANIFEST}"))
            if not exports:
                raise UsageError(
                    f"{path}: a folder, but neither an export (no {MANIFEST}) nor a folder of "
                    "exports; expected a store file or a folder written by `traces export` "
                    "or `run --results parquet://DIR`"
                )
            found.extend(exports)
        elif path.is_file():
            found.append(path)
        else:
            raise UsageError(f"{path}: no such store file or export folder")
    return found


def _result_counts(store: TraceStore) -> dict[str, int]:
    if not store.path.exists():
        return {}
    with store.reading() as conn:
        rows = conn.execute("SELECT eval_id, count(*) FROM results GROUP BY eval_id").fetchall()
    return {str(eval_id): int(count) for eval_id, count in rows}


def merge(target: TraceStore, sources: Iterable[Path]) -> MergeSummary:
    """Add every source to `target`, then re-summarize the evals that changed."""
    summary = MergeSummary()
    before = _result_counts(target)
    for source in sources_in(sources):
        if source.resolve() == target.path.resolve():
            raise UsageError(f"{source} is the store merged into; name it once, with --into")
        if source.is_dir():
            summary.added[str(source)] = target.import_parquet(source)
        else:
            summary.added[str(source)] = target.merge(source)
    target.flush()
    after = _result_counts(target)
    changed = sorted(e for e, count in after.items() if count != before.get(e))
    for eval_id in changed:
        summary.evals.append(resummarize(target, eval_id))
    return summary


def resummarize(store: TraceStore, eval_id: str) -> MergedEval:
    """Recompute a merged eval's summary from all of its results."""
    # Streamed through the summary (which keeps counters only): a merged eval of any size.
    totals = summarize(iter_stored_outcomes(store, eval_id))
    with store.reading() as conn:
        row = conn.execute(
            "SELECT summary, config, status FROM evals WHERE eval_id = ?", [eval_id]
        ).fetchone()
    old = orjson.loads(row[0]) if row and row[0] else {}
    config = orjson.loads(row[1]) if row and row[1] else {}
    new: dict[str, Any] = totals.as_dict()
    new["suite_errors"] = old.get("suite_errors", [])
    held = ShardSet.of(config.get("shards"))
    shards, missing = list(held.present), held.missing
    new["shards"] = {"present": shards, "missing": missing}
    new = redactor_for(store).value(new)
    with store.writing() as conn:
        conn.execute(
            "UPDATE evals SET summary = ?, finished_at = coalesce(finished_at, ?) "
            "WHERE eval_id = ?",
            [orjson.dumps(new).decode(), datetime.now(UTC), eval_id],
        )
    return MergedEval(eval_id, totals.trials, shards, missing)
