"""The verdict of a replayed case that diverged from its recording (issue 14, point 2).

After the first drifted request every recorded answer answers a question the code no longer
asks. The verdict says so in every output (summary, `--json`, JUnit, the HTML report, the
stored result); under `--allow-drift` such a case no longer passes on those answers; `--strict`
stops there instead; and a live model can take over at that call (`ReplayModel`, over HTTP).
"""

from __future__ import annotations

import runpy
from pathlib import Path

import duckdb
import orjson
import pytest

from agentbench.cli import main
from agentbench.evals.storage.results_store import stored_outcomes
from agentbench.replay.cassette import Cassette
from agentbench.replay.models import ReplayModel
from agentbench.replay.session import record_session
from agentbench.runtime.openai_model import OpenAIModel
from agentbench.runtime.runner import Runner
from agentbench.testing import OpenAICompatibleServer
from agentbench.trace.store import TraceStore
from tests.test_harness import recorded, run, suite_dir  # noqa: F401 (fixtures)
from tests.weather_suite import AGENT, respond

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

VERDICT = (
    "diverged at step 1 (weather); steps after 1 replayed from a recording that no longer applies"
)


def colder_oslo(suite: Path) -> None:
    agent = suite / "agent.py"
    agent.write_text(agent.read_text().replace('"Oslo": 4', '"Oslo": -3'))


def run_json(suite: Path, db: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple:
    capsys.readouterr()
    code = run(str(suite), "--json", *args, db=db)
    data = orjson.loads(capsys.readouterr().out)
    return code, {r["case_id"]: r for r in data["results"]}, data["eval_id"]


def test_a_changed_tool_result_says_where_the_recording_stopped_applying(
    recorded: Path,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    colder_oslo(recorded)
    code, results, eval_id = run_json(recorded, tmp_path / "a.duckdb", capsys)
    assert code == 1
    oslo = results["oslo"]
    assert oslo["diverged_at"] == {
        "step": 1,
        "agent": "weather",
        "class": "tool_result_changed",
        "cause": "step 1 (weather) tool_result_changed: tool call get_weather result.celsius: "
        "4 → -3",
        "call": 2,
        "live_from": None,
        "stopped": False,
    }
    (reason,) = [s["reason"] for s in oslo["scores"] if not s["passed"]]
    assert VERDICT in reason and "--live-from-divergence" in reason
    assert results["paris"]["diverged_at"] is None  # untouched cases have no verdict
    # Stored with the result, and read back by what the comparison and report load.
    store = TraceStore(tmp_path / "a.duckdb")
    back = stored_outcomes(store, eval_id)[("mini", "oslo", 1)]
    assert back.diverged_at == oslo["diverged_at"]
    assert back.divergence_verdict() == VERDICT


def test_allow_drift_no_longer_passes_on_counterfactual_answers(
    recorded: Path,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    colder_oslo(recorded)
    junit, reports = tmp_path / "junit.xml", tmp_path / "reports"
    code, results, _ = run_json(
        recorded,
        tmp_path / "b.duckdb",
        capsys,
        "--allow-drift",
        "--junit",
        str(junit),
        "--report-dir",
        str(reports),
    )
    # The recorded answer still says "4 degrees", which the case expects: it used to pass.
    assert code == 1
    oslo = results["oslo"]
    assert oslo["status"] == "failed"
    failed = {s["name"]: s["reason"] for s in oslo["scores"] if not s["passed"]}
    assert list(failed) == ["diverged"]
    assert failed["diverged"].startswith(VERDICT)
    assert "not evidence" in failed["diverged"]
    # The scorers' own results are still shown, for what they are.
    assert {s["name"] for s in oslo["scores"] if s["passed"]} == {"output_contains", "stop_reason"}
    assert VERDICT in junit.read_text()
    page = next(reports.glob("*/index.html")).read_text()
    assert "steps after 1 replayed from a recording that no longer applies" in page
    capsys.readouterr()
    assert run(str(recorded), "--allow-drift", db=tmp_path / "c.duckdb") == 1
    summary = capsys.readouterr().out
    assert f"- diverged: {VERDICT}" in summary


def test_a_changed_prompt_diverges_at_its_own_model_call(
    recorded: Path,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    agent = recorded / "agent.py"
    agent.write_text(agent.read_text().replace("Answer briefly.", "Answer in one line."))
    _, results, _ = run_json(recorded, tmp_path / "d.duckdb", capsys)
    paris = results["paris"]
    assert paris["diverged_at"]["class"] == "request_drift"
    assert paris["diverged_at"]["call"] == 1
    (reason,) = [s["reason"] for s in paris["scores"] if not s["passed"]]
    assert (
        "diverged at step 1 (weather); its model call and the steps after it replayed from a "
        "recording that no longer applies" in reason
    )


def test_strict_stops_at_the_divergence_instead(
    recorded: Path,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    colder_oslo(recorded)
    code, results, _ = run_json(recorded, tmp_path / "e.duckdb", capsys, "--strict")
    assert code == 1
    oslo = results["oslo"]
    assert oslo["diverged_at"]["stopped"] is True
    failed = {s["name"]: s["reason"] for s in oslo["scores"] if not s["passed"]}
    assert "diverged" not in failed  # nothing was served after the drift
    assert (
        "diverged at step 1 (weather); replay stopped at model call #2 (--strict)"
        in (failed["request_drift"])
    )


def test_results_stored_before_the_field_still_load(
    recorded: Path,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    colder_oslo(recorded)
    db = tmp_path / "old.duckdb"
    _, _, eval_id = run_json(recorded, db, capsys)
    with duckdb.connect(str(db)) as conn:
        conn.execute("UPDATE results SET details = json_remove(details, '$.diverged_at')")
        details = conn.execute("SELECT details FROM results WHERE case_id = 'oslo'").fetchone()
    assert "diverged_at" not in orjson.loads(details[0])
    oslo = stored_outcomes(TraceStore(db), eval_id)[("mini", "oslo", 1)]
    assert oslo.diverged_at is None and oslo.divergence_verdict() is None
    assert oslo.drifts  # what was stored before is still there
    assert main(["report", eval_id, "--db", str(db), "--report-dir", str(tmp_path / "r")]) == 0


async def test_a_live_model_takes_over_at_the_first_call_the_recording_cannot_answer(
    tmp_path: Path,
) -> None:
    """Beyond the end of the recording is a divergence too: the live model answers it."""
    module = tmp_path / "weather_agent.py"
    module.write_text(AGENT)
    agent = runpy.run_path(str(module))["agent"]  # the weather agent of the mini suite
    path = tmp_path / "paris.yaml"
    with OpenAICompatibleServer(responder=respond) as server:
        async with OpenAIModel("mini-model", base_url=server.base_url) as model:
            await record_session(agent, "Weather in Paris?", model=model, path=path)
        short = Cassette.load(path)
        short.interactions = short.interactions[:1]  # the final answer was never recorded
        recorded_requests = len(server.requests)
        live = OpenAIModel("mini-model", base_url=server.base_url)
        replay = ReplayModel(short, live=live, live_from_drift=True)
        try:
            result = await Runner.run(agent, "Weather in Paris?", model=replay)
        finally:
            await replay.aclose()
        sent = server.requests[recorded_requests:]
    assert result.output == "Paris: 21 degrees."
    assert replay.live_began == 2 and not replay.drifts
    assert len(sent) == 1 and sent[0].body["messages"][-1]["role"] == "tool"
