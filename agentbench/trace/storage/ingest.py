"""Writing rows into DuckDB: one Arrow table per table, one INSERT each, one transaction.

DuckDB pays about 1.6 ms per INSERT statement whatever its size, and inserts Arrow data at
hundreds of thousands of rows a second, so a batch of many runs costs little more than one.
Eval results travel in the same batches (as durable as the runs they scored). A run that is
already stored (ingested before a crash, recovered twice, imported again) is skipped by id:
`runs.run_id` is the primary key, and a conflict switches to a slower path that filters the
batch first, so the common case pays nothing for it; a run stored only as `incomplete` (its
start, from the journal of a process that died while the run went on elsewhere) gives way
to the whole run. A long run's parts (rows it left in its
journal while it ran) are read back one at a time and inserted in the same transaction,
gathered as Arrow tables up to `PART_BYTES` between INSERTs: a part is ~512 rows, and an INSERT
a part per table cost more than the rows (bounded, so a long run is never all in memory).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from agentbench.trace.redaction.remask import remask_stored
from agentbench.trace.schema import CHILD_TABLES, TABLES, RunRows, RunStatus
from agentbench.trace.storage.faults import roll_back

_view_names = itertools.count()
# `runs` first: a duplicate run id fails before the large tables are written.
_RUNS = ("runs",)
# Bytes of parts' rows (as Arrow) gathered before they are inserted.
PART_BYTES = 4 << 20


@dataclass(frozen=True)
class Inserted:
    runs: int
    skipped: int  # already stored


def insert_rows(conn: duckdb.DuckDBPyConnection, rows: RunRows) -> Inserted:
    """Insert every row of `rows` in one transaction; runs already stored are skipped."""
    remask_stored(rows)  # long runs that learned a secret after their first parts
    tables = {name: rows.arrow(name) for name in TABLES}
    tables = _one_row_per_run(tables)
    offered = tables["runs"].num_rows
    conn.execute("BEGIN")
    try:
        skipped: pa.Array | None = None
        try:
            _insert(conn, tables, _RUNS)
        except duckdb.ConstraintException:
            conn.execute("ROLLBACK")
            conn.execute("BEGIN")
            _replace_unfinished(conn, tables["runs"])
            skipped = _stored_already(conn, tables["runs"])
            tables = _without(tables, skipped)
            _insert(conn, tables, _RUNS)
        # A long run's parts before its last rows: the rows go in in the order they were made.
        _insert_parts(conn, rows, skipped, tables)
        if rows.results:
            _insert_results(conn, rows.results_arrow())
        conn.execute("COMMIT")
    except BaseException:
        roll_back(conn)
        raise
    stored = tables["runs"].num_rows
    return Inserted(runs=stored, skipped=offered - stored)


def _insert_parts(
    conn: duckdb.DuckDBPyConnection,
    rows: RunRows,
    skipped: pa.Array | None,
    last: dict[str, pa.Table],
) -> None:
    """The rows long runs left in their journal, then `last` (the batch's own child rows), in
    the same transaction; none of a run already stored. Parts are read one at a time and
    gathered up to `PART_BYTES` between INSERTs."""
    gathered: dict[str, list[pa.Table]] = {name: [] for name in CHILD_TABLES}
    size = 0
    for load in rows.parts:
        part = load()
        tables = {name: part.arrow(name) for name in CHILD_TABLES}
        if skipped is not None:
            tables = _without(tables, skipped)
        for name, table in tables.items():
            gathered[name].append(table)
            size += table.nbytes
        if size >= PART_BYTES:
            _insert(conn, _joined(gathered), CHILD_TABLES)
            gathered = {name: [] for name in CHILD_TABLES}
            size = 0
    for name in CHILD_TABLES:
        gathered[name].append(last[name])
    _insert(conn, _joined(gathered), CHILD_TABLES)


def _joined(gathered: dict[str, list[pa.Table]]) -> dict[str, pa.Table]:
    """Each table's pieces as one table (its pieces' chunks, not copied)."""
    return {
        name: tables[0] if len(tables) == 1 else pa.concat_tables(tables)
        for name, tables in gathered.items()
    }


def _insert(
    conn: duckdb.DuckDBPyConnection, tables: dict[str, pa.Table], names: tuple[str, ...]
) -> None:
    for name in names:
        table = tables[name]
        if table.num_rows == 0:
            continue
        view = f"_agentbench_batch_{next(_view_names)}"
        conn.register(view, table)
        # No `finally`: after a failed INSERT the transaction is aborted and DuckDB refuses
        # even an unregister; the view goes with the connection, which closes after a batch.
        conn.execute(f"INSERT INTO {name} BY NAME SELECT * FROM {view}")
        conn.unregister(view)


def _one_row_per_run(tables: dict[str, pa.Table]) -> dict[str, pa.Table]:
    """Within one batch a run appears once: a finished row wins over an `incomplete` one."""
    runs = tables["runs"]
    ids = runs.column("run_id").to_pylist()
    if len(set(ids)) == len(ids):
        return tables
    statuses = runs.column("status").to_pylist()
    chosen: dict[str, int] = {}
    incomplete = RunStatus.INCOMPLETE.value
    for index, (run_id, status) in enumerate(zip(ids, statuses, strict=True)):
        current = chosen.get(run_id)
        if current is None or (statuses[current] == incomplete and status != incomplete):
            chosen[run_id] = index
    keep = sorted(chosen.values())
    return {**tables, "runs": runs.take(pa.array(keep, pa.int64()))}


def _replace_unfinished(conn: duckdb.DuckDBPyConnection, runs: pa.Table) -> None:
    """Delete the stored runs this batch finishes that the store has only as `incomplete`,
    with their rows: the whole run takes their place. Such a start was stored from the
    journal of a process that died while the run went on elsewhere — a recording process
    whose parent then recorded the run itself (see `recording.channel`) — and, as within
    one batch (`_one_row_per_run`), a finished run wins over its start."""
    incomplete = RunStatus.INCOMPLETE.value
    statuses = runs.column("status").to_pylist()
    finished = [
        run_id
        for run_id, status in zip(runs.column("run_id").to_pylist(), statuses, strict=True)
        if status != incomplete
    ]
    if not finished:
        return
    found = conn.execute(
        "SELECT run_id FROM runs WHERE status = $incomplete AND list_contains($ids, run_id)",
        {"incomplete": incomplete, "ids": finished},
    ).fetchall()
    if not found:
        return
    ids = [row[0] for row in found]
    for name in (*CHILD_TABLES, "runs"):
        conn.execute(f"DELETE FROM {name} WHERE list_contains($ids, run_id)", {"ids": ids})


def _stored_already(conn: duckdb.DuckDBPyConnection, runs: pa.Table) -> pa.Array:
    """The ids among `runs` that the store already has."""
    ids = runs.column("run_id").to_pylist()
    found = conn.execute(
        "SELECT run_id FROM runs WHERE list_contains($ids, run_id)", {"ids": ids}
    ).fetchall()
    return pa.array([row[0] for row in found], pa.string())


def _without(tables: dict[str, pa.Table], stored: pa.Array) -> dict[str, pa.Table]:
    return {
        name: table.filter(pc.invert(pc.is_in(table.column("run_id"), value_set=stored)))
        for name, table in tables.items()
    }


def _insert_results(conn: duckdb.DuckDBPyConnection, results: pa.Table) -> None:
    """Eval results; one already stored (a journal ingested twice) is skipped."""
    view = f"_agentbench_results_{next(_view_names)}"
    conn.register(view, results)
    conn.execute(
        f"INSERT INTO results BY NAME SELECT * FROM {view} AS new WHERE NOT EXISTS ("
        "SELECT 1 FROM results AS old WHERE old.eval_id = new.eval_id AND old.suite = new.suite "
        "AND old.case_id = new.case_id AND old.trial = new.trial "
        "AND old.recorded_at = new.recorded_at)"
    )
    conn.unregister(view)
