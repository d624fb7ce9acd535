"""What a command agent's turn costs to start: the TypeScript parcel desk run with tsx, or
built with tsc first.

    python benchmarks/command_startup.py [--rounds 15] [--quick]

A command agent is one process per turn, so its start-up is paid on every turn of every case.
golden/typescript_agent runs its source with tsx (`node --import tsx agent.ts`); the other
choice is to build it with tsc and run the JavaScript (`node dist/agent.js`). Here the same
turn is run both ways, and as `node -e ""` (the floor: a bare Node process), in ROUNDS
interleaved rounds: the turn on stdin, the client pointed at the bundled OpenAI-compatible
server on 127.0.0.1 answering its one model call with text at once. Printed: each way's median
wall milliseconds per turn, what it adds over the floor, and tsx's ratio to the built agent.
Needs node and `npm ci --prefix golden/typescript_agent`; says so and exits 0 without them.
`--quick` runs one round, to check the script works. No timing is asserted anywhere.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentbench.testing import OpenAICompatibleServer  # noqa: E402

SUITE = ROOT / "golden" / "typescript_agent"
TURN = b'{"input": "Where is my parcel PX-1001?", "context": {}, "turn": 1, "model": "bench"}\n'


def built(folder: Path) -> Path:
    """agent.ts compiled with the suite's own tsc into `folder`."""
    tsc = SUITE / "node_modules" / ".bin" / "tsc"
    subprocess.run(
        [str(tsc), "-p", str(SUITE), "--noEmit", "false", "--outDir", str(folder)],
        check=True,
    )
    # Beside the suite's package.json (ESM) and node_modules, as a build would be.
    return folder / "agent.js"


def timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, input=TURN, env=env, cwd=SUITE, capture_output=True)
    elapsed = (time.perf_counter() - started) * 1000
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr.decode()[-500:]}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="one round")
    options = parser.parse_args()
    if shutil.which("node") is None or not (SUITE / "node_modules" / "tsx").is_dir():
        print("skipped: needs node and `npm ci --prefix golden/typescript_agent`")
        return 0
    rounds = 1 if options.quick else options.rounds
    with (
        tempfile.TemporaryDirectory(dir=SUITE, prefix="dist-bench-") as out,
        OpenAICompatibleServer(responder=lambda request: "PX-1001 is out for delivery.") as api,
    ):
        script = built(Path(out))
        env = {**os.environ, "OPENAI_BASE_URL": api.base_url, "OPENAI_API_KEY": "bench"}
        ways = {
            "floor (node -e '')": ["node", "-e", ""],
            "built (node dist/agent.js)": ["node", str(script)],
            "tsx (node --import tsx agent.ts)": ["node", "--import", "tsx", "agent.ts"],
        }
        times: dict[str, list[float]] = {name: [] for name in ways}
        for _ in range(rounds):
            for name, argv in ways.items():  # interleaved: a noisy moment hits every way
                times[name].append(timed(argv, env))
    medians = {name: statistics.median(values) for name, values in times.items()}
    floor = medians["floor (node -e '')"]
    print(f"one turn, median of {rounds} round(s), wall ms:")
    for name, value in medians.items():
        print(f"  {name:34} {value:8.1f}   +{value - floor:7.1f} over the floor")
    tsx, js = medians["tsx (node --import tsx agent.ts)"], medians["built (node dist/agent.js)"]
    print(f"tsx / built: {tsx / js:.2f}x ({tsx - js:+.1f} ms a turn)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
