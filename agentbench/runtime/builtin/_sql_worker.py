"""The program a `sql_query` tool runs a DuckDB file in: one process that can be killed.

DuckDB's interrupt and `memory_limit` do not reach everything a query can do: a scalar function
over one large value (`damerau_levenshtein` of two 32k-character strings asks for gigabytes
outside the buffer manager) runs to completion or until the process is killed by the kernel —
the agent's own process, with every run in it. So a database the tool opens itself is queried
here, under an address-space limit, and the caller kills this process when a query overstays.

A query's time limit is CPU time: what this process (every engine thread, and the fetching of
the rows) used on the query, so a loaded machine, which slows the query without making it do
more, cannot make it time out. A watcher thread interrupts the query once it has used its
limit, and the verdict is taken from the CPU time used when the query ends, however late the
watcher looked. RLIMIT_CPU, set a grace beyond the limit, kills the process (SIGXCPU) when
the interrupt is not heard. A query with no CPU progress has a wall-clock limit of its own,
much longer (`hang_after_s`), so a hang is still stopped.

Standard library and duckdb only, started with `python -I`: it must start fast and must not
import the project. One JSON request per line on stdin, one JSON reply per line on stdout.
The first reply says whether the database opened.
"""

from __future__ import annotations

import datetime
import decimal
import json
import math
import os
import resource
import sys
import threading
import time
import uuid
from typing import Any

FETCH_BATCH = 100
CPU_GRACE_S = 1.0  # CPU time past the limit an interrupted query may take before SIGXCPU
_PARENT_POLL_S = 0.2
_WATCH_POLL_S = 0.01  # how often the watcher reads the CPU clock while a query runs


class FirstRowTooLargeError(Exception):
    """Even the first row is over the result size limit."""


def json_value(value: Any) -> Any:
    """Make a database value JSON-friendly without losing precision."""
    if value is None or isinstance(value, bool | float | str):
        return value
    if isinstance(value, int):
        return value if -(2**63) <= value < 2**63 else str(value)
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal | uuid.UUID | datetime.timedelta):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return "\\x" + bytes(value).hex()
    if isinstance(value, list | tuple):
        return [json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    return str(value)


def fetch_limited(cursor: Any, max_rows: int, max_bytes: int) -> tuple[list[list[Any]], str | None]:
    """Rows up to both limits, and which limit cut them short (None: all rows fitted).

    One row beyond the row limit is fetched to tell "exactly the limit" from "more".
    """
    rows: list[list[Any]] = []
    size = 0
    while True:
        batch = cursor.fetchmany(min(FETCH_BATCH, max_rows + 1 - len(rows)))
        if not batch:
            return rows, None
        for raw in batch:
            if len(rows) == max_rows:
                return rows, "rows"
            row = [json_value(v) for v in raw]
            size += len(json.dumps(row, ensure_ascii=False, default=str).encode())
            if size > max_bytes:
                if not rows:
                    raise FirstRowTooLargeError(max_bytes)
                return rows, "bytes"
            rows.append(row)


def error_reply(exc: BaseException, kind: str = "error") -> dict[str, Any]:
    return {
        kind: {
            "type": type(exc).__name__,
            "names": [cls.__name__ for cls in type(exc).__mro__],
            "message": str(exc).strip(),
        }
    }


class QueryWatch:
    """Interrupts a query that used up its CPU time (`cpu_limit_s`, None: no limit) or that
    has run `hang_after_s` of wall-clock time, and says which (`fired`)."""

    def __init__(self, interrupt: Any, cpu_limit_s: float | None, hang_after_s: float) -> None:
        self._interrupt = interrupt
        self.cpu_limit_s = cpu_limit_s
        self._hang_after_s = hang_after_s
        self._cpu_at_start = time.process_time()
        self._cpu_at_end: float | None = None  # once the query ended
        self._started = time.monotonic()
        self._done = threading.Event()
        self.fired: str | None = None  # "cpu" or "hang"
        self._thread = threading.Thread(target=self._watch, name="query-watch", daemon=True)

    def __enter__(self) -> QueryWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._cpu_at_end = time.process_time()
        self._done.set()
        self._thread.join()

    def cpu_used(self) -> float:
        """CPU time this process used since the query began, until it ended."""
        end = time.process_time() if self._cpu_at_end is None else self._cpu_at_end
        return end - self._cpu_at_start

    def cpu_over(self) -> bool:
        return self.cpu_limit_s is not None and self.cpu_used() > self.cpu_limit_s

    def _watch(self) -> None:
        while not self._done.wait(_WATCH_POLL_S):
            if self.cpu_over():
                self.fired = "cpu"
            elif time.monotonic() - self._started > self._hang_after_s:
                self.fired = "hang"
            else:
                continue
            self._interrupt()
            return


def cap_cpu(cpu_limit_s: float | None) -> None:
    """Let the kernel kill this process if the next query goes on a grace past its CPU limit
    (SIGXCPU, which the caller reads as the query's timeout)."""
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = resource.RLIM_INFINITY
    if cpu_limit_s is not None:
        soft = math.ceil(time.process_time() + cpu_limit_s + CPU_GRACE_S)
        if hard != resource.RLIM_INFINITY:
            soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def run_one(connection: Any, request: dict[str, Any]) -> dict[str, Any]:
    cursor = connection.cursor()
    cpu_limit = request.get("cpu_limit_s")
    watch = QueryWatch(
        cursor.interrupt,
        None if cpu_limit is None else float(cpu_limit),
        float(request["hang_after_s"]),
    )
    reply: dict[str, Any]
    try:
        with watch:
            cursor.execute(request["sql"])
            columns = [str(d[0]) for d in cursor.description or ()]
            # DuckDB streams the result, so the query runs while we fetch: still watched.
            rows, truncated = (
                fetch_limited(cursor, int(request["max_rows"]), int(request["max_bytes"]))
                if columns
                else ([], None)
            )
        reply = {"columns": columns, "rows": rows, "truncated": truncated}
    except FirstRowTooLargeError:
        reply = {"first_row_too_large": True}
    except Exception as exc:
        reply = error_reply(exc)
    finally:
        cursor.close()
    # Judged on the CPU time the query used, not on when the watcher happened to look; the
    # wall clock only counts when it stopped a query that was still going.
    if watch.cpu_over() or watch.fired == "hang":
        over = "cpu" if watch.cpu_over() else "hang"
        return {"timed_out": over, "cpu_s": round(watch.cpu_used(), 3)}
    return reply


def _exit_with_parent(parent: int) -> None:
    """Go when the caller goes, even in the middle of a query (stdin EOF needs us idle)."""
    while True:
        time.sleep(_PARENT_POLL_S)
        if os.getppid() != parent:
            os._exit(0)


def main() -> None:
    settings = json.loads(sys.argv[1])
    parent = int(settings["parent"])
    if os.getppid() != parent:
        return
    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True).start()
    memory = int(settings["address_space_bytes"])
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    out = sys.stdout

    def reply(message: dict[str, Any]) -> None:
        out.write(json.dumps(message, ensure_ascii=False, default=str) + "\n")
        out.flush()

    try:
        import duckdb

        connection = duckdb.connect(settings["path"], read_only=True, config=settings["config"])
    except Exception as exc:
        reply(error_reply(exc, "open_error"))
        return
    reply({"ready": True, "pid": os.getpid()})
    for line in sys.stdin:
        request = json.loads(line)
        cap_cpu(request.get("cpu_limit_s"))
        # Say the query arrived before running it: a worker that dies before this line was
        # already gone (the caller may retry elsewhere); one that dies after it died running it.
        reply({"received": True})
        try:
            reply(run_one(connection, request))
        except MemoryError as exc:
            reply(error_reply(exc))


if __name__ == "__main__":
    main()
