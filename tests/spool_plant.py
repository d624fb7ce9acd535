"""Planting what dead processes leave in a store's spool: good journals and poisoned ones.

A good journal is written by the real `Journal` and then closed without deleting it, which
is what a killed process leaves (its lock goes with it). Poisoned journals are whatever can
end up under a journal's name: a folder, a fifo, a link, bytes that are not records, records
with a bad field. Each poison says what it is and what must be true of it afterwards.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from agentbench.trace.journal.spool import Journal, spool_dir
from agentbench.trace.schema import ARROW_SCHEMAS, RunRows


def run_row(run_id: str, *, status: str = "completed") -> dict[str, Any]:
    row: dict[str, Any] = {name: None for name in ARROW_SCHEMAS["runs"].names}
    now = datetime.now(UTC)
    row.update(run_id=run_id, agent="planted", status=status, started_at=now)
    if status != "incomplete":
        row.update(stop_reason="completed", finished_at=now)
    return row


def finished(run_id: str) -> RunRows:
    """A finished run with one event row, so more than `runs` is stored."""
    event = {"run_id": run_id, "seq": 1, "step": 0, "ts": datetime.now(UTC)}
    event.update(kind="note", payload='{"planted": true}')
    return RunRows(runs=[run_row(run_id)], events=[event])


def plant_dead_journal(db: Path, prefix: str, runs: int, *, open_runs: int = 0) -> list[str]:
    """A journal a killed process left: `runs` finished runs and `open_runs` started ones.
    Returns every run id in it (all must be stored)."""
    journal = Journal(spool_dir(db))
    ids = []
    for index in range(open_runs):
        run_id = f"run_{prefix}_open{index}"
        journal.append({"start": run_row(run_id, status="incomplete")})
        ids.append(run_id)
    for index in range(runs):
        run_id = f"run_{prefix}_{index}"
        journal.append({"start": run_row(run_id, status="incomplete")})
        journal.append({"run": finished(run_id).as_dict()})
        ids.append(run_id)
    journal.close(delete=False)
    return ids


def good_line(run_id: str) -> bytes:
    return orjson.dumps({"run": finished(run_id).as_dict()}) + b"\n"


def start_line(**fields: Any) -> bytes:
    row = run_row("run_x", status="incomplete")
    row.update(fields)
    return orjson.dumps({"start": row}) + b"\n"


@dataclass(frozen=True)
class Poison:
    """A bad file under a journal's name. `stored`: run ids on its good lines (must be
    stored); `line`: the line its .why must name, if any."""

    name: str
    make: Callable[[Path], None]
    stored: tuple[str, ...] = ()
    line: int | None = None


def _write(name: str, data: bytes) -> Callable[[Path], None]:
    def make(spool: Path) -> None:
        (spool / f"{name}.journal").write_bytes(data)

    return make


def _folder(spool: Path) -> None:
    (spool / "folder.journal").mkdir()
    (spool / "folder.journal" / "inside").write_text("x")


def _fifo(spool: Path) -> None:
    os.mkfifo(spool / "fifo.journal")


def _link(spool: Path) -> None:
    (spool / "link.journal").symlink_to(spool.parent / "elsewhere.txt")
    (spool.parent / "elsewhere.txt").write_text(good_line("run_via_link").decode())


POISONS: tuple[Poison, ...] = (
    Poison("folder", _folder),
    Poison("fifo", _fifo),
    Poison("link", _link),
    Poison(
        "start-without-run-id",
        _write("start-without-run-id", b'{"start": {"agent": "a"}}\n'),
        line=1,
    ),
    Poison(
        "bad-timestamp",
        _write("bad-timestamp", start_line(run_id="run_bad_ts", started_at="not a time")),
        line=1,
    ),
    Poison(
        "garbage-between-good-lines",
        _write(
            "garbage-between-good-lines",
            good_line("run_mixed_1") + b'{"run": {"runs": [{"run_id": tru\n' + b"\x00\xff\xfe\n"
            + good_line("run_mixed_2"),
        ),
        stored=("run_mixed_1", "run_mixed_2"),
        line=2,
    ),
    Poison("binary", _write("binary", b"\x00\x01\x02 not a journal \xff\xfe"), line=1),
    Poison(
        "wrong-type",
        _write(
            "wrong-type", good_line("run_typed_ok") + start_line(run_id="run_t", llm_calls="many")
        ),
        stored=("run_typed_ok",),
        line=2,
    ),
    Poison(
        "required-column-missing",
        _write("required-column-missing", start_line(run_id="run_no_agent", agent=None)),
        line=1,
    ),
    Poison("unknown-kind", _write("unknown-kind", b'{"stop": {"run_id": "r"}}\n'), line=1),
    Poison("not-an-object", _write("not-an-object", b'[1, 2, 3]\n'), line=1),
    Poison("unknown-table", _write("unknown-table", b'{"run": {"secrets": [{"a": 1}]}}\n'), line=1),
    Poison("deep-nesting", _write("deep-nesting", b"[" * 50_000 + b"]" * 50_000 + b"\n"), line=1),
)
