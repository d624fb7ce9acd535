"""Storage faults told truthfully (issue 34, finding 6): a full disk or a read-only store ends
the command with exit 3 and one line naming the cause and the store, and no run is reported
finished unless it is kept — stored, or in a journal the next process stores once there is room.

The review's probe: on a full 3 MB filesystem 200 runs were reported finished, 178 were lost,
exit 0; `traces list` then said "this is a bug"; a read-only store was called damaged.

How the faults are made: RLIMIT_FSIZE in a child process (no privilege: with SIGXFSZ ignored, a
write past the limit fails with EFBIG); a size-limited tmpfs and a read-only bind mount in a
mount namespace of the test's own (`unshare`; skipped where the kernel or container refuses
it); DuckDB's own read-only attach; chmod for a user other than root (skipped as root, whom
modes do not stop).
"""

from __future__ import annotations

import errno
import json
import os
import re
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pytest

from agentbench import Agent, Runner, ScriptedModel
from agentbench.cli import main
from agentbench.errors import RecordingError
from agentbench.trace import TraceStore
from agentbench.trace.errors import StoreFullError, StoreReadOnlyError
from agentbench.trace.journal.spool import Journal
from agentbench.trace.storage import database as store_database
from agentbench.trace.storage.faults import storage_fault

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

ROOT = Path(__file__).resolve().parent.parent
SUITE = "golden/brakes"  # one run a trial, no sandbox or MCP server
ONE_CASE = "brakes/repeated-call-stopped"
TRIALS = 20
PLANNED = 8 * TRIALS  # golden/brakes has 8 cases
KEEPS = re.compile(r"eval (?P<eval>eval_\w+) keeps the (?P<kept>\d+) of (?P<planned>\d+) trial")


def file_size_limit(limit: int) -> Callable[[], None]:
    """For `preexec_fn`: writes past `limit` bytes of any file fail with EFBIG (the child's
    own recording process inherits it)."""

    def limit_files() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))

    return limit_files


def agentbench(*args: str, limit: int | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentbench", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=file_size_limit(limit) if limit is not None else None,
    )


def stored(db: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(db), read_only=True) as conn:
        return conn.execute(sql, list(params)).fetchall()


def kept_by(db: Path, eval_id: str) -> dict[str, int]:
    """What the store holds of an eval: its results, the finished runs they score, and
    results whose run is not stored finished (none: a kept trial keeps its run). A run of a
    trial the fault stopped before it was scored may be kept too; it is counted nowhere."""
    ((results, scored, orphans),) = stored(
        db,
        "SELECT (SELECT count(*) FROM results WHERE eval_id = $1), "
        "(SELECT count(DISTINCT r.run_id) FROM results r JOIN runs USING (run_id) "
        "  WHERE r.eval_id = $1 AND runs.status <> 'incomplete'), "
        "(SELECT count(*) FROM results r WHERE eval_id = $1 AND NOT EXISTS ("
        "  SELECT 1 FROM runs WHERE run_id = r.run_id AND status <> 'incomplete'))",
        eval_id,
    )
    return {"results": results, "scored_runs": scored, "orphan_results": orphans}


def one_error_line(stderr: str) -> str:
    """The command said one thing, an error, and no traceback or 'bug' went with it."""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    assert "Traceback" not in stderr and "bug" not in stderr and "damaged" not in stderr
    return lines[0]


def private_mounts() -> list[str]:
    """The prefix that runs a command in a mount namespace of its own, where it may mount:
    `unshare --mount` as root, else a user namespace mapping the caller to root."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare is not installed: no private mount namespace")
    with tempfile.TemporaryDirectory() as point:
        for prefix in (
            ["unshare", "--mount"],
            ["unshare", "--user", "--map-root-user", "--mount"],
        ):
            probe = [*prefix, "mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", point]
            if subprocess.run(probe, capture_output=True).returncode == 0:
                return prefix
    pytest.skip("this machine refuses a private mount namespace (unshare): no tmpfs to fill")


def in_private_mounts(script: str, **names: Path | str) -> None:
    """Run `script` (sh) in a mount namespace of its own, with `$PY` and `names` set."""
    assignments = {"PY": sys.executable, **{k: str(v) for k, v in names.items()}}
    header = "".join(f"{k}={shlex.quote(v)}\n" for k, v in assignments.items())
    done = subprocess.run(
        [*private_mounts(), "sh", "-euc", header + textwrap.dedent(script)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr


def outputs(folder: Path, name: str) -> tuple[int, str, str]:
    return (
        int((folder / f"{name}.rc").read_text()),
        (folder / f"{name}.out").read_text(),
        (folder / f"{name}.err").read_text(),
    )


# -- the library: a run is handed back finished only when it is kept --------------------------

LIBRARY_SCRIPT = """
import asyncio, json, sys

import agentbench.errors
from agentbench import Agent, Runner, ScriptedModel, TraceStore

UNKEPT = getattr(agentbench.errors, "RecordingError", ())

async def main(db, count, recording_process):
    store = TraceStore(db, recording_process=recording_process == "1")
    returned, raised, said = [], 0, []
    for index in range(count):
        try:
            result = await Runner.run(
                Agent(name="a"),
                f"question {index} " + "x" * 2000,
                model=ScriptedModel(["answer " + "y" * 4000]),
                store=store,
            )
        except UNKEPT as exc:
            raised += 1
            said.append(str(exc))
            continue
        returned.append(result.run_id)
    try:
        store.close()
    except UNKEPT as exc:
        said.append("close: " + str(exc))
    print(json.dumps({"returned": returned, "raised": raised, "said": said}))

asyncio.run(main(sys.argv[1], int(sys.argv[2]), sys.argv[3]))
"""


@pytest.mark.parametrize("recording_process", [False, True], ids=["in-process", "process"])
def test_runs_recorded_past_a_file_size_limit_are_handed_back_only_when_kept(
    tmp_path: Path, recording_process: bool
) -> None:
    db, script = tmp_path / "lib.duckdb", tmp_path / "record.py"
    script.write_text(LIBRARY_SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script), str(db), "60", "1" if recording_process else "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=file_size_limit(256 * 1024),  # ~15 runs of ~16 KB fit in a journal
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    # The next process, with room, stores what the journals hold.
    stored_ids = {row[0] for row in TraceStore(db).sql(
        "SELECT run_id FROM runs WHERE status <> 'incomplete'").rows}  # fmt: skip
    assert report["said"], "the runs the disk refused were never told"
    said = report["said"][-1]
    assert f"the store {db} has reached a file size limit (File too large" in said
    lost = int(re.search(r"(\d+) finished run\(s\) could not be kept", said)[1])
    if recording_process:
        # Handed to the recording process as they end; what it could not keep is raised by
        # close (or flush), counted.
        assert said.startswith("close: ") and len(report["returned"]) == 60
        assert len(stored_ids) == 60 - lost > 0
    else:
        assert report["raised"] == lost > 0
        assert set(report["returned"]) == stored_ids  # every run handed back is kept
        assert len(stored_ids) + lost == 60


def test_a_line_the_disk_cut_short_is_taken_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write the disk refuses half-way leaves no torn line for the next line to be glued
    to: that line, written once there is room, must read as it was written."""
    journal = Journal(tmp_path / "t.duckdb.spool")
    records = [{"start": {"run_id": f"run_{n}"}} for n in range(3)]
    journal.append(records[0])

    def half_then_full(fd: int, data: bytes) -> None:
        os.write(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with monkeypatch.context() as patch:
        patch.setattr("agentbench.trace.journal.spool._write_all", half_then_full)
        with pytest.raises(StoreFullError, match=r"t\.duckdb's disk is full"):
            journal.append(records[1])
    journal.append(records[2])  # room again
    assert journal.path is not None
    lines = journal.path.read_bytes().splitlines()
    journal.close(delete=True)
    assert [orjson.loads(line) for line in lines] == [records[0], records[2]]


async def test_the_runner_raises_an_unkept_run_once_every_hook_saw_it_end() -> None:
    seen: list[str] = []

    def store_hook(event: Any) -> None:
        if event.kind == "run_finished":
            raise StoreFullError(
                "the store x's disk is full", store=Path("x"), file=None, reason="r", advice="a"
            )

    def later_hook(event: Any) -> None:
        seen.append(event.kind)

    def broken_hook(event: Any) -> None:
        raise ValueError("an ordinary hook failing never stops anything")

    with pytest.raises(RecordingError, match="disk is full"):
        await Runner.run(
            Agent(name="a"),
            "hi",
            model=ScriptedModel(["ok"]),
            hooks=[store_hook, broken_hook, later_hook],
        )
    assert seen[-1] == "run_finished"


@pytest.mark.parametrize(
    ("error", "kind", "says"),
    [
        (OSError(errno.ENOSPC, "No space left on device"), StoreFullError, "'s disk is full"),
        (OSError(errno.EDQUOT, "Disk quota exceeded"), StoreFullError, "'s disk quota is used up"),
        (OSError(errno.EFBIG, "File too large"), StoreFullError, " has reached a file size limit"),
        (OSError(errno.EROFS, "Read-only file system"), StoreReadOnlyError, " is read-only"),
        (PermissionError(errno.EACCES, "Permission denied"), StoreReadOnlyError, " is read-only"),
        (
            duckdb.TransactionException(
                'TransactionContext Error: Failed to commit: Could not write file "/d/s.wal": '
                "No space left on device"
            ),
            StoreFullError,
            "'s disk is full (No space left on device, writing /d/s.wal)",
        ),
        (
            duckdb.InvalidInputException(
                'Cannot execute statement of type INSERT on database "store" which is attached '
                "in read-only mode!"
            ),
            StoreReadOnlyError,
            " is read-only (opened read-only)",
        ),
    ],
)  # fmt: skip
def test_what_the_disk_said_becomes_the_store_s_fault(
    error: BaseException, kind: type, says: str
) -> None:
    fault = storage_fault(Path("/d/s.duckdb"), error)
    assert type(fault) is kind and f"the store /d/s.duckdb{says}" in str(fault)


def test_other_errors_are_not_storage_faults() -> None:
    assert storage_fault(Path("/d/s.duckdb"), OSError(errno.EIO, "Input/output error")) is None
    assert storage_fault(Path("/d/s.duckdb"), duckdb.CatalogException("no table x")) is None


# -- `agentbench run` filling its disk, then the next command storing the journal -------------


def test_run_past_a_file_size_limit_exits_3_and_keeps_every_trial_it_counts(
    tmp_path: Path,
) -> None:
    db = tmp_path / "t.duckdb"
    first = agentbench("run", SUITE, "--filter", ONE_CASE, "--db", str(db), "--no-report")
    assert first.returncode == 0, first.stderr  # the store exists, and room for ~30 runs
    args = ("run", SUITE, "--trials", str(TRIALS), "--db", str(db), "--no-report")
    full = agentbench(*args, limit=512 * 1024)
    assert full.returncode == 3, full.stderr
    line = one_error_line(full.stderr)
    assert line.startswith(f"error: the store {db} has reached a file size limit (File too large")
    said = KEEPS.search(line)
    assert said and int(said["planned"]) == PLANNED and 0 < int(said["kept"]) < PLANNED, line
    assert f"--resume {said['eval']}" in line
    # Room again: the next command stores the journals; every trial counted kept is there.
    assert agentbench("traces", "list", "--db", str(db), "--limit", "1").returncode == 0
    kept = int(said["kept"])
    assert kept_by(db, said["eval"]) == {
        "results": kept, "scored_runs": kept, "orphan_results": 0
    }  # fmt: skip
    resumed = agentbench(*args, "--resume", said["eval"])
    assert resumed.returncode == 0, resumed.stderr
    assert kept_by(db, said["eval"])["results"] == PLANNED


def test_run_on_a_full_disk_exits_3_and_the_next_command_stores_its_journal(
    tmp_path: Path,
) -> None:
    """The review's probe, on a real filesystem that fills up: a tmpfs of 8 MB, 4.5 MB of it
    taken, so the store fills it part way through the eval."""
    disk, out, copy = tmp_path / "disk", tmp_path / "out", tmp_path / "copy"
    for folder in (disk, out, copy):
        folder.mkdir()
    db = disk / "t.duckdb"
    in_private_mounts(
        """
        mount -t tmpfs -o size=8m tmpfs "$DISK"
        head -c 4500000 /dev/zero > "$DISK/filler"
        step() { name=$1; shift; set +e; "$@" >"$OUT/$name.out" 2>"$OUT/$name.err"
                 echo $? >"$OUT/$name.rc"; set -e; }
        step run "$PY" -m agentbench run "$SUITE" --trials "$TRIALS" --db "$DB" --no-report
        step full "$PY" -m agentbench traces list --db "$DB" --limit 1
        rm "$DISK/filler"
        step freed "$PY" -m agentbench traces list --db "$DB" --limit 1
        for file in "$DB" "$DB.wal"; do [ ! -f "$file" ] || cp "$file" "$COPY/"; done
        """,
        DISK=disk, OUT=out, COPY=copy, DB=db, SUITE=SUITE, TRIALS=str(TRIALS),
    )  # fmt: skip
    code, _, err = outputs(out, "run")
    assert code == 3, err
    line = one_error_line(err)
    assert line.startswith(f"error: the store {db}'s disk is full (No space left on device")
    said = KEEPS.search(line)
    assert said and 0 < int(said["kept"]) < PLANNED, line
    code, _, err = outputs(out, "full")  # still full: said, not "a bug"
    assert code == 3 and re.search(r"its journals .* hold \d+ run\(s\)", one_error_line(err))
    assert "disk is full" in err
    code, listed, err = outputs(out, "freed")
    assert code == 0 and err == "" and "run(s), newest first" in listed
    kept = int(said["kept"])
    assert kept_by(copy / "t.duckdb", said["eval"]) == {
        "results": kept, "scored_runs": kept, "orphan_results": 0
    }  # fmt: skip


# -- read-only stores: readable where a command only reads ------------------------------------


@pytest.fixture
def recorded(tmp_path: Path) -> Iterator[tuple[Path, str, str]]:
    """A store holding one eval of one case: (store, eval id, run id)."""
    db = tmp_path / "ro" / "t.duckdb"
    made = agentbench("run", SUITE, "--filter", ONE_CASE, "--db", str(db), "--no-report")
    assert made.returncode == 0, made.stderr
    ((eval_id, run_id),) = stored(db, "SELECT eval_id, run_id FROM results")
    yield db, eval_id, run_id


def test_a_store_on_a_read_only_filesystem_is_read_and_never_called_damaged(
    tmp_path: Path, recorded: tuple[Path, str, str]
) -> None:
    db, eval_id, run_id = recorded
    out = tmp_path / "out"
    out.mkdir()
    exports, other = tmp_path / "exports", tmp_path / "other.duckdb"
    in_private_mounts(
        """
        mount --bind "$RO" "$RO"
        mount -o remount,bind,ro "$RO"
        step() { name=$1; shift; set +e; "$@" >"$OUT/$name.out" 2>"$OUT/$name.err"
                 echo $? >"$OUT/$name.rc"; set -e; }
        ab() { name=$1; shift; step "$name" "$PY" -m agentbench "$@"; }
        ab list traces list --db "$DB"
        ab show traces show "$RUN" --db "$DB"
        ab export traces export "$EXPORTS/a" --db "$DB"
        ab report report "$EVAL" --report-dir "$EXPORTS/reports" --db "$DB"
        ab history history --db "$DB"
        ab gate gate "$EVAL" --no-report --db "$DB"
        ab merge_from merge "$DB" --into "$OTHER"
        ab run run "$SUITE" --filter "$CASE" --db "$DB" --no-report
        ab import traces import "$EXPORTS/a" --db "$DB"
        ab merge_into merge "$OTHER" --into "$DB"
        """,
        RO=db.parent, DB=db, OUT=out, RUN=run_id, EVAL=eval_id, EXPORTS=exports,
        OTHER=other, SUITE=SUITE, CASE=ONE_CASE,
    )  # fmt: skip
    for name in ("list", "show", "export", "report", "history", "merge_from"):
        code, _, err = outputs(out, name)
        assert (code, err) == (0, ""), f"{name}: {err}"  # read as it is, nothing said
    code, listed, _ = outputs(out, "list")
    assert run_id in listed
    code, summary, err = outputs(out, "gate")  # judged; only keeping the verdict is left out
    assert code == 0 and "gate: passed" in summary, err
    assert err.startswith(f"note: the verdict is not kept with the eval: the store {db} is read")
    for name in ("run", "import", "merge_into"):  # these write into it
        code, _, err = outputs(out, name)
        assert code == 3, f"{name}: {err}"
        line = one_error_line(err)
        assert line.startswith(f"error: the store {db} is read-only (Read-only file system"), line


def test_a_store_duckdb_opens_read_only_refuses_writes_as_read_only(
    recorded: tuple[Path, str, str], monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """DuckDB itself refusing every write (the store attached READ_ONLY), no privilege
    needed: reading works; recording and `run` say the store is read-only, exit 3."""
    db, eval_id, run_id = recorded

    def read_only_writer(path: Path) -> duckdb.DuckDBPyConnection:
        conn = duckdb.connect()
        conn.execute(f"ATTACH '{path}' AS store (READ_ONLY)")
        conn.execute("USE store")
        return conn

    monkeypatch.setattr(store_database, "_open_writer", read_only_writer)
    store = TraceStore(db)
    assert [run.run_id for run in store.runs()] == [run_id]
    Runner.run_sync(Agent(name="a"), "hi", model=ScriptedModel(["ok"]), store=store)
    with pytest.raises(StoreReadOnlyError, match=r"is read-only \(opened read-only.*journal"):
        store.flush()  # journaled, and DuckDB refuses to store it: said so
    store.close()
    capsys.readouterr()
    assert main(["run", SUITE, "--filter", ONE_CASE, "--db", str(db), "--no-report"]) == 3
    line = one_error_line(capsys.readouterr().err)
    assert line.startswith(f"error: the store {db} is read-only (opened read-only")
    assert main(["gate", eval_id, "--db", str(db), "--no-report"]) == 0
    assert "the verdict is not kept with the eval" in capsys.readouterr().err


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes whatever the modes say")
async def test_a_store_this_user_may_not_write_is_read_and_recording_says_why(
    recorded: tuple[Path, str, str],
) -> None:
    db, _, run_id = recorded
    folders = [db.parent, db.parent / f"{db.name}.spool"]
    for path in (db, *folders):
        path.chmod(0o555 if path.is_dir() else 0o444)
    try:
        store = TraceStore(db)
        assert [run.run_id for run in store.runs()] == [run_id]
        with pytest.raises(StoreReadOnlyError, match=r"is read-only \(Permission denied"):
            await Runner.run(Agent(name="a"), "hi", model=ScriptedModel(["ok"]), store=store)
        store.close()
    finally:
        for path in (db, *folders):
            path.chmod(0o755 if path.is_dir() else 0o644)


# -- files other than the store: one line naming the file, never "a bug" ----------------------


@pytest.mark.parametrize(
    ("args", "file", "limit"),
    [
        (("report", "{eval}", "--report-dir", "{out}"), "index.html", 16 * 1024),
        (("traces", "export", "{out}/lake"), ".parquet", 2 * 1024),  # DuckDB writes these
    ],
    ids=["report", "export"],
)
def test_an_output_past_a_file_size_limit_is_one_line_naming_it(
    tmp_path: Path, recorded: tuple[Path, str, str], args: tuple[str, ...], file: str, limit: int
) -> None:
    db, eval_id, _ = recorded
    filled = [a.format(eval=eval_id, out=tmp_path / "out") for a in args]
    done = agentbench(*filled, "--db", str(db), limit=limit)
    assert done.returncode == 3
    line = one_error_line(done.stderr)
    named = rf"{re.escape(str(tmp_path / 'out'))}/\S*{re.escape(file)}: File too large"
    assert re.search(named, line), line
    assert line.endswith("(a file size limit was reached)")
