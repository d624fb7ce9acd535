"""What a command costs before it does anything: `agentbench --help` and `traces list`.

    python benchmarks/cli_startup.py [--rounds 15] [--quick]

Every command is a fresh process, so its imports are paid on every call (a CI job calls
several; the test suite calls hundreds). In ROUNDS interleaved rounds, each of these runs as a
user runs it, its CPU (user + system, of the process and its children) measured by the OS:

* floor — `python -c pass` with the same interpreter: Python's own start;
* `agentbench --help`;
* `agentbench traces list` on a small store (made once, before the rounds);
* `agentbench mcp-proxy --help`.

Printed: each one's median CPU seconds and its ratio to the floor. Targets (issue 39):
`--help` <= 0.3 s and `traces list` <= 0.5 s of CPU. Default settings throughout: nothing is
configured. `--quick` runs one round, to check the script works. No timing is asserted.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def cpu_of(argv: list[str], env: dict[str, str]) -> float:
    """CPU seconds (user + system) of running `argv` to its end, children included."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(argv, env=env, capture_output=True, cwd=ROOT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr.decode()[-500:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--quick", action="store_true")
    options = parser.parse_args()
    rounds = 1 if options.quick else options.rounds
    agentbench = [sys.executable, "-m", "agentbench"]
    with tempfile.TemporaryDirectory() as folder:
        db = str(Path(folder) / "traces.duckdb")
        env = {**os.environ, "AGENTBENCH_DB": db}
        # A small store: the golden memory suite's five cases, replayed once.
        subprocess.run(
            [*agentbench, "run", "golden/memory", "--no-report", "--db", db],
            env=env, cwd=ROOT, capture_output=True, check=True,
        )  # fmt: skip
        ways = {
            "floor (python -c pass)": [sys.executable, "-c", "pass"],
            "agentbench --help": [*agentbench, "--help"],
            "agentbench traces list": [*agentbench, "traces", "list"],
            "agentbench mcp-proxy --help": [*agentbench, "mcp-proxy", "--help"],
        }
        times: dict[str, list[float]] = {name: [] for name in ways}
        for _ in range(rounds):
            for name, argv in ways.items():
                times[name].append(cpu_of(argv, env))
    floor = statistics.median(times["floor (python -c pass)"])
    print(f"CPU seconds per command, median of {rounds} round(s); ratio to the floor")
    for name, samples in times.items():
        median = statistics.median(samples)
        print(f"  {name:<30} {median:6.3f} s   {median / floor:5.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
