"""benchmarks/boundary_replay.py runs: each agent recorded at the boundary, then replayed by
its floor, the bare loopback and agentbench's boundary path, with and without the store.

`--quick` (one 3-call session, one round) is run through the script as a user runs it; the
script raises when a replay diverges or a session does not end as recorded, so a passing run
says every way replayed the same session. No timing is asserted: that is the script's to print.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "boundary_replay.py"
WAYS = ("floor (canned transport)", "loopback (no replay)", "boundary, no store")


def run(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=timeout
    )


def test_quick_replays_each_agent_every_way_and_prints_its_ratios(tmp_path: Path) -> None:
    done = run("--quick", "--agents", "sync,async")
    assert done.returncode == 0, done.stderr
    sections = re.split(r"\n(?=\S+ agent, )", done.stdout.strip())
    agents = [s for s in sections if " agent, 3 model calls a session" in s]
    assert [s.split(" ", 1)[0] for s in agents] == ["sync", "async"], done.stdout
    for section in agents:
        for way in WAYS:
            assert re.search(rf"^  {re.escape(way)}\s+\d+\s+\d+", section, re.M), section
        stored = re.search(r"^  boundary, store\s+\d+\s+\d+\s+(\d+\.\d\d)x", section, re.M)
        assert stored is not None, section
        assert re.search(r"^  recording process\s+\d+", section, re.M), section
        assert f"boundary with the store: {stored[1]}x the floor's CPU" in section


def test_an_agent_it_does_not_have_is_a_usage_error() -> None:
    done = run("--quick", "--agents", "sync,crewai", timeout=120)
    assert done.returncode == 2
    assert "--agents: no agent named 'crewai' here" in done.stderr
