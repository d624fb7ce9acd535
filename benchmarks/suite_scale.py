"""A generated golden suite at 100 / 1,000 / 10,000 cases, run end to end with `agentbench run`.

    python benchmarks/suite_scale.py [--cases 100,1000] [--repeats 3] [--no-memory]
    PYTHONPATH=/tmp/before python benchmarks/suite_scale.py --cases 100,1000

Each case is like the issue's: six model calls (five tool calls over two tools, then the
answer), a system prompt and tool results of realistic size, and the scorers shipped suites
use (stop_reason, max_steps, tool_called, trajectory, output_contains). The cassettes are
recorded once through the real record path — `agentbench run --live --record-mode all`
against agentbench's OpenAI-compatible server on 127.0.0.1, as `scripts/record_golden.py`
does — and kept under --work (re-recorded only when missing), so a before/after pair of runs
replays the very same files.

Agent settings: the generated suite's agent (`warehouse`: a long system prompt, two tools) has
the runtime's defaults; a case's six model calls stay under the default `max_iterations` of 8.

What is timed is `agentbench run SUITE` (replay) in a fresh process with a fresh trace store:
load, replay, score, store and the HTML report, exactly as the CLI writes them. "Cold" runs
start with an empty parsed-cassette cache (the first run on a machine); the others with the
cassettes parsed once before (a suite run again after a change). Printed per
size: the median wall and CPU seconds (the process and its children) of --repeats runs,
per-case milliseconds, peak RSS, and, in separate in-process runs under tracemalloc (slower,
so not timed), the peak of Python allocations with and without the report. KB a case is the
slope between two sizes (the marginal cost of one more case, fixed costs cancelled), and the
ratios between sizes show how linear time and memory are. Only the CLI and the
OpenAI-compatible test server are used, so this runs against older checkouts too.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

GENERATOR_VERSION = 1  # bump when the generated suite changes: recordings are re-made
CASES_PER_FILE = 100
SUITE = "scale"

AGENT_PY = '''\
"""A warehouse assistant: two read-only tools, answers with stock and prices."""

from __future__ import annotations

from agentbench import Agent, tool

SHELF_NOTES = (
    "Stored in a temperature-controlled aisle; handle with gloves; check the batch label "
    "against the delivery note before shelving. Items returned by customers go to the "
    "inspection bay first and are counted only after inspection. "
)


@tool(effect="read_only", idempotent=True)
def lookup_stock(sku: str) -> dict:
    """Stock level, location and handling notes of one item.

    Args:
        sku: The item's stock-keeping unit, e.g. "SKU-00042".
    """
    number = int(sku.rsplit("-", 1)[-1])
    return {
        "sku": sku,
        "on_hand": (number * 37) % 500,
        "reserved": (number * 11) % 40,
        "location": f"aisle {number % 24}, bay {number % 7}, level {number % 4}",
        "supplier": f"Supplier {number % 13} GmbH",
        "notes": SHELF_NOTES * 2,
    }


@tool(effect="read_only", idempotent=True)
def price_quote(sku: str, quantity: int) -> dict:
    """A price quote for a quantity of an item, with the volume discount applied.

    Args:
        sku: The item's stock-keeping unit.
        quantity: How many units.
    """
    number = int(sku.rsplit("-", 1)[-1])
    unit = round(3.5 + (number % 97) * 0.25, 2)
    discount = 0.1 if quantity >= 50 else 0.0
    return {
        "sku": sku,
        "quantity": quantity,
        "unit_price": unit,
        "discount": discount,
        "total": round(unit * quantity * (1 - discount), 2),
        "valid_days": 14,
        "terms": "Net 30. Prices exclude VAT and shipping. " * 3,
    }


agent = Agent(
    name="warehouse",
    instructions=(
        "You are the warehouse assistant of a mid-sized distributor. Answer questions about "
        "stock levels and prices precisely, using only what the tools return. Look every item "
        "up before you quote it; never guess a stock level or a price. When a customer asks "
        "about several items, check each of them, then price the ones they want. State stock "
        "as units on hand minus units reserved. Quote totals in EUR with two decimals and "
        "name the discount when one applies. Keep answers short: one line per item, then "
        "the total. If an item is unknown, say so and continue with the others. Do not "
        "promise delivery dates; the logistics team confirms those. Be polite and factual. "
    )
    * 2,
    tools=[lookup_stock, price_quote],
)
'''

SUITE_YAML = """\
name: scale
description: A generated suite for benchmarks/suite_scale.py.
agent: agent.py:agent
model:
  name: reference-scale
  pricing: {input_per_mtok: 0.15, output_per_mtok: 0.60}
scorers:
  - stop_reason: completed
  - max_steps: {max: 8}
tags: [generated]
"""


def _skus(case: int) -> list[str]:
    return [f"SKU-{(case * 3 + k) % 10_000:05d}" for k in range(3)]


def _case_yaml(case: int) -> str:
    a, b, c = _skus(case)
    return textwrap.dedent(
        f"""\
        - id: case-{case:05d}
          input: >-
            Customer {case} asks: how many of {a}, {b} and {c} do we have, and what would
            {case % 90 + 10} units of {a} and {case % 40 + 5} units of {b} cost?
          tags: [generated, t{case % 5}]
          expect:
            - tool_called: {{name: lookup_stock, times: 3}}
            - tool_called: {{name: price_quote, args: {{sku: {a}}}}}
            - trajectory:
                expected:
                  - {{tool: lookup_stock, args: {{sku: {a}}}}}
                  - {{tool: price_quote}}
                mode: superset
            - output_contains: "{a}"
        """
    )


def respond(request: dict[str, Any]) -> Any:
    """The reference policy: look up the three items, price two, then answer (6 calls)."""
    from agentbench import ToolCall

    messages = request["messages"]
    question = next(m["content"] for m in reversed(messages) if m.get("role") == "user")
    words = question.replace(",", " ").replace("?", " ").split()
    skus = [w for w in words if w.startswith("SKU-")][:3]
    quantities = [int(w) for w in words if w.isdigit()][1:3]
    results = [json.loads(m["content"]) for m in messages if m.get("role") == "tool"]
    if len(results) < 3:
        return ToolCall("lookup_stock", {"sku": skus[len(results)]})
    if len(results) < 5:
        k = len(results) - 3
        return ToolCall("price_quote", {"sku": skus[k], "quantity": quantities[k]})
    stock = results[:3]
    quotes = results[3:]
    lines = [
        f"{s['sku']}: {s['on_hand'] - s['reserved']} available at {s['location']}" for s in stock
    ]
    lines += [f"{q['quantity']} x {q['sku']}: EUR {q['total']:.2f}" for q in quotes]
    return "\n".join(lines)


def write_suite(root: Path, cases: int) -> Path:
    """The repository `root` with golden/scale/ of `cases` cases (no cassettes yet)."""
    suite = root / "golden" / SUITE
    (suite / "cases").mkdir(parents=True, exist_ok=True)
    (suite / "agent.py").write_text(AGENT_PY, encoding="utf-8")
    (suite / "suite.yaml").write_text(SUITE_YAML, encoding="utf-8")
    for start in range(0, cases, CASES_PER_FILE):
        text = "".join(_case_yaml(i) for i in range(start, min(cases, start + CASES_PER_FILE)))
        (suite / "cases" / f"part-{start // CASES_PER_FILE:04d}.yaml").write_text(
            text, encoding="utf-8"
        )
    return suite


def prepared(work: Path, cases: int) -> Path:
    """The suite of `cases` cases with its cassettes recorded (once; kept under `work`)."""
    root = work / f"v{GENERATOR_VERSION}-{cases}"
    done = root / ".recorded"
    if done.exists():
        return root / "golden" / SUITE
    if root.exists():
        shutil.rmtree(root)
    suite = write_suite(root, cases)
    started = time.perf_counter()
    code = subprocess.run(
        [sys.executable, __file__, "--record-child", str(suite)],
        cwd=root,
        stdout=subprocess.DEVNULL,
        check=False,
    ).returncode
    if code != 0:
        raise SystemExit(f"recording {cases} cases failed (exit {code})")
    recorded = len(list((root / "replays" / SUITE).glob("*.yaml")))
    if recorded != cases:
        raise SystemExit(f"recorded {recorded} cassettes for {cases} cases")
    done.write_text("ok\n")
    print(f"  recorded {cases} cases in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return suite


def record_child(suite: Path) -> int:
    from agentbench.cli import main
    from agentbench.testing import OpenAICompatibleServer

    with (
        tempfile.TemporaryDirectory() as scratch,
        OpenAICompatibleServer(responder=respond) as server,
    ):
        os.environ["OPENAI_BASE_URL"] = server.base_url
        os.environ["OPENAI_API_KEY"] = "reference-policy"
        return main(
            [
                "run",
                str(suite),
                "--live",
                "--record-mode",
                "all",
                "--concurrency",
                "4",
                "--db",
                str(Path(scratch) / "t.duckdb"),
                "--no-report",
            ]
        )


def run_args(suite: Path, scratch: Path, report: bool) -> list[str]:
    args = ["run", str(suite), "--db", str(scratch / "traces.duckdb")]
    args += ["--report-dir", str(scratch / "reports")] if report else ["--no-report"]
    return args


def timed_run(suite: Path, report: bool, cache: Path | None = None) -> dict[str, float]:
    """One `agentbench run` in a fresh process: wall, CPU and peak RSS of that process.

    `cache` is the parsed-cassette cache it uses (AGENTBENCH_CACHE_DIR); None: an empty one,
    as on a machine that never ran the suite (older checkouts have no such cache at all).
    """
    with tempfile.TemporaryDirectory() as scratch:
        command = [sys.executable, "-m", "agentbench", *run_args(suite, Path(scratch), report)]
        env = {**os.environ, "AGENTBENCH_CACHE_DIR": str(cache or Path(scratch, "cache"))}
        started = time.perf_counter()
        process = subprocess.Popen(
            command,
            cwd=suite.parent.parent,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
        )
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        error = process.stderr.read().decode() if process.stderr else ""
        process.stderr and process.stderr.close()
        if process.returncode != 0:
            raise SystemExit(f"agentbench run exited {process.returncode}:\n{error[-2000:]}")
        if report and not list(Path(scratch, "reports").rglob("index.html")):
            raise SystemExit("no HTML report was written")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss_kb": usage.ru_maxrss}


def memory_child(suite: Path, report: bool) -> int:
    """`agentbench run` in this process under tracemalloc; prints the peak as JSON."""
    import tracemalloc

    from agentbench.cli import main

    with tempfile.TemporaryDirectory() as scratch:
        tracemalloc.start()
        code = main(run_args(suite, Path(scratch), report))
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    print(json.dumps({"peak": peak, "exit": code}))
    return 0


def traced_peak(suite: Path, report: bool) -> float:
    flag = "--report" if report else "--no-report"
    out = subprocess.run(
        [sys.executable, __file__, "--memory-child", str(suite), flag],
        cwd=suite.parent.parent,
        capture_output=True,
        text=True,
        check=False,
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith('{"peak"')]
    if not lines:
        raise SystemExit(f"the memory run failed:\n{out.stderr[-2000:]}")
    found = json.loads(lines[-1])
    if found["exit"] != 0:
        raise SystemExit(f"the memory run exited {found['exit']}:\n{out.stderr[-2000:]}")
    return found["peak"] / 1024


def measure(suite: Path, cases: int, repeats: int, memory: bool) -> dict[str, float]:
    # Timed with the cassettes already parsed once (the suite run again after a change, the
    # everyday case); "cold" is the first run on a machine, every cassette parsed from YAML.
    cold = [timed_run(suite, report=True) for _ in range(repeats)]
    with tempfile.TemporaryDirectory() as warm:
        timed_run(suite, report=False, cache=Path(warm))
        runs = [timed_run(suite, report=True, cache=Path(warm)) for _ in range(repeats)]
        bare = [timed_run(suite, report=False, cache=Path(warm)) for _ in range(repeats)]
    row = {
        "cases": cases,
        "wall_cold": statistics.median(r["wall"] for r in cold),
        "cpu_cold": statistics.median(r["cpu"] for r in cold),
        "wall": statistics.median(r["wall"] for r in runs),
        "cpu": statistics.median(r["cpu"] for r in runs),
        "wall_bare": statistics.median(r["wall"] for r in bare),
        "cpu_bare": statistics.median(r["cpu"] for r in bare),
        "rss_kb": statistics.median(r["rss_kb"] for r in runs),
        "rss_bare_kb": statistics.median(r["rss_kb"] for r in bare),
    }
    if memory:
        row["traced_kb"] = traced_peak(suite, report=True)
        row["traced_bare_kb"] = traced_peak(suite, report=False)
    return row


def _slope(rows: list[dict[str, float]], key: str) -> str:
    if len(rows) < 2 or key not in rows[0]:
        return "—"
    first, last = rows[0], rows[-1]
    return f"{(last[key] - first[key]) / (last['cases'] - first['cases']):.1f}"


def report(rows: list[dict[str, float]]) -> None:
    import agentbench

    print(f"agentbench at {Path(agentbench.__file__).parent}")
    print(
        f"{'cases':>6} {'cold wall':>9} {'cpu':>6} {'wall s':>7} {'cpu s':>7} {'ms/case':>8} "
        f"{'no-report wall':>15} "
        f"{'cpu':>6} {'RSS MB':>7} {'no-report':>10} {'traced MB':>10} {'no-report':>10}"
    )
    for r in rows:
        traced = (
            f"{r['traced_kb'] / 1024:>10.1f} {r['traced_bare_kb'] / 1024:>10.1f}"
            if ("traced_kb" in r)
            else f"{'—':>10} {'—':>10}"
        )
        print(
            f"{r['cases']:>6} {r['wall_cold']:>9.2f} {r['cpu_cold']:>6.2f} "
            f"{r['wall']:>7.2f} {r['cpu']:>7.2f} "
            f"{r['cpu'] / r['cases'] * 1000:>8.2f} {r['wall_bare']:>15.2f} {r['cpu_bare']:>6.2f} "
            f"{r['rss_kb'] / 1024:>7.1f} {r['rss_bare_kb'] / 1024:>10.1f} {traced}"
        )
    print("KB a case (slope between the smallest and largest size):")
    print(
        f"  RSS {_slope(rows, 'rss_kb')} with the report, {_slope(rows, 'rss_bare_kb')} without;"
        f" traced {_slope(rows, 'traced_kb')} with, {_slope(rows, 'traced_bare_kb')} without"
    )
    for small, big in itertools.pairwise(rows):
        scale = big["cases"] / small["cases"]
        parts = [f"cases ×{scale:g}:", f"wall ×{big['wall'] / small['wall']:.2f}"]
        parts.append(f"cpu ×{big['cpu'] / small['cpu']:.2f}")
        parts.append(
            f"cpu/case ×{(big['cpu'] / big['cases']) / (small['cpu'] / small['cases']):.2f}"
        )
        if "traced_bare_kb" in big:
            parts.append(
                f"traced (no report) ×{big['traced_bare_kb'] / small['traced_bare_kb']:.2f}"
            )
        print("  " + " ".join(parts))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default="100,1000", help="comma-separated suite sizes")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per size (median)")
    parser.add_argument("--no-memory", action="store_true", help="skip the tracemalloc runs")
    parser.add_argument(
        "--work",
        type=Path,
        default=Path(tempfile.gettempdir()) / "agentbench-suite-scale",
        help="where generated suites and their recordings are kept between runs",
    )
    parser.add_argument("--record-child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--memory-child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--report", dest="with_report", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--no-report", dest="with_report", action="store_false", help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.record_child:
        return record_child(args.record_child)
    if args.memory_child:
        return memory_child(args.memory_child, args.with_report)
    sizes = sorted(int(n) for n in args.cases.split(","))
    rows = []
    for cases in sizes:
        suite = prepared(args.work, cases)
        rows.append(measure(suite, cases, args.repeats, not args.no_memory))
        print(f"  {cases} cases measured", file=sys.stderr)
    report(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
