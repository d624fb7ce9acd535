"""`agentbench run --live-from-divergence`: a diverged case is continued by a live model and
the real continuation is what is scored and stored (issue 14, point 2).

Through the real CLI on a copy of the shipped `sre` suite and its cassettes, with the bundled
OpenAI-compatible server answering as the suite's reference policy (the policy the cassettes
were recorded from), over HTTP through the openai SDK. A tool's result is changed in the copy;
the recorded final answer still quotes the old value, the live continuation quotes the new one.
"""

from __future__ import annotations

import importlib
import shutil
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pytest

from agentbench.report.packing import report_details
from agentbench.testing import OpenAICompatibleServer
from tests.test_journeys import ROOT, Result, _generated, agentbench, git

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

CASE = "status-prod-eu"  # expects "12 nodes", "78% CPU", "prod-eu-7" in the answer
CASSETTE = Path("replays/sre") / f"{CASE}.yaml"
# The reference policy answers from the tool result it is shown, as a capable model would.
REFERENCE = importlib.import_module("golden.sre.reference")


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A copy of the sre suite and its cassettes, as a user's repository."""
    root = tmp_path / "repo"
    shutil.copytree(ROOT / "golden" / "sre", root / "golden" / "sre", ignore=_generated)
    for name in ("__init__.py", "_reference.py"):
        shutil.copy(ROOT / "golden" / name, root / "golden" / name)
    shutil.copytree(ROOT / "replays" / "sre", root / "replays" / "sre")
    shutil.copytree(ROOT / "schema", root / "schema")
    return root


def change_tool(checkout: Path, old: str, new: str) -> None:
    agent = checkout / "golden" / "sre" / "agent.py"
    text = agent.read_text()
    assert text.count(old) == 1, f"{agent}: the change no longer applies: {old!r}"
    agent.write_text(text.replace(old, new))


@pytest.fixture
def server() -> Any:
    with OpenAICompatibleServer(responder=REFERENCE.respond) as running:
        yield running


def run_case(checkout: Path, *args: str) -> tuple[Result, dict[str, Any]]:
    ran = agentbench(
        checkout, "run", "golden/sre", "--filter", CASE, "--no-report", "--json", *args
    )
    assert "Traceback" not in ran.err, ran.err
    (result,) = ran.json()["results"]
    return ran, result


def failing(result: dict[str, Any]) -> dict[str, str]:
    return {s["name"]: s["reason"] for s in result["scores"] if not s["passed"]}


def stored(checkout: Path, eval_id: str) -> tuple[dict[str, Any], Any]:
    """The stored result's details and its run's final output."""
    db = checkout / ".agentbench" / "traces.duckdb"
    with duckdb.connect(str(db), read_only=True) as conn:
        details, run_id = conn.execute(
            "SELECT details, run_id FROM results WHERE eval_id = ?", [eval_id]
        ).fetchone()
        (output,) = conn.execute("SELECT output FROM runs WHERE run_id = ?", [run_id]).fetchone()
    return orjson.loads(details), output


def test_a_changed_tool_result_is_scored_on_the_live_continuation(
    checkout: Path, server: OpenAICompatibleServer
) -> None:
    change_tool(checkout, '"pods": 412,', '"pods": 415,')
    cassette_before = (checkout / CASSETTE).read_bytes()

    # Replayed, the answer is the recording's (412 pods): the case fails on the divergence,
    # and --allow-drift no longer lets that recorded answer pass as evidence.
    replayed, result = run_case(checkout)
    assert replayed.code == 1 and result["diverged_at"]["live_from"] is None
    _, output = stored(checkout, replayed.json()["eval_id"])
    assert "running 412 pods" in output  # the recorded answer, about a result no longer true
    assert (
        "diverged at step 1 (sre); steps after 1 replayed from a recording that no longer "
        "applies" in failing(result)["request_drift"]
    )
    allowed, result = run_case(checkout, "--allow-drift")
    assert allowed.code == 1 and result["status"] == "failed"
    assert set(failing(result)) == {"diverged"}, failing(result)
    assert not server.requests  # replay never calls the model

    live, result = run_case(checkout, "--live-from-divergence", "--base-url", server.base_url)
    assert live.code == 0, live.out + live.err
    assert result["status"] == "passed" and failing(result) == {}
    # Only the calls from the first drifted one went to the model: call #1 was replayed.
    (request,) = [r.body for r in server.requests]
    assert request["model"] == "reference-sre"
    assert '"pods":415' in request["messages"][-1]["content"].replace(" ", "")
    assert result["diverged_at"] == {
        "step": 1,
        "agent": "sre",
        "class": "tool_result_changed",
        "cause": result["diverged_at"]["cause"],
        "call": 2,
        "live_from": 2,
        "stopped": False,
    }
    assert "result.pods: 412 → 415" in result["diverged_at"]["cause"]
    # The stored run is the live continuation, and the stored result says where live began.
    details, output = stored(checkout, live.json()["eval_id"])
    assert "running 415 pods" in output and "412" not in output
    assert details["diverged_at"] == result["diverged_at"]
    # The summary says where the live model took over.
    live_text = agentbench(
        checkout,
        *("run", "golden/sre", "--filter", CASE, "--no-report"),
        *("--live-from-divergence", "--base-url", server.base_url),
    )
    assert "diverged at step 1 (sre); continued live from model call #2" in live_text.out
    # A continuation is not a recording of the case: the cassette is left as it was.
    assert (checkout / CASSETTE).read_bytes() == cassette_before


def test_the_live_continuation_fails_where_the_recording_would_have_passed(
    checkout: Path, server: OpenAICompatibleServer
) -> None:
    change_tool(checkout, '"cpu_pct": 78,', '"cpu_pct": 83,')
    # The recorded answer still says "78% CPU": under --allow-drift it used to pass.
    _, replayed = run_case(checkout, "--allow-drift")
    assert replayed["status"] == "failed" and set(failing(replayed)) == {"diverged"}

    live, result = run_case(checkout, "--live-from-divergence", "--base-url", server.base_url)
    assert live.code == 1
    reasons = failing(result)
    assert set(reasons) == {"output_contains"}, reasons  # judged on what the model said now
    assert "78% CPU" in reasons["output_contains"]
    _, output = stored(checkout, live.json()["eval_id"])
    assert "83% CPU" in output


def test_an_unchanged_case_never_calls_the_live_model(
    checkout: Path, server: OpenAICompatibleServer
) -> None:
    live, result = run_case(checkout, "--live-from-divergence", "--base-url", server.base_url)
    assert live.code == 0 and result["status"] == "passed"
    assert result["diverged_at"] is None and not server.requests


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "suite 'sre' has no endpoint for model 'reference-sre' (pass --base-url URL"),
        (("--strict", "--base-url", "http://127.0.0.1:9/v1"), "--strict stops it there"),
        (("--live", "--base-url", "http://127.0.0.1:9/v1"), "--live replays nothing"),
    ],
)
def test_without_a_usable_live_model_it_is_a_usage_error(
    checkout: Path, args: tuple[str, ...], message: str
) -> None:
    ran = agentbench(checkout, "run", "golden/sre", "--no-report", "--live-from-divergence", *args)
    assert ran.code == 2, ran.out + ran.err
    assert message in ran.err
    assert "Traceback" not in ran.err


def test_the_whole_path_with_a_baseline_report_diff_and_replay(
    checkout: Path, server: OpenAICompatibleServer
) -> None:
    """A committed checkout, a baseline eval, a changed tool, then every command a user runs
    next: the comparison judges the live continuation, and the stored live run replays as
    the current code's own behaviour."""
    (checkout / ".gitignore").write_text(".agentbench/\nreports/\n__pycache__/\n")
    git(checkout, "init", "-q", "-b", "main")
    git(checkout, "add", "-A")
    git(checkout, "commit", "-qm", "suites")
    first = agentbench(checkout, "run", "golden/sre", "--no-report", "--json")
    assert first.code == 0, first.err
    baseline = first.json()["eval_id"]
    change_tool(checkout, '"cpu_pct": 78,', '"cpu_pct": 83,')

    ran = agentbench(
        checkout,
        *("run", "golden/sre", "--baseline", "latest", "--json"),
        *("--live-from-divergence", "--base-url", server.base_url),
        *("--summary-md", str(checkout / "summary.md")),
    )
    assert ran.code == 1 and "Traceback" not in ran.err, ran.err
    # A passing continued case's drift is listed as not counted, and the summary says why.
    summary = (checkout / "summary.md").read_text()
    assert "sre/compare-production" in summary
    assert "continued live from model call #2" in summary
    document = ran.json()
    kinds = {c["case_id"]: c["kind"] for c in document["comparison"]["cases"]}
    # Judged on what the model says now: two cases really regress, two really still pass.
    assert {k for k, v in kinds.items() if v == "newly_failing"} == {
        "status-prod-eu",
        "headroom-prod-eu",
    }
    results = {r["case_id"]: r for r in document["results"]}
    continued = {k for k, r in results.items() if r["diverged_at"]}
    assert continued == {
        "status-prod-eu",
        "headroom-prod-eu",
        "compare-production",
        "critical-alerts",
        "forecast-not-available",
    }
    assert all(results[k]["diverged_at"]["live_from"] == 2 for k in continued)
    assert results["compare-production"]["status"] == "passed"
    assert len(server.requests) == 6  # one or two live calls per continued case, no more

    report = agentbench(checkout, "report", document["eval_id"])
    assert report.code == 0, report.err
    page = next((checkout / "reports").glob(f"{document['eval_id']}/index.html")).read_text()
    details = report_details(page) or ""  # the case details, which travel deflated
    assert "83% CPU" in page + details  # the live answer is what the report shows
    assert "continued live from model call #2" in details  # why its drift is not counted
    diff = agentbench(checkout, "diff", baseline, document["eval_id"])
    assert diff.code == 1 and "sre/status-prod-eu" in diff.out
    # The stored run is the live continuation: replayed against the current code, it matches.
    run_id = results["status-prod-eu"]["run_id"]
    replayed = agentbench(checkout, "replay", run_id, "--agent", "golden.sre.agent:sre_agent")
    assert replayed.code == 0, replayed.out + replayed.err
    assert "verdict: unchanged" in replayed.out


def test_a_suite_without_a_model_name_needs_one(checkout: Path) -> None:
    suite = checkout / "golden" / "sre" / "suite.yaml"
    text = suite.read_text()
    assert "  name: reference-sre\n" in text
    suite.write_text(text.replace("  name: reference-sre\n", ""))
    ran = agentbench(
        checkout,
        *("run", "golden/sre", "--no-report", "--live-from-divergence"),
        *("--base-url", "http://127.0.0.1:9/v1"),
    )
    assert ran.code == 2
    assert "suite 'sre' has no model name (pass --model NAME" in ran.err
