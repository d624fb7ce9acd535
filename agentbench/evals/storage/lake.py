"""`run --results parquet://DIR`: each eval also written to a Parquet lake, for stores that no
longer fit one file.

Every eval becomes an export folder, `DIR/<eval_id>/all/` (a shard's part of it,
`DIR/<eval_id>/shard-K-of-N/`), partitioned by date (runs by their start, results by when
they were recorded) with its manifest: its row in `evals`, its `results`, and its runs with
all their rows. Every table is at the same depth, so DuckDB, Spark or Trino read the lake as
tables (`read_parquet('DIR/*/*/runs/*/*.parquet', hive_partitioning = true)`), and
`agentbench merge DIR --into STORE` brings it back into a store, shards joined into their eval.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from agentbench.errors import UsageError
from agentbench.evals.running.shards import Shard
from agentbench.trace.store import TraceStore

SCHEME = "parquet://"


def lake_folder(spec: str) -> Path:
    """The folder `--results parquet://DIR` names."""
    if not spec.startswith(SCHEME) or not spec[len(SCHEME) :].strip():
        raise UsageError(f"--results {spec!r}: expected parquet://DIR (a folder for the lake)")
    folder = Path(spec[len(SCHEME) :]).expanduser()
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"--results {spec}: {folder} is a file, not a folder")
    return folder


def write_lake(store: TraceStore, eval_id: str, folder: Path, shard: Shard | None = None) -> Path:
    """Export the eval (this shard's part of it) into the lake; its folder there."""
    part = "all" if shard is None else f"shard-{shard.index}-of-{shard.count}"
    target = folder / eval_id / part
    if target.exists():  # a resumed eval: the lake gets its whole, final state
        shutil.rmtree(target)
    store.export_parquet(target, partition_by_date=True, eval_id=eval_id)
    return target
