"""Past one machine: a generated suite run whole, as parallel shards merged, and on Ray.

    python benchmarks/scale.py [--cases 1000,10000] [--shards 4] [--no-ray] [--work DIR]

The suite is `suite_scale.py`'s (six model calls a case: five tool calls over two tools,
then the answer; its agent, `warehouse`, has the runtime's default settings), recorded once
under --work and replayed by every configuration:

* local — `agentbench run SUITE --no-report` in one process (the parsed-cassette cache warm);
* shards — `--shard K/N` for every K at once, N processes into N stores, then `agentbench
  merge` of the N stores into one: the wall time is the slowest shard plus the merge;
* ray — `--executor ray` on a local Ray started by the run (its start-up, measured alone
  beforehand, is printed too, and left in the figure: a CI job pays it).

Printed per size and configuration: wall seconds, cases per second, the driver's own peak RSS
(the process that runs `agentbench run` or `merge`, read from its /proc status as it ends;
shard processes' own peaks beside it) and the largest peak of its process tree as rusage
reports it (the children it waited for, such as the cassette prefetch process),
and, between sizes, how the driver's peak grows per case — flat means the driver holds no
per-case state; and what the local run stored, as a DuckDB file and as a Parquet export, per
case. Every configuration must store the same number of results. No timings are asserted
anywhere; machines here are shared and noisy.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import suite_scale

# Runs the CLI and writes the process's own peak RSS (VmHWM) to a file: the rusage of a
# waited-for child is the largest peak of its tree (the cassette prefetch process, say), not
# necessarily the driver's.
_DRIVER = """
import sys
from agentbench.cli import main
code = main(sys.argv[2:])
with open(sys.argv[1], "w") as out:
    out.write(next(l.split()[1] for l in open("/proc/self/status") if l.startswith("VmHWM")))
sys.exit(code)
"""


def _wait(process: subprocess.Popen[bytes], started: float) -> dict[str, float]:
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    error = process.stderr.read().decode() if process.stderr else ""
    if process.stderr:
        process.stderr.close()
    if process.returncode not in (0, 1):  # 1: a gate failed, which is a result, not a crash
        raise SystemExit(
            f"{' '.join(map(str, process.args))} exited {process.returncode}:\n{error[-2000:]}"
        )
    peak_file = Path(process.args[3])  # type: ignore[index]
    peak = peak_file.read_text()
    peak_file.unlink()
    return {"wall": wall, "rss_mb": int(peak) / 1024, "tree_mb": usage.ru_maxrss / 1024}


def _start(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    handle, peak = tempfile.mkstemp(prefix="agentbench-peak-")
    os.close(handle)
    return subprocess.Popen(
        [sys.executable, "-c", _DRIVER, peak, *args],
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )


def _results(db: Path) -> int:
    import duckdb

    with duckdb.connect(str(db), read_only=True) as conn:
        row = conn.execute("SELECT count(*) FROM results").fetchone()
    return int(row[0]) if row else 0


def _bytes(path: Path) -> int:
    return (
        path.stat().st_size
        if path.is_file()
        else sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    )


def stored_size(db: Path, env: dict[str, str]) -> dict[str, int]:
    """The store's bytes, and those of its Parquet export (what a lake holds)."""
    lake = db.parent / "lake"
    done = subprocess.run(
        [sys.executable, "-m", "agentbench", "traces", "export", str(lake), "--db", str(db)],
        env=env,
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"export failed:\n{done.stderr.decode()[-2000:]}")
    return {"duckdb": _bytes(db), "parquet": _bytes(lake)}


def local(suite: Path, scratch: Path, env: dict[str, str]) -> dict[str, Any]:
    db = scratch / "local.duckdb"
    started = time.perf_counter()
    found = _wait(
        _start(["run", str(suite), "--no-report", "--db", str(db)], suite.parents[1], env), started
    )
    return {**found, "results": _results(db)}


def sharded(suite: Path, scratch: Path, env: dict[str, str], count: int) -> dict[str, Any]:
    started = time.perf_counter()
    processes = [
        _start(
            [
                "run",
                str(suite),
                "--no-report",
                "--shard",
                f"{k}/{count}",
                "--db",
                str(scratch / f"shard{k}.duckdb"),
            ],
            suite.parents[1],
            env,
        )
        for k in range(1, count + 1)
    ]
    shards = [_wait(p, started) for p in processes]
    merged = scratch / "merged.duckdb"
    merge_started = time.perf_counter()
    merge = _wait(
        _start(
            [
                "merge",
                *(str(scratch / f"shard{k}.duckdb") for k in range(1, count + 1)),
                "--into",
                str(merged),
            ],
            suite.parents[1],
            env,
        ),
        merge_started,
    )
    return {
        "wall": time.perf_counter() - started,
        "rss_mb": merge["rss_mb"],
        "tree_mb": merge["tree_mb"],
        "shard_rss_mb": max(s["rss_mb"] for s in shards),
        "merge_wall": merge["wall"],
        "results": _results(merged),
    }


def on_ray(suite: Path, scratch: Path, env: dict[str, str]) -> dict[str, Any]:
    db = scratch / "ray.duckdb"
    started = time.perf_counter()
    found = _wait(
        _start(
            ["run", str(suite), "--no-report", "--executor", "ray", "--db", str(db)],
            suite.parents[1],
            env,
        ),
        started,
    )
    return {**found, "results": _results(db)}


def ray_start_up() -> float:
    started = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import ray; ray.init(include_dashboard=False, log_to_driver=False); ray.shutdown()",
        ],
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - started


def _cell(value: float | None, digits: int) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="1000,10000")
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--no-ray", action="store_true")
    parser.add_argument(
        "--work", type=Path, default=Path(tempfile.gettempdir()) / "agentbench-suite-scale"
    )
    args = parser.parse_args()
    case_sizes = [int(n) for n in args.cases.split(",")]
    rows: list[tuple[int, str, dict[str, Any]]] = []
    sizes: dict[int, dict[str, int]] = {}
    if not args.no_ray:
        print(f"ray start-up alone: {ray_start_up():.1f} s", file=sys.stderr)
    for cases in case_sizes:
        suite = suite_scale.prepared(args.work, cases)
        with tempfile.TemporaryDirectory() as cache_dir, tempfile.TemporaryDirectory() as tmp:
            env = {**os.environ, "AGENTBENCH_CACHE_DIR": cache_dir}
            scratch = Path(tmp)
            warm = scratch / "warm"
            warm.mkdir()
            local(suite, warm, env)  # every cassette parsed once: the runs below start warm
            configurations = ["local", f"{args.shards} shards + merge"]
            configurations += [] if args.no_ray else ["ray"]
            for name in configurations:
                folder = scratch / name.split()[0]
                folder.mkdir()
                if name == "local":
                    found = local(suite, folder, env)
                    sizes[cases] = stored_size(folder / "local.duckdb", env)
                elif name == "ray":
                    found = on_ray(suite, folder, env)
                else:
                    found = sharded(suite, folder, env, args.shards)
                if found["results"] != cases:
                    raise SystemExit(f"{name}: {found['results']} results stored for {cases} cases")
                rows.append((cases, name, found))
                print(f"  {cases} cases, {name}: {found['wall']:.1f} s", file=sys.stderr)
    print(
        f"{'cases':>7}  {'configuration':<18} {'wall s':>7} {'cases/s':>8} {'driver MB':>10} "
        f"{'tree MB':>8} {'shard MB':>9} {'merge s':>8}"
    )
    for cases, name, found in rows:
        print(
            f"{cases:>7}  {name:<18} {found['wall']:>7.1f} {cases / found['wall']:>8.0f} "
            f"{found['rss_mb']:>10.0f} {found['tree_mb']:>8.0f} "
            f"{_cell(found.get('shard_rss_mb'), 0):>9} "
            f"{_cell(found.get('merge_wall'), 1):>8}"
        )
    for cases, size in sizes.items():
        print(
            f"\nstored, {cases} cases: DuckDB {size['duckdb'] / 1e6:.1f} MB "
            f"({size['duckdb'] / cases / 1024:.1f} KB a case), Parquet export "
            f"{size['parquet'] / 1e6:.1f} MB ({size['parquet'] / cases / 1024:.1f} KB a case)"
        )
    if len(case_sizes) > 1:
        small, large = case_sizes[0], case_sizes[-1]
        print(f"\ndriver peak RSS growth per case, {small} → {large} cases:")
        for name in dict.fromkeys(n for _, n, _ in rows):
            a = next(f for c, n, f in rows if c == small and n == name)
            b = next(f for c, n, f in rows if c == large and n == name)
            per_case = (b["rss_mb"] - a["rss_mb"]) * 1024 / (large - small)
            print(
                f"  {name:<18} {a['rss_mb']:.0f} → {b['rss_mb']:.0f} MB ({per_case:.1f} KB a case)"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
