"""`agentbench traces doctor`: what state a store and its spool are in, changing nothing.

It looks at the store file (missing, empty, half-created, cut short, a table gone, foreign,
older schema, or healthy — and then reads every table through, so damage deep in the file
shows), at the journals in the spool (of running processes, of processes that are gone and
will be stored on the next open, unreadable ones that will be quarantined), and at the
quarantine (each file with its reason). For journals it says what they can rebuild: the runs
they hold that the store does not. Each finding is a `Finding`; any with `problem` set makes
the command exit 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from agentbench.trace.errors import StoreBusyError, TraceStoreError, damaged
from agentbench.trace.journal.parsing import ParsedJournal, parse_journal
from agentbench.trace.journal.quarantine import quarantined
from agentbench.trace.journal.spool import JournalState, spool_dir, survey
from agentbench.trace.storage.database import WaitNotice, opened
from agentbench.trace.storage.migrations import LATEST, check, tables_of


@dataclass(frozen=True)
class Finding:
    """One thing doctor saw: where, what, and whether it is a problem."""

    where: str
    text: str
    problem: bool = False


@dataclass
class Diagnosis:
    store: Path
    findings: list[Finding] = field(default_factory=list)

    @property
    def problems(self) -> list[Finding]:
        return [f for f in self.findings if f.problem]

    def add(self, where: str, text: str, *, problem: bool = False) -> None:
        self.findings.append(Finding(where, text, problem))


def diagnose(path: Path, *, wait_s: float, on_wait: WaitNotice | None = None) -> Diagnosis:
    """Look at the store at `path` and its spool; StoreBusyError if it stays locked."""
    diagnosis = Diagnosis(path)
    stored = _check_store(diagnosis, path, wait_s, on_wait)
    spool = spool_dir(path)
    _check_journals(diagnosis, spool, stored)
    _check_quarantine(diagnosis, spool, stored)
    return diagnosis


def _check_store(
    diagnosis: Diagnosis, path: Path, wait_s: float, on_wait: WaitNotice | None
) -> set[str] | None:
    """Findings about the file; the run ids it holds, or None if it cannot be read."""
    where = str(path)
    if not path.exists():
        diagnosis.add(where, "no store file yet: the next process that stores runs makes it")
        return set()
    if path.stat().st_size == 0:
        diagnosis.add(
            where,
            "an empty file: its creation was cut short before anything was written; the next "
            "`agentbench` command that opens it makes it a new store",
            problem=True,
        )
        return set()
    try:
        with opened(path, write=False, wait_s=wait_s, on_wait=on_wait) as conn:
            version = check(conn, path)
            if version == 0:
                diagnosis.add(
                    where,
                    "a DuckDB file with no schema yet (its creation was cut short); the next "
                    "`agentbench` command that opens it creates the tables",
                    problem=True,
                )
                return set()
            _read_through(conn, path, sorted(tables_of(version)))
            run_ids = {row[0] for row in conn.execute("SELECT run_id FROM runs").fetchall()}
            evals = conn.execute("SELECT count(*) FROM evals").fetchone() if version >= 2 else None
    except StoreBusyError:
        raise
    except TraceStoreError as exc:
        diagnosis.add(where, str(exc), problem=True)
        return None
    older = f" (older; migrated on the next write to {LATEST})" if version < LATEST else ""
    diagnosis.add(
        where,
        f"schema {version}{older}; {len(run_ids)} run(s)"
        + (f", {evals[0]} eval(s)" if evals else "")
        + "; every table reads through",
    )
    return run_ids


def _read_through(conn: duckdb.DuckDBPyConnection, path: Path, tables: list[str]) -> None:
    """Read every column of every table, so a damaged block anywhere is found now."""
    for table in tables:
        try:
            conn.execute(f"SELECT sum(hash(COLUMNS(*))) FROM {table}").fetchall()
        except duckdb.Error as exc:
            message = " ".join(str(exc).split())[:300]
            raise damaged(path, f"table {table} cannot be read through ({message})") from None


def _check_journals(diagnosis: Diagnosis, spool: Path, stored: set[str] | None) -> None:
    states = survey(spool)
    alive = [s for s in states if s.alive and s.parsed is not None]
    if alive:
        diagnosis.add(
            str(spool),
            f"{len(alive)} journal(s) of running processes; they store their own runs",
        )
    for state in states:
        if state.error is not None:
            verdict = (
                "its process may still be running (another user's): left alone"
                if state.alive
                else "quarantined (not deleted) the next time the store is opened"
            )
            diagnosis.add(
                str(state.path), f"cannot be read: {state.error}; {verdict}", problem=True
            )
        elif not state.alive and state.parsed is not None:
            _dead_journal(diagnosis, state, stored)


def _dead_journal(diagnosis: Diagnosis, state: JournalState, stored: set[str] | None) -> None:
    parsed = state.parsed
    assert parsed is not None
    when = "the next time the store is opened" if stored is not None else "once it can be opened"
    text = f"left by a process that is gone: {_rebuild(parsed, stored)}; stored {when}"
    if parsed.problems:
        text += f"; {len(parsed.problems)} bad line(s) go to the quarantine then: " + "; ".join(
            parsed.problems[:3]
        )
    diagnosis.add(str(state.path), text, problem=bool(parsed.problems))


def _check_quarantine(diagnosis: Diagnosis, spool: Path, stored: set[str] | None) -> None:
    for entry in quarantined(spool):
        text = f"quarantined: {entry.why}"
        try:
            parsed = parse_journal(entry.path.read_bytes()) if entry.path.is_file() else None
        except OSError:
            parsed = None
        if parsed is not None and parsed.rows.runs:
            text += (
                f"; {_rebuild(parsed, stored)} — fix the file and move it back into "
                f"{spool}/ to store them"
            )
        diagnosis.add(str(entry.path), text, problem=True)


def _rebuild(parsed: ParsedJournal, stored: set[str] | None) -> str:
    """What a journal can rebuild: its runs that the store does not hold."""
    ids = parsed.run_ids()
    if stored is None:
        return f"holds {len(ids)} run(s), which a new store would get"
    missing = ids - stored
    return f"holds {len(ids)} run(s), {len(missing)} of them not in the store"
