"""HTML report weight and speed: a 2,000-case eval against a 200-case baseline.

    python benchmarks/report_size.py [--cases 2000] [--baseline 200] [--calls 2]

Both evals are real: every case is a run of a small tool-calling agent (CALLS model calls:
CALLS - 1 tool calls, then the final answer; 2 by default) through `Runner` into a
`TraceStore`, scored trials written with `results_store`. For each eval it prints the report's
bytes, the seconds `render_report` takes (reading the store included), and — when Chromium and
chromium-driver are installed — the page's open time in headless Chromium (navigation start to
the load event, which includes the script sorting every row failing-first and building the
first page of them), how long expanding one case takes, and how long re-sorting the table by a
column takes — each the median of five loads. The ratios against the baseline should stay near
the case ratio (linear) for bytes and rendering, and well under it for opening, since case
details are JSON built into DOM only on expansion.

Agent settings: the runtime's defaults (`Agent(name=..., instructions=..., tools=[lookup])`).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from agentbench import Agent, Runner, ScriptedModel, ToolCall, tool
from agentbench.evals.comparing.stats import TrialOutcome
from agentbench.evals.running.harness import EvalRun, HarnessOptions
from agentbench.evals.storage import results_store
from agentbench.report import render_report, write_report
from agentbench.trace.store import TraceStore

SUITES = ("billing", "search", "support", "sql")


@tool(effect="read_only")
def lookup(order_id: str) -> dict[str, Any]:
    """Status of an order.

    Args:
        order_id: The order id.
    """
    return {"order_id": order_id, "status": "shipped", "note": "left at the door " * 8}


AGENT = Agent(name="orders", instructions="Answer questions about orders.", tools=[lookup])


async def record(store: TraceStore, eval_id: str, cases: int, calls: int = 2) -> None:
    run = EvalRun(eval_id, code_version="benchmark")
    suites = [SuiteStub(name) for name in SUITES]
    results_store.start_eval(store, run, suites, HarnessOptions())
    for index in range(cases):
        case_id = f"case-{index:05d}"
        labelled = store.with_labels(eval_id=eval_id, case_id=case_id, trial=1)
        lookups = [ToolCall("lookup", {"order_id": f"A{index}-{n}"}) for n in range(calls - 1)]
        model = ScriptedModel([*lookups, f"Order A{index} has shipped."])
        result = await Runner.run(AGENT, f"Where is order A{index}?", model=model, store=labelled)
        passed = index % 7 != 0
        outcome = TrialOutcome(
            suite=SUITES[index % len(SUITES)],
            case_id=case_id,
            trial=1,
            status="passed" if passed else "failed",
            score=1.0 if passed else 0.5,
            scores=[
                {"name": "output_contains", "value": 1.0, "passed": True, "reason": "found"},
                {"name": "tool_called", "value": float(passed), "passed": passed, "reason": "-"},
            ],
            run_id=result.run_id,
            duration_ms=50.0 + index % 300,
            tokens=result.usage.total_tokens,
            tags=["smoke"] if index % 3 == 0 else ["regression"],
            source=f"golden/cases.yaml:{index + 1}",
        )
        run.outcomes.append(outcome)
    # One batch, as the harness's ResultWriter does: a write transaction per trial would
    # measure the store's lock, not the report.
    results_store.store_outcomes(store, eval_id, run.outcomes)
    store.flush()
    results_store.finish_eval(store, run)


class SuiteStub:
    """What `start_eval` reads of a suite: its name, folder and model."""

    def __init__(self, name: str) -> None:
        self.name, self.path, self.model = name, Path("golden") / name, None


LOAD_END = "return performance.getEntriesByType('navigation')[0].loadEventEnd;"
SORTED = 'th[data-sort="tokens"][aria-sort="ascending"]'
OPENS = 5  # loads of each page; the median is printed (the first pays for a cold cache)


def _load_end(driver: Any) -> float:
    """Milliseconds from navigation start to the end of the load event. WebDriver returns
    once the document is complete, which can be before the load event's handlers finish
    (then the entry still says 0): wait for it."""
    for _ in range(200):
        end = float(driver.execute_script(LOAD_END) or 0.0)
        if end > 0:
            return end
        time.sleep(0.01)
    raise RuntimeError("the page's load event never ended")


def open_times(path: Path) -> tuple[float, float, float | None] | None:
    """(seconds to the load event, to expand one case, to sort the table by tokens) in
    headless Chromium, each the median of `OPENS` fresh loads; sorting is None for a page
    without sortable columns (reports before they had them)."""
    browser, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if not (browser and driver_path):
        return None
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tempfile.mkdtemp()}")
    driver = webdriver.Chrome(options=options, service=Service(executable_path=driver_path))
    loads, expands, sorts = [], [], []
    try:
        for _ in range(OPENS):
            driver.get("about:blank")
            driver.get(path.as_uri())
            loads.append(_load_end(driver) / 1000)
            button = driver.find_element(By.CSS_SELECTOR, "#row-0 button.expand")
            started = time.perf_counter()
            button.click()
            driver.find_element(By.ID, "detail-0")
            expands.append(time.perf_counter() - started)
            headers = driver.find_elements(By.CSS_SELECTOR, 'th[data-sort="tokens"] button')
            if headers:
                started = time.perf_counter()
                headers[0].click()
                driver.find_element(By.CSS_SELECTOR, SORTED)
                sorts.append(time.perf_counter() - started)
    finally:
        driver.quit()
    return (
        statistics.median(loads),
        statistics.median(expands),
        (statistics.median(sorts) if sorts else None),
    )


def measure(store: TraceStore, eval_id: str, out: Path) -> dict[str, Any]:
    started = time.perf_counter()
    render_report(store, eval_id)
    render_s = time.perf_counter() - started
    path = write_report(store, eval_id, out)
    return {"bytes": path.stat().st_size, "render_s": render_s, "open": open_times(path)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--baseline", type=int, default=200)
    parser.add_argument(
        "--calls", type=int, default=2, help="model calls a case: CALLS-1 lookups, then the answer"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        store = TraceStore(Path(folder) / "traces.duckdb")
        results = {}
        for cases in (args.baseline, args.cases):
            started = time.perf_counter()
            asyncio.run(record(store, f"eval_{cases}", cases, args.calls))
            print(f"recorded {cases:,} cases in {time.perf_counter() - started:.1f} s")
            results[cases] = measure(store, f"eval_{cases}", Path(folder) / "reports")
        store.close()
    base, big = results[args.baseline], results[args.cases]
    header = ("cases", 7), ("bytes", 12), ("bytes/case", 11), ("render s", 9), ("open s", 7)
    print(
        "\n"
        + " ".join(f"{name:>{width}}" for name, width in header)
        + f" {'expand s':>9} {'sort s':>7}"
    )
    for cases, r in results.items():
        opened = r["open"]
        load, expand, ordered = "—", "—", "—"
        if opened:
            load, expand = f"{opened[0]:.3f}", f"{opened[1]:.3f}"
            ordered = "—" if opened[2] is None else f"{opened[2]:.3f}"
        print(
            f"{cases:>7,} {r['bytes']:>12,} {r['bytes'] / cases:>11,.0f} "
            f"{r['render_s']:>9.3f} {load:>7} {expand:>9} {ordered:>7}"
        )
    ratio = args.cases / args.baseline
    print(f"\nagainst the {args.baseline:,}-case baseline ({ratio:.0f}x the cases):")
    print(f"  bytes  {big['bytes'] / base['bytes']:.1f}x")
    print(f"  render {big['render_s'] / base['render_s']:.1f}x")
    if base["open"] and big["open"]:
        print(f"  open   {big['open'][0] / base['open'][0]:.1f}x")
        print(f"  expand {big['open'][1] / base['open'][1]:.1f}x")
    else:
        print("  open   (not measured: chromium / chromium-driver not installed)")


if __name__ == "__main__":
    main()
