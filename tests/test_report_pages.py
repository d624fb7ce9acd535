"""Reports read the way a reviewer reads them, in headless Chromium: the verdict first, sorting,
deep links, downloads, the transcript with safe Markdown, tool schemas, and the history page.

Same browser set-up as `test_report_browser.py` (Debian's chromium-driver; skipped without
it, failing in CI). Every test also checks the console stayed clean, so a CSP violation — a
download that needed a fetch, an inline handler that slipped through — fails it.
"""

from __future__ import annotations

import csv
import io
import json
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from test_report_browser import _errors, _open, _visible_rows, browser  # noqa: F401
from test_report_history import record
from test_report_html import PAYLOADS, make_comparison, record_eval

from agentbench import Agent, Runner, ScriptedModel, ToolCall, tool
from agentbench.evals.comparing.stats import TrialOutcome
from agentbench.evals.history.history import load_history
from agentbench.evals.running.harness import EvalRun, HarnessOptions
from agentbench.evals.storage import results_store
from agentbench.report import write_report
from agentbench.report.history_page import write_history_report
from agentbench.trace.store import TraceStore

try:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait
except ImportError:  # the `browser` fixture reports it
    pass

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

MARKDOWN = "\n".join(
    [
        "## Refund *issued*",
        f"The order total was **42.5 EUR {PAYLOADS[0]}** and `code {PAYLOADS[1]}` shows it.",
        "",
        "- first item",
        "- [the policy](javascript:window.__pwned=5)",
        "",
        "| order | total |",
        "|---|---|",
        f"| A17 | {PAYLOADS[2]} |",
        "",
        "```",
        "<script>window.__pwned=7</script>",
        "```",
        "> quoted **note**",
    ]
)


RED, GREEN = "rgba(179, 38, 30, 1)", "rgba(31, 122, 63, 1)"  # the stylesheet's --fail, --pass


@tool(effect="read_only")
def order_status(order_id: str, verbose: bool = False) -> dict[str, Any]:
    """Status of an order.

    Args:
        order_id: The order id, e.g. "A17".
        verbose: Include the history.
    """
    return {"order_id": order_id, "total": 42.5, "note": PAYLOADS[0]}


def _record_markdown(store: TraceStore) -> str:
    """A passing eval whose one case used a tool and answered in Markdown full of payloads."""
    eval_id = "eval_md"
    agent = Agent(
        name="refunds",
        instructions=f"You refund orders. **Be brief.** {PAYLOADS[1]}",
        tools=[order_status],
    )
    run = EvalRun(eval_id, code_version="abc123")
    results_store.start_eval(store, run, [], HarnessOptions())
    labelled = store.with_labels(eval_id=eval_id, case_id="markdown-case", trial=1)
    model = ScriptedModel([ToolCall("order_status", {"order_id": "A17"}), MARKDOWN])
    result = Runner.run_sync(agent, f"Refund A17 *now* {PAYLOADS[2]}", model=model, store=labelled)
    run.outcomes.append(
        TrialOutcome(
            "refunds",
            "markdown-case",
            1,
            "passed",
            1.0,
            run_id=result.run_id,
            source="golden/refunds/cases.yaml:2",
            tokens=result.usage.total_tokens,
        )
    )
    results_store.store_outcomes(store, eval_id, run.outcomes)
    store.flush()
    results_store.finish_eval(store, run)
    return eval_id


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    folder = tmp_path_factory.mktemp("report-pages")
    store = TraceStore(folder / "traces.duckdb")
    record_eval(store, "eval_base", evil_tool=False)
    record_eval(store, "eval_cur", evil_tool=True)
    out = folder / "reports"
    comparison = make_comparison(store, "eval_base", "eval_cur")
    history_store = TraceStore(folder / "history.duckdb")
    ok = ["passed"]
    record(history_store, "eval_1", "a" * 40, 0, {"disk": ok, "cpu": ok})
    record(history_store, "eval_2", "b" * 40, 1, {"disk": ["failed"], "cpu": ok})
    record(history_store, "eval_3", "b" * 40, 2, {"disk": ["failed"], "cpu": ["failed"]})
    history = load_history(history_store, repo=folder)
    yield SimpleNamespace(
        report=write_report(store, "eval_cur", out, comparison=comparison),
        plain=write_report(store, "eval_base", out),
        markdown=write_report(store, _record_markdown(store), out),
        history=write_history_report(history_store, history, out),
        downloads=folder / "downloads",
    )
    store.close()
    history_store.close()


def _top(driver: Any, selector: str) -> float:
    return float(
        driver.execute_script(
            "return document.querySelector(arguments[0]).getBoundingClientRect().top", selector
        )
    )


def _statuses(driver: Any) -> list[str]:
    return driver.execute_script(
        "return Array.from(document.querySelectorAll('#case-table tr.case'))"
        ".map(r => r.getAttribute('data-status'))"
    )


def _hash(driver: Any) -> str:
    return str(driver.execute_script("return decodeURIComponent(location.hash)"))


def test_the_verdict_comes_first_in_colour_and_words(browser: Any, pages: SimpleNamespace):  # noqa: F811
    _open(browser, pages.report)
    verdict = browser.find_element(By.ID, "verdict")
    assert verdict.find_element(By.TAG_NAME, "h2").text == "✗ Gate FAILED"
    assert "bad" in verdict.get_attribute("class")
    assert verdict.value_of_css_property("border-top-color") == RED
    assert PAYLOADS[2] in verdict.text  # the gate's reason, as text
    # then the cases to look at, with file:line, then the rest
    assert _top(browser, "#verdict") < _top(browser, "#attention") < _top(browser, "#summary")
    assert _top(browser, "#summary") < _top(browser, "#cases") < _top(browser, "#details")
    attention = browser.find_element(By.ID, "attention").text
    assert "newly failing alpha/xss-case" in attention.replace("\n", " ")
    assert "golden/alpha/cases.yaml:3" in attention
    tile = browser.find_element(By.ID, "tile-pass-rate")
    assert "bad" in tile.get_attribute("class")
    assert tile.find_element(By.CLASS_NAME, "big").value_of_css_property("color") == RED
    assert _errors(browser) == []

    _open(browser, pages.markdown)
    verdict = browser.find_element(By.ID, "verdict")
    assert verdict.find_element(By.TAG_NAME, "h2").text == "✓ Gate passed"
    assert verdict.value_of_css_property("border-top-color") == GREEN
    assert browser.find_elements(By.ID, "attention") == []


def test_failing_first_and_every_column_sorts(browser: Any, pages: SimpleNamespace) -> None:  # noqa: F811
    _open(browser, pages.plain)
    assert _statuses(browser) == [
        "error",
        "failed",
        "xfailed",
        "skipped",
        "passed",
        "passed",
        "passed",
    ]
    header = browser.find_element(By.CSS_SELECTOR, 'th[data-sort="duration_ms"] button')
    header.click()
    latency = browser.find_element(By.CSS_SELECTOR, 'th[data-sort="duration_ms"]')
    assert latency.get_attribute("aria-sort") == "ascending"
    durations = browser.execute_script(
        "return Array.from(document.querySelectorAll('#case-table tr.case td:nth-child(8)'))"
        ".map(td => td.textContent)"
    )
    assert durations[:2] == ["120 ms", "120 ms"] and durations[-1] == "240 ms"
    header.click()
    assert latency.get_attribute("aria-sort") == "descending"
    assert "sort=duration_ms:desc" in _hash(browser)
    for key in (
        "suite",
        "case_id",
        "trial",
        "status",
        "score",
        "tokens",
        "cost_usd",
        "tags",
        "source",
    ):
        browser.find_element(By.CSS_SELECTOR, f'th[data-sort="{key}"] button').click()
        assert len(_visible_rows(browser)) == 7
    cases = browser.find_element(By.CSS_SELECTOR, 'th[data-sort="case_id"] button')
    cases.click()  # source was last: case is now ascending
    assert _visible_rows(browser)[0] == "broken"
    assert _errors(browser) == []


def test_deep_links_restore_filters_order_and_the_open_case(browser: Any, pages):  # noqa: F811
    _open(browser, pages.plain)
    Select(browser.find_element(By.ID, "filter-suite")).select_by_value("beta")
    assert "suite=beta" in _hash(browser)
    browser.find_element(By.CSS_SELECTOR, 'tr[data-case="handoff-case"] button.expand').click()
    link = browser.execute_script("return location.href")
    assert "case=beta/handoff-case/1" in _hash(browser)

    _open(browser, Path("/nonexistent"))  # leave the page
    browser.get(link)
    assert Select(browser.find_element(By.ID, "filter-suite")).first_selected_option.text == "beta"
    assert _visible_rows(browser) == ["broken", "known-gap", "later", "handoff-case"]
    detail = browser.find_element(By.CSS_SELECTOR, "tr.detail")
    assert detail.is_displayed() and "question for handoff-case" in detail.text

    # a link to a case that the filters hide shows it anyway
    browser.get("about:blank")
    browser.get(pages.plain.as_uri() + "#status=passed&case=alpha%2Fxss-case%2F1")
    assert "xss-case" in _visible_rows(browser)
    assert browser.find_element(By.CSS_SELECTOR, "tr.case.linked").get_attribute("data-case") == (
        "xss-case"
    )
    assert _errors(browser) == []


def test_needs_a_look_links_open_the_case_and_its_diff(browser: Any, pages) -> None:  # noqa: F811
    _open(browser, pages.report)
    row = browser.find_element(By.CSS_SELECTOR, "#attention tr.a-newly_failing")
    # A link changes the hash; the page opens its target on `hashchange`, which fires after
    # click() returns: wait for it (on a loaded machine the event comes late).
    wait = WebDriverWait(browser, 10)
    row.find_element(By.CLASS_NAME, "case-link").click()
    detail = wait.until(lambda driver: driver.find_element(By.CSS_SELECTOR, "tr.detail"))
    assert detail.is_displayed() and "question for xss-case" in detail.text
    row.find_element(By.CLASS_NAME, "change-link").click()
    change = browser.find_element(By.ID, "change-0")
    assert wait.until(lambda _: change.get_attribute("open") == "true")
    assert _errors(browser) == []


def _downloaded(folder: Path, name: str) -> str:
    path = folder / name
    for _ in range(100):
        if path.exists() and not list(folder.glob("*.crdownload")):
            return path.read_text(encoding="utf-8")
        time.sleep(0.1)
    raise AssertionError(f"{name} was not downloaded into {folder}: {list(folder.iterdir())}")


def test_downloads_are_made_in_the_page(browser: Any, pages: SimpleNamespace) -> None:  # noqa: F811
    pages.downloads.mkdir(exist_ok=True)
    browser.execute_cdp_cmd(
        "Browser.setDownloadBehavior",
        {"behavior": "allow", "downloadPath": str(pages.downloads)},
    )
    _open(browser, pages.plain)
    Select(browser.find_element(By.ID, "filter-suite")).select_by_value("alpha")
    browser.find_element(By.ID, "download-csv").click()
    table = list(csv.DictReader(io.StringIO(_downloaded(pages.downloads, "eval_base-cases.csv"))))
    assert [r["case_id"] for r in table] == ["xss-case", "ok-case", "ok-case"]  # as filtered
    assert table[0]["status"] == "failed" and table[0]["source"] == "golden/alpha/cases.yaml:3"
    assert table[1]["tokens"] == "300" and table[1]["tags"] == "smoke"

    browser.find_element(By.ID, "download-json").click()
    document = json.loads(_downloaded(pages.downloads, "eval_base.json"))
    assert document["eval"]["eval_id"] == "eval_base"
    assert document["eval"]["verdict"]["failed"] is True
    assert len(document["cases"]) == 7
    xss = next(c for c in document["cases"] if c["case_id"] == "xss-case")
    assert xss["detail"]["runs"][0]["agent"] == "desk"
    # nothing but the page itself was requested: the files came from Blobs
    requests = [
        json.loads(e["message"])["message"]["params"]["request"]["url"]
        for e in browser.get_log("performance")
        if json.loads(e["message"])["message"]["method"] == "Network.requestWillBeSent"
    ]
    assert all(url.startswith("blob:") for url in requests)
    assert _errors(browser) == []


def test_the_conversation_is_a_transcript_with_safe_markdown(browser: Any, pages) -> None:  # noqa: F811
    _open(browser, pages.markdown)
    browser.find_element(By.CSS_SELECTOR, "#row-0 button.expand").click()
    detail = browser.find_element(By.ID, "detail-0")
    roles = browser.execute_script(
        "return Array.from(document.querySelectorAll('#detail-0 .transcript .msg'))"
        ".map(m => m.className)"
    )
    assert roles == [
        "msg role-system",
        "msg role-user",
        "msg role-assistant",
        "msg role-tool",
        "msg role-assistant",
    ]
    tool = detail.find_element(By.CSS_SELECTOR, ".msg.role-tool")
    assert tool.find_element(By.CLASS_NAME, "who").text.lower() == "tool order_status"
    final = detail.find_elements(By.CSS_SELECTOR, ".transcript .msg.role-assistant")[-1]
    assert final.find_element(By.CSS_SELECTOR, "h5").text == "Refund issued"
    assert final.find_element(By.CSS_SELECTOR, "h5 em").text == "issued"
    assert final.find_element(By.TAG_NAME, "strong").text == f"42.5 EUR {PAYLOADS[0]}"
    assert final.find_element(By.CSS_SELECTOR, "p code").text == f"code {PAYLOADS[1]}"
    items = [li.text for li in final.find_elements(By.CSS_SELECTOR, "ul li")]
    assert items == ["first item", "the policy <javascript:window.__pwned=5>"]
    cells = [td.text for td in final.find_elements(By.CSS_SELECTOR, "table td")]
    assert cells == ["A17", PAYLOADS[2]]
    assert final.find_element(By.CSS_SELECTOR, "pre.code").text == (
        "<script>window.__pwned=7</script>"
    )
    assert final.find_element(By.TAG_NAME, "blockquote").text == "quoted note"
    # only the whitelisted elements were made, all text in text nodes: no link, no image,
    # no script, no handler ran
    made = browser.execute_script(
        "return Array.from(new Set(Array.from(document.querySelectorAll('#detail-0 .md *'))"
        ".map(e => e.tagName.toLowerCase()))).sort()"
    )
    assert set(made) <= {
        "p",
        "h4",
        "h5",
        "h6",
        "ul",
        "ol",
        "li",
        "pre",
        "code",
        "strong",
        "em",
        "blockquote",
        "table",
        "thead",
        "tbody",
        "tr",
        "th",
        "td",
        "hr",
        "span",
    }
    assert browser.execute_script("return document.querySelectorAll('#detail-0 a').length") == 0
    assert browser.execute_script("return typeof window.__pwned") == "undefined"
    assert browser.execute_script("return document.querySelectorAll('img, svg').length") == (
        len(browser.find_elements(By.CSS_SELECTOR, "figure.chart svg"))
    )
    assert _errors(browser) == []


def test_tool_schemas_show_as_a_table_of_parameters(browser: Any, pages) -> None:  # noqa: F811
    _open(browser, pages.markdown)
    browser.find_element(By.CSS_SELECTOR, "#row-0 button.expand").click()
    browser.execute_script(
        "document.querySelectorAll('#detail-0 details').forEach(d => d.open = true)"
    )
    table = browser.find_element(By.CSS_SELECTOR, "#detail-0 table.tools")
    rows = [
        [td.text for td in tr.find_elements(By.TAG_NAME, "td")]
        for tr in table.find_elements(By.CSS_SELECTOR, ":scope > tbody > tr")
    ]
    assert rows[0][0].startswith("order_status\nStatus of an order.")
    assert rows[0][1:] == ["order_id", "string", "required", 'The order id, e.g. "A17".']
    assert rows[1] == ["verbose", "boolean", "optional (default false)", "Include the history."]
    assert "set tools:" not in browser.find_element(By.ID, "detail-0").text
    assert _errors(browser) == []


def test_history_page_shows_evals_regressions_and_flaky_cases(browser: Any, pages) -> None:  # noqa: F811
    requests = _open(browser, pages.history)
    assert requests == [pages.history.as_uri()]
    assert _errors(browser) == []
    rows = browser.find_elements(By.CSS_SELECTOR, ".history-table tbody tr")
    assert [r.get_attribute("id") for r in rows] == ["eval-eval_3", "eval-eval_2", "eval-eval_1"]
    assert "pass → fail sre/disk golden/sre/cases.yaml:5" in rows[1].text.replace("\n", " ")
    latest = browser.find_element(By.ID, "latest")
    assert latest.find_element(By.TAG_NAME, "h2").text == "Latest: 0.0% passed, 1 regression"
    flaky = browser.find_element(By.CSS_SELECTOR, ".flaky-table tbody").text
    assert "sre/cpu" in flaky and "passed and failed in 2 evals of the same commit" in flaky
    assert len(browser.find_elements(By.CSS_SELECTOR, "figure.chart svg")) == 4
    rate = browser.find_elements(By.CSS_SELECTOR, ".history-table thead button.sort")[5]
    rate.click()  # pass rate, ascending
    ids = [
        r.get_attribute("id")
        for r in browser.find_elements(By.CSS_SELECTOR, ".history-table tbody tr")
    ]
    assert ids == ["eval-eval_3", "eval-eval_2", "eval-eval_1"]
    rate.click()
    ids = [
        r.get_attribute("id")
        for r in browser.find_elements(By.CSS_SELECTOR, ".history-table tbody tr")
    ]
    assert ids == ["eval-eval_1", "eval-eval_2", "eval-eval_3"]
    assert _errors(browser) == []
