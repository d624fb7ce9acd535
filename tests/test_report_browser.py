"""Reports opened in a real headless Chromium: no errors, no network, filters, lazy details, XSS.

Driven with selenium through Debian's `chromium-driver` (the driver path is given, so
Selenium Manager never downloads anything). The browser's console log is read for errors and
its performance log for every request the page made. Without Chromium the tests skip — but
fail when `CI` is set, so a CI machine without the browser cannot pass silently. One browser
serves the whole module.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from test_report_html import PAYLOADS, make_comparison, record_eval

from agentbench import Agent, Runner, ScriptedModel
from agentbench.evals.comparing.stats import TrialOutcome
from agentbench.evals.running.harness import EvalRun, HarnessOptions
from agentbench.evals.storage import results_store
from agentbench.report import write_diff_report, write_report
from agentbench.report.page import PAGE_SIZE
from agentbench.trace.store import TraceStore

try:
    from selenium import webdriver
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select
except ImportError:  # reported by the `browser` fixture: a skip locally, a failure in CI
    webdriver = None

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,1600",
)


def _binaries() -> tuple[str, str] | None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


def _missing(what: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"CI is set but {what}: the report's browser tests cannot run", pytrace=False)
    pytest.skip(what)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if webdriver is None:
        _missing("selenium is not installed (pip install -e '.[dev]')")
    found = _binaries()
    if found is None:
        _missing("chromium is not installed (apt-get install -y chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = found[0]
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=found[1]))
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    folder = tmp_path_factory.mktemp("browser-report")
    store = TraceStore(folder / "traces.duckdb")
    record_eval(store, "eval_base", evil_tool=False)
    record_eval(store, "eval_cur", evil_tool=True)
    comparison = make_comparison(store, "eval_base", "eval_cur")
    out = folder / "reports"
    yield SimpleNamespace(
        report=write_report(store, "eval_cur", out, comparison=comparison),
        diff=write_diff_report(store, comparison, out),
        many=write_report(store, _record_many(store, PAGE_SIZE + 30), out),
    )
    store.close()


def _record_many(store: TraceStore, trials: int) -> str:
    """One case run `trials` times, so the table needs more than one page."""
    agent, eval_id = Agent(name="echo", instructions="Echo."), "eval_many"
    run = EvalRun(eval_id)
    results_store.start_eval(store, run, [], HarnessOptions())
    for trial in range(1, trials + 1):
        labelled = store.with_labels(eval_id=eval_id, case_id="echo", trial=trial)
        result = Runner.run_sync(agent, "hi", model=ScriptedModel(["hi"]), store=labelled)
        status = "passed" if trial % 10 else "failed"
        run.outcomes.append(
            TrialOutcome("many", "echo", trial, status, float(trial % 10 > 0), run_id=result.run_id)
        )
    results_store.store_outcomes(store, eval_id, run.outcomes)
    store.flush()
    results_store.finish_eval(store, run)
    return eval_id


def _open(driver: Any, path: Any) -> list[str]:
    """Load a report fresh; return the URLs of every request the load made."""
    driver.get("about:blank")
    driver.get_log("performance")  # drain what came before
    driver.get_log("browser")
    driver.get(path.as_uri())
    requests = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            requests.append(message["params"]["request"]["url"])
    return requests


def _errors(driver: Any) -> list[dict[str, Any]]:
    return [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]


def _visible_rows(driver: Any) -> list[str]:
    # One script call rather than a WebDriver round trip per row: a page holds 200 rows.
    return driver.execute_script(
        "return Array.from(document.querySelectorAll('#case-table tr.case'))"
        ".filter(r => r.getClientRects().length > 0).map(r => r.getAttribute('data-case'))"
    )


@pytest.mark.parametrize("which", ["report", "diff"])
def test_page_loads_without_errors_or_network(browser: Any, pages: SimpleNamespace, which: str):
    path = getattr(pages, which)
    requests = _open(browser, path)
    assert requests == [path.as_uri()]
    assert _errors(browser) == []
    policy = browser.find_element(By.CSS_SELECTOR, 'meta[http-equiv="Content-Security-Policy"]')
    assert policy.get_attribute("content").startswith("default-src 'none';")


def test_filters_by_status_suite_and_tag(browser: Any, pages: SimpleNamespace) -> None:
    _open(browser, pages.report)
    assert len(_visible_rows(browser)) == 7
    status = Select(browser.find_element(By.ID, "filter-status"))
    suite = Select(browser.find_element(By.ID, "filter-suite"))
    tag = Select(browser.find_element(By.ID, "filter-tag"))
    status.select_by_value("passed")
    assert _visible_rows(browser) == ["ok-case", "ok-case", "handoff-case"]
    suite.select_by_value("beta")
    assert _visible_rows(browser) == ["handoff-case"]
    status.select_by_value("")
    tag.select_by_value("smoke")
    assert _visible_rows(browser) == ["handoff-case"]
    suite.select_by_value("")
    assert _visible_rows(browser) == ["ok-case", "ok-case", "handoff-case"]
    tag.select_by_value("")
    browser.find_element(By.ID, "filter-text").send_keys("gap")
    assert _visible_rows(browser) == ["known-gap"]
    assert browser.find_element(By.ID, "shown").text == "1 of 7 trials"
    assert _errors(browser) == []


def test_expanding_a_case_builds_its_detail_lazily(browser: Any, pages: SimpleNamespace) -> None:
    _open(browser, pages.report)
    assert browser.find_elements(By.CSS_SELECTOR, "tr.detail") == []
    button = browser.find_element(By.CSS_SELECTOR, "#row-4 button.expand")  # handoff-case
    button.click()
    details = browser.find_elements(By.CSS_SELECTOR, "tr.detail")
    assert [d.get_attribute("id") for d in details] == ["detail-4"]
    text = details[0].text
    assert "question for handoff-case" in text and "helper finished" in text
    assert "agent desk" in text and "agent helper" in text and "handoff" in text
    assert button.get_attribute("aria-expanded") == "true"
    button.click()
    assert not details[0].is_displayed()
    assert _errors(browser) == []


def test_payloads_show_as_text_and_nothing_runs(browser: Any, pages: SimpleNamespace) -> None:
    _open(browser, pages.report)
    browser.find_element(By.CSS_SELECTOR, "#row-2 button.expand").click()  # xss-case
    # open every collapsible so the tool result and model calls are in view too
    browser.execute_script("document.querySelectorAll('details').forEach(d => d.open = true)")
    detail = browser.find_element(By.ID, "detail-2")
    text = detail.text
    for payload in PAYLOADS:
        assert payload in text
    comparison = browser.find_element(By.ID, "comparison").text
    assert PAYLOADS[1] in comparison and PAYLOADS[2] in comparison
    assert browser.execute_script("return typeof window.__pwned") == "undefined"
    assert (
        browser.execute_script("return document.querySelectorAll('img, svg[onload]').length") == 0
    )
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text  # noqa: B018
    assert _errors(browser) == []


def test_comparison_highlights_the_first_divergent_step(browser: Any, pages: SimpleNamespace):
    _open(browser, pages.diff)
    change = browser.find_element(By.CSS_SELECTOR, "details.change")
    change.find_element(By.TAG_NAME, "summary").click()
    first = change.find_elements(By.CSS_SELECTOR, "table.steps tr.first")
    assert len(first) == 1 and "tool_result_changed" in first[0].text
    assert _errors(browser) == []


def test_long_tables_list_a_page_at_a_time(browser: Any, pages: SimpleNamespace) -> None:
    _open(browser, pages.many)
    total = PAGE_SIZE + 30
    assert len(_visible_rows(browser)) == PAGE_SIZE
    assert (
        browser.find_element(By.ID, "shown").text
        == f"{total} of {total} trials (first {PAGE_SIZE} listed)"
    )
    more = browser.find_element(By.ID, "more")
    assert more.text == "show 30 more"
    browser.find_element(By.CSS_SELECTOR, "#row-0 button.expand").click()
    more.click()
    assert len(_visible_rows(browser)) == total and not more.is_displayed()
    assert browser.find_element(By.ID, "detail-0").is_displayed()  # kept across re-listing
    Select(browser.find_element(By.ID, "filter-status")).select_by_value("failed")
    assert len(_visible_rows(browser)) == total // 10
    assert _errors(browser) == []
