"""`run --executor ray`: trials as Ray tasks on a local Ray, and a worker killed mid-eval.

Ray is started by the test (`ray.init(num_cpus=2)`, on 127.0.0.1); the CLI runs in this
process as the driver and uses that Ray. The multi-agent suite runs on Ray with the same
results as the local executor, its runs stored once, by the driver alone. Then its refund
tool is changed to kill the worker process running it, the first time only: Ray runs the
lost batch again, and the eval still has each trial's runs exactly once.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.test_journeys import ROOT, _generated, agentbench, apply, edit

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

ray = pytest.importorskip("ray")

SUITE = "customer_service"


@pytest.fixture(scope="module")
def local_ray() -> object:
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        _node_ip_address="127.0.0.1",
    )
    yield ray
    ray.shutdown()


def checkout(tmp: Path) -> Path:
    repo = tmp / "repo"
    shutil.copytree(ROOT / "golden" / SUITE, repo / "golden" / SUITE, ignore=_generated)
    for name in ("__init__.py", "_reference.py"):
        shutil.copy(ROOT / "golden" / name, repo / "golden" / name)
    shutil.copytree(ROOT / "replays" / SUITE, repo / "replays" / SUITE)
    return repo


def statuses(result: dict) -> list[tuple[str, str, int, str]]:
    return sorted((r["suite"], r["case_id"], r["trial"], r["status"]) for r in result["results"])


def root_runs(repo: Path, db: str, eval_id: str) -> dict[str, int]:
    """How many runs each trial of the eval started (a multi-turn case: one per turn)."""
    query = (
        "SELECT case_id || '#' || trial, count(*) FROM runs "
        f"WHERE eval_id = '{eval_id}' AND parent_run_id IS NULL GROUP BY ALL"
    )
    out = agentbench(repo, "traces", "sql", query, "--db", db, "--format", "csv").out
    return {line.split(",")[0]: int(line.split(",")[1]) for line in out.strip().splitlines()[1:]}


def test_the_suite_runs_on_ray_as_it_runs_locally(local_ray: object, tmp_path: Path) -> None:
    repo = checkout(tmp_path)
    local = agentbench(repo, "run", f"golden/{SUITE}", "--json", "--no-report", "--db", "l.duckdb")
    on_ray = agentbench(
        repo,
        "run",
        f"golden/{SUITE}",
        "--executor",
        "ray",
        "--json",
        "--no-report",
        "--db",
        "r.duckdb",
    )
    assert local.code == on_ray.code == 0, on_ray.err
    assert statuses(on_ray.json()) == statuses(local.json())
    eval_id = on_ray.json()["eval_id"]
    stored = root_runs(repo, "r.duckdb", eval_id)
    assert len(stored) == len(on_ray.json()["results"])
    assert stored == root_runs(repo, "l.duckdb", local.json()["eval_id"])  # none twice
    # Handed-off runs came back with their parents: the gate and report read them.
    query = f"SELECT count(*) FROM runs WHERE eval_id = '{eval_id}' AND parent_run_id IS NOT NULL"
    children = agentbench(repo, "traces", "sql", query, "--db", "r.duckdb", "--format", "csv")
    assert int(children.out.strip().splitlines()[1]) > 0
    assert agentbench(repo, "report", eval_id, "--db", "r.duckdb").code == 0


def test_a_worker_killed_mid_eval_is_retried_and_nothing_is_stored_twice(
    local_ray: object, tmp_path: Path
) -> None:
    plain = checkout(tmp_path / "plain")
    local = agentbench(plain, "run", f"golden/{SUITE}", "--json", "--no-report", "--db", "l.duckdb")
    repo = checkout(tmp_path)
    marker = tmp_path / "killed-once"
    kill = (
        "    import os, signal\n"
        f"    if not os.path.exists({str(marker)!r}):\n"
        f"        open({str(marker)!r}, 'w').close()\n"
        "        os.kill(os.getpid(), signal.SIGKILL)  # the worker dies mid-batch\n"
    )
    source = (repo / "golden" / SUITE / "agent.py").read_text()
    head = "def order_status(order_id: str)"
    start = source.index(head)
    body = source.index('"""', source.index('"""', start) + 3) + 3  # after the docstring
    apply(repo, SUITE, (edit(source[start:body], source[start:body] + "\n" + kill),))
    done = agentbench(
        repo,
        "run",
        f"golden/{SUITE}",
        "--executor",
        "ray",
        "--json",
        "--no-report",
        "--db",
        "k.duckdb",
    )
    assert marker.exists(), "no worker was killed: the test proves nothing"
    assert done.code == 0, done.out + done.err
    result = done.json()
    assert {r["status"] for r in result["results"]} <= {"passed", "xfailed"}
    assert statuses(result) == statuses(local.json())
    assert root_runs(repo, "k.duckdb", result["eval_id"]) == root_runs(
        plain, "l.duckdb", local.json()["eval_id"]
    )


def test_a_ray_that_does_not_come_up_is_an_infrastructure_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def cannot_start(*args: object, **kwargs: object) -> None:
        raise ConnectionError("Ray's node did not start in time (raylet)")

    repo = checkout(tmp_path)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", cannot_start)
    ran = agentbench(repo, "run", f"golden/{SUITE}", "--executor", "ray", "--no-report")
    assert ran.code == 3, ran.out + ran.err
    assert "--executor ray: could not join a local Ray started for this run" in ran.err
    assert "this is a bug" not in ran.err
