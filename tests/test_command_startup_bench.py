"""benchmarks/command_startup.py runs: the TypeScript parcel desk's turn built with tsc and run
with tsx, beside a bare Node process, each answered by the bundled server.

`--quick` (one round) is run as a user runs it; the script exits non-zero when a way's turn
fails, so a passing run says all three ran. No timing is asserted: that is the script's to print.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks" / "command_startup.py"


@pytest.mark.skipif(
    shutil.which("node") is None
    or not (ROOT / "golden" / "typescript_agent" / "node_modules" / "tsx").is_dir(),
    reason="needs node and `npm ci --prefix golden/typescript_agent`",
)
def test_quick_runs_the_turn_every_way_and_prints_the_ratio() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--quick"], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    for way in ("floor (node -e '')", "built (node dist/agent.js)", "tsx (node --import tsx"):
        assert re.search(rf"^  {re.escape(way)}.*\d+\.\d\s+\+\s*-?\d+\.\d over", done.stdout, re.M)
    assert re.search(r"^tsx / built: \d+\.\d\dx \([+-]\d+\.\d ms a turn\)$", done.stdout, re.M)
    # The build is the benchmark's own, gone afterwards: the suite folder is as it was.
    assert not list((ROOT / "golden" / "typescript_agent").glob("dist-bench-*"))
