"""benchmarks/proxy.py runs: the floor and `agentbench proxy --replay` each started as a
process, every call answered (the proxy's with the answer recorded for its question, and the
proxy's summary saying it replayed every call), figures printed for both ways. `--quick` is
run as a user runs it; no timing is asserted: that is the script's to print."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "proxy.py"


def test_quick_measures_the_floor_and_the_proxy_and_prints_their_ratios() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--quick"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for way in ("floor (uvicorn ASGI echo)", "agentbench proxy"):
        assert len(re.findall(rf"^  {re.escape(way)}\s+\d+\s+\S+", out, re.M)) == 2, out
    assert re.search(r"proxy's p50 overhead over the floor: -?\d+ µs \(\d+\.\d\dx\)", out), out
    assert re.search(r"proxy / floor: \d+\.\d\dx calls/s", out), out
