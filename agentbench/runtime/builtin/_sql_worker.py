"""The program a `sql_query` tool runs a DuckDB file in: one process that can be killed.

DuckDB's interrupt and `memory_limit` do not reach everything a query can do: a scalar function
over one large value (`damerau_levenshtein` of two 32k-character strings asks for gigabytes
outside the buffer manager) runs to completion or until the process is killed by the kernel —
the agent's own process, with every run in it. So a database the tool opens itself is queried
here, under an address-space limit, and the caller kills this process when a query overstays.

Standard library and duckdb only, started with `python -I`: it must start fast and must not
import the project. One JSON request per line on stdin, one JSON reply per line on stdout.
The first reply says whether the database opened.
"""

from __future__ import annotations

import datetime
import decimal
import json
import os
import resource
import sys
import threading
import time
import uuid
from typing import Any

FETCH_BATCH = 100
_PARENT_POLL_S = 0.2


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


def run_one(connection: Any, request: dict[str, Any]) -> dict[str, Any]:
    cursor = connection.cursor()
    fired = threading.Event()

    def stop() -> None:
        fired.set()
        cursor.interrupt()

    timer = threading.Timer(float(request["timeout_s"]), stop)
    timer.daemon = True
    timer.start()
    try:
        cursor.execute(request["sql"])
        columns = [str(d[0]) for d in cursor.description or ()]
        # DuckDB streams the result, so the query runs while we fetch: still under the timer.
        rows, truncated = (
            fetch_limited(cursor, int(request["max_rows"]), int(request["max_bytes"]))
            if columns
            else ([], None)
        )
    except FirstRowTooLargeError:
        return {"first_row_too_large": True}
    except Exception as exc:
        if fired.is_set():
            return {"timed_out": True}
        return error_reply(exc)
    finally:
        timer.cancel()
        cursor.close()
    return {"columns": columns, "rows": rows, "truncated": truncated}


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
        # Say the query arrived before running it: a worker that dies before this line was
        # already gone (the caller may retry elsewhere); one that dies after it died running it.
        reply({"received": True})
        try:
            reply(run_one(connection, json.loads(line)))
        except MemoryError as exc:
            reply(error_reply(exc))


if __name__ == "__main__":
    main()
