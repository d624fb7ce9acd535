"""benchmarks/under_load.py: what it counts as a verdict change, its options, and its CPU hog,
whose busy processes never outlive the script (killed at the end, gone with a killed parent).

The benchmark itself (ten loaded runs of every suite) is a measurement and is not run here.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))

from under_load import Run, cpu_hog, judged, verdict_changes  # noqa: E402


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def document(*results: tuple[str, str, str], cases: list[dict] | None = None) -> dict:
    return {
        "results": [{"suite": s, "case_id": c, "status": status} for s, c, status in results],
        "comparison": {"cases": cases or []},
    }


def test_a_verdict_change_is_a_status_or_a_comparison_kind_that_moved() -> None:
    baseline = document(
        ("sql", "count", "passed"), ("sql", "top", "passed"), ("sre", "p95", "xfailed")
    )
    current = document(
        ("sql", "count", "failed"),
        ("sql", "top", "passed"),
        ("sre", "p95", "xpassed"),
        cases=[
            {
                "suite": "sql",
                "case_id": "count",
                "kind": "newly_failing",
                "reasons": ["interrupted after 5 s"],
            },
            {"suite": "sql", "case_id": "top", "kind": "unchanged"},
        ],
    )
    changes = verdict_changes(baseline, current)
    assert [c.line() for c in changes] == [
        "sql/count [passed → failed, newly_failing]: interrupted after 5 s",
        "sre/p95 [xfailed → xpassed, unchanged]",
    ]
    assert verdict_changes(baseline, baseline) == []


def test_a_case_missing_from_a_run_is_a_change() -> None:
    baseline = document(("sql", "count", "passed"), ("sql", "top", "passed"))
    current = document(("sql", "count", "passed"))  # its suite failed to load
    assert [c.line() for c in verdict_changes(baseline, current)] == [
        "sql/top [passed → absent, unchanged]"
    ]


def test_a_run_that_recorded_no_eval_is_a_failure_not_every_case_changed() -> None:
    baseline = document(("sql", "count", "passed"))
    error = {"error": {"kind": "infrastructure", "message": "Ray did not start", "exit_code": 3}}
    run = judged(Run(1, "ray", 3, 60.0), baseline, error, "stderr tail")
    assert (run.failure, run.changes) == ("Ray did not start", [])
    silent = judged(Run(2, "local", None, 60.0), baseline, None, "Killed")
    assert silent.failure == "Killed"
    assert "no result: Killed" in silent.line() and "timed out" in silent.line()


def test_the_hog_is_killed_when_the_measurement_ends() -> None:
    with cpu_hog(2) as pids:
        assert len(pids) == 2 and all(alive(pid) for pid in pids)
    assert not any(alive(pid) for pid in pids)


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_the_hog_leaves_with_a_killed_script() -> None:
    script = textwrap.dedent(
        f"""
        import sys, time
        sys.path.insert(0, {str(BENCH)!r})
        from under_load import cpu_hog
        with cpu_hog(2) as pids:
            print(*pids, flush=True)
            time.sleep(600)
        """
    )
    with subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True
    ) as parent:
        assert parent.stdout is not None
        pids = [int(word) for word in parent.stdout.readline().split()]
        assert len(pids) == 2 and all(alive(pid) for pid in pids)
        parent.kill()  # SIGKILL: no finally runs
    given_up = time.monotonic() + 60
    while any(alive(pid) for pid in pids):
        assert time.monotonic() < given_up, "a busy loop outlived the killed script"
        time.sleep(0.05)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--runs", "-1"], "--runs must be at least 0"),
        (["--hog-factor", "0"], "--hog-factor must be at least 1"),
        (["--ref", "no-such-ref", "--runs", "0", "--no-ray"], "--ref no-such-ref"),
    ],
)
def test_bad_options_exit_2(args: list[str], message: str) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / "under_load.py"), *args], capture_output=True, text=True
    )
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
