"""`agentbench serve` on a store that cannot keep runs (issue 34's review of serve).

The probe: `agentbench serve mod:agents --db /ro/t.duckdb` on a read-only mount started,
`/healthz` said ok, and every request ran the agent and its tools and only then answered
`500 StoreReadOnlyError`; the openai SDK retried the 500, so the tools ran three times.

Now serve checks at start-up that its store takes writes (exit 3, one line naming the cause);
a store that turns read-only or full while serving is answered 503 with `Retry-After` before
any agent runs, wherever the server can tell; a run whose record was refused is answered as
not kept (503), never as an answer. The faults are made as `tests/test_storage_faults.py`
makes them: DuckDB's own read-only attach and refused journal writes in-process, and a
read-only bind mount in a mount namespace of the test's own (`unshare`).
"""

from __future__ import annotations

import errno
import os
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import duckdb
import httpx2 as httpx
import openai
import pytest
from serve_support import Desk, desk_agent, served, service_for
from test_storage_faults import in_private_mounts, one_error_line

from agentbench import Agent, Runner, ScriptedModel
from agentbench.cli import main
from agentbench.serve import Caller, DrainingServer
from agentbench.trace import TraceStore
from agentbench.trace.journal import spool
from agentbench.trace.storage import database as store_database

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

QUESTION = [{"role": "user", "content": "Where is my order A17?"}]
DESK = "tests/fixtures/served_agents.py:desk"


def _recorded(db: Path) -> None:
    """A store holding one run."""
    store = TraceStore(db)
    Runner.run_sync(Agent(name="a"), "hi", model=ScriptedModel(["ok"]), store=store)
    store.close()


def _read_only_writer(path: Path) -> duckdb.DuckDBPyConnection:
    conn = duckdb.connect()
    conn.execute(f"ATTACH '{path}' AS store (READ_ONLY)")
    conn.execute("USE store")
    return conn


def test_serve_on_a_store_duckdb_opens_read_only_exits_3_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No privilege needed: every write DuckDB refuses (the store attached READ_ONLY)."""
    db = tmp_path / "t.duckdb"
    _recorded(db)
    monkeypatch.setattr(store_database, "_open_writer", _read_only_writer)
    started: list[bool] = []
    monkeypatch.setattr(DrainingServer, "run", lambda self, sockets=None: started.append(True))
    capsys.readouterr()
    code = main(["serve", DESK, "--db", str(db), "--port", "0"])
    line = one_error_line(capsys.readouterr().err)
    assert (code, started) == (3, [])
    assert line.startswith(f"error: the store {db} is read-only (opened read-only")


@pytest.mark.server
def test_serve_on_a_read_only_filesystem_exits_3_before_it_listens(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    db = ro / "t.duckdb"
    _recorded(db)
    out = tmp_path / "out"
    in_private_mounts(
        """
        mount --bind "$RO" "$RO"
        mount -o remount,bind,ro "$RO"
        set +e
        timeout 60 "$PY" -m agentbench serve "$DESK" --db "$DB" --port 0 >"$OUT.out" 2>"$OUT.err"
        echo $? >"$OUT.rc"
        """,
        RO=ro, DB=db, OUT=out, DESK=DESK,
    )  # fmt: skip
    assert (tmp_path / "out.rc").read_text().strip() == "3"  # 124: it served (timed out)
    line = one_error_line((tmp_path / "out.err").read_text())
    assert line.startswith(f"error: the store {db} is read-only (Read-only file system")


def _wait_for(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.01)


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_disk_that_fills_while_serving_is_503_before_any_run_and_lost_runs_are_not_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The journal's writes refused (ENOSPC) after start-up: the run under way is answered as
    not kept (503, never 200 or 500); later requests are 503 with Retry-After without running
    the agent, and /healthz says why; once there is room again, runs are served."""
    desk = Desk()
    store = TraceStore(tmp_path / "t.duckdb")
    store.check_writable()
    service = service_for(desk_agent(desk), store=store)
    clock = service.store_health.clock = _Clock()
    write_all = spool._write_all

    def full(fd: int, data: bytes) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with served(service) as url, httpx.Client(base_url=url, timeout=30) as http:
        kept = http.post("/v1/chat/completions", json={"model": "desk", "messages": QUESTION})
        monkeypatch.setattr(spool, "_write_all", full)
        lost = http.post("/v1/chat/completions", json={"model": "desk", "messages": QUESTION})
        calls_when_lost = desk.calls
        refused = http.post("/v1/chat/completions", json={"model": "desk", "messages": QUESTION})
        background = http.post("/v1/runs", json={"input": "Where is A17?"})
        health = http.get("/healthz")
        clock.now += 60  # past RECHECK_S: still full, still refused
        still = http.post("/v1/runs", json={"input": "Where is A17?"})
        calls_when_refused = desk.calls
        monkeypatch.setattr(spool, "_write_all", write_all)  # room again
        clock.now += 60
        with openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0) as again:
            answer = again.chat.completions.create(model="desk", messages=QUESTION)
        healthy = http.get("/healthz")
    store.close()
    assert kept.status_code == 200
    assert lost.status_code == 503 and lost.headers["retry-after"] == "5"
    error = lost.json()["error"]
    assert error["code"] == "store_full"
    assert "could not be kept, so its answer is not given" in error["message"]
    assert "No space left on device" in error["message"]
    assert str(tmp_path) not in error["message"]  # the server's paths stay in its log
    for answer_ in (refused, background, still):
        assert answer_.status_code == 503 and answer_.headers["retry-after"] == "5"
        assert answer_.json()["error"]["code"] == "store_full"
        assert "no run is started" in answer_.json()["error"]["message"]
    assert calls_when_refused == calls_when_lost  # refused before the agent ran
    assert health.status_code == 503 and health.json()["status"] == "store_full"
    assert answer.choices[0].message.content == "Order A17 is delivered."
    assert healthy.json()["status"] == "ok"
    stored = TraceStore(tmp_path / "t.duckdb").sql("SELECT count(*) FROM runs").rows
    assert stored == [(2,)]  # the first run and the last: the lost one is said lost, not kept


@pytest.mark.server
def test_a_filesystem_turned_read_only_while_serving_refuses_runs_before_they_start(
    tmp_path: Path,
) -> None:
    """A real remount after start-up: seen before the next run (no tool runs), answered 503;
    /healthz says so; remounted writable, the server serves again."""
    ro = tmp_path / "ro"
    ro.mkdir()
    script = tmp_path / "serve_while_remounted.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import subprocess, sys
            sys.path.insert(0, {str(Path(__file__).parent)!r})
            import httpx2 as httpx
            from serve_support import Desk, desk_agent, served, service_for
            from agentbench.trace import TraceStore

            desk = Desk()
            store = TraceStore({str(ro / "t.duckdb")!r})
            store.check_writable()
            service = service_for(desk_agent(desk), store=store)
            question = {{"model": "desk", "messages": {QUESTION!r}}}
            def remount(how):
                subprocess.run(["mount", "-o", f"remount,bind,{{how}}", {str(ro)!r}], check=True)
            with served(service) as url, httpx.Client(base_url=url, timeout=30) as http:
                # Before any run: a bind mount with a file open for writing (the journal a
                # run leaves open) cannot be made read-only; a disk's error can do that.
                first = http.get("/healthz").json()["status"]
                calls = desk.calls
                remount("ro")
                refused = http.post("/v1/chat/completions", json=question)
                health = http.get("/healthz").json()["status"]
                ran = desk.calls - calls
                remount("rw")
                service.store_health.clock = lambda: 1e12  # past the recheck interval
                last = http.post("/v1/chat/completions", json=question).status_code
            store.close()
            print(first, refused.status_code, refused.json()["error"]["code"], health, ran, last)
            """
        )
    )
    in_private_mounts(
        """
        mount --bind "$RO" "$RO"
        "$PY" "$SCRIPT" >"$OUT"
        """,
        RO=ro, SCRIPT=script, OUT=tmp_path / "said",
    )  # fmt: skip
    said = (tmp_path / "said").read_text().split()
    assert said == ["ok", "503", "store_read_only", "store_read_only", "0", "200"]


def test_a_run_not_kept_is_told_as_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GET /v1/runs/{id} of a run whose record was refused says it was not kept (stop_reason
    error, the fault named), never finished as an answer."""
    store = TraceStore(tmp_path / "t.duckdb")
    store.check_writable()
    service = service_for(desk_agent(), store=store)

    def full(fd: int, data: bytes) -> None:
        raise OSError(errno.EDQUOT, os.strerror(errno.EDQUOT))

    monkeypatch.setattr(spool, "_write_all", full)
    with served(service) as url, httpx.Client(base_url=url, timeout=30) as http:
        started = http.post("/v1/runs", json={"input": "Where is A17?"})
        run_id = started.json()["id"]
        run = service.runs.get(run_id, Caller("local"))
        assert run is not None
        _wait_for(lambda: run.done)
        shown = http.get(f"/v1/runs/{run_id}").json()
    store.close()
    assert started.status_code == 202
    assert shown["status"] == "finished" and shown["stop_reason"] == "error"
    assert shown["output"] is None
    assert shown["error"]["type"] == "StoreFullError"
    assert shown["error"]["message"] == (
        "the server's trace store has no room (Disk quota exceeded): the run was not kept"
    )
