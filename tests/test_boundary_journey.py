"""The whole journey of a boundary target through the real CLI, as for an agentbench Agent.

One git repository holds a suite whose agent is a bare openai-SDK function with tools and a
handoff (a `transfer_to_forecaster` tool after which its system prompt and tools change),
scored by every kind of scorer. It is recorded live against the bundled server, replayed as a
baseline, then a commit changes what the forecaster's tool returns. Each test then takes one
command of the journey — run against the baseline, report, diff, traces, OTel export, replay,
promote, history, bisect — and checks what it says, including whose step it was: the
forecaster's steps happen inside the function's one run, not in a child run as the runtime's.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import duckdb
import orjson
import pytest
import test_report_browser as in_browser

from agentbench.cli import main
from agentbench.testing import OpenAICompatibleServer
from agentbench.trace.code_version import code_version

pytestmark = pytest.mark.slow  # journeys through the real CLI, seconds each

AGENT = """
import json
from openai import OpenAI

CITY_TEMPS = {"Paris": 18, "Oslo": 4}
PROMPT = "You answer weather questions."
FORECAST_PROMPT = "You are the forecaster. Give tomorrow's forecast."


def weather(city: str) -> dict:
    return {"city": city, "temp_c": CITY_TEMPS.get(city, 20)}


def forecast(city: str) -> dict:
    return {"city": city, "tomorrow_c": CITY_TEMPS.get(city, 20) + 1}


def _tool(name, description, city=True):
    properties = {"city": {"type": "string"}} if city else {}
    return {"type": "function", "function": {"name": name, "description": description,
            "parameters": {"type": "object", "properties": properties,
                           "required": list(properties)}}}


TOOLS = [_tool("weather", "Weather now"),
         _tool("transfer_to_forecaster", "Hand over to the forecaster", city=False)]
FORECAST_TOOLS = [_tool("forecast", "Tomorrow's weather")]
RUN = {"weather": weather, "forecast": forecast}


def agent(input, target):
    with OpenAI(base_url=target.base_url, api_key=target.api_key, max_retries=0) as client:
        return _answer(client, input, target)


def _answer(client, input, target):
    history = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
    messages = [{"role": "system", "content": PROMPT}] + history
    tools = TOOLS
    for _ in range(8):
        answer = client.chat.completions.create(model=target.model, messages=messages,
                                                tools=tools)
        message = answer.choices[0].message
        calls = [c.model_dump() for c in message.tool_calls or ()]
        if not calls:
            return message.content or ""
        messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        for call in calls:
            name = call["function"]["name"]
            if name == "transfer_to_forecaster":
                result = {"assistant": "forecaster"}
                messages[0] = {"role": "system", "content": FORECAST_PROMPT}
                tools = FORECAST_TOOLS
            else:
                result = RUN[name](**json.loads(call["function"]["arguments"]))
            messages.append({"role": "tool", "tool_call_id": call["id"],
                             "content": json.dumps(result)})
    return "gave up"
"""

SUITE = """\
name: weather
agent: agent.py:agent
model: {name: stand-in, pricing: {input_per_mtok: 1.0, output_per_mtok: 2.0}}
judge: stand-in-judge
cassettes: cassettes
"""

# Every kind of scorer, on the case each fits.
CASES = """\
- id: paris
  input: What is the weather in Paris?
  expect:
    - tool_called: {name: weather, args: {city: Paris}}
    - tool_not_called: forecast
    - tool_result: {name: weather, contains: "18"}
    - trajectory: {expected: [{tool: weather, args: {city: Paris}}], mode: strict}
    - model_shown: {value: "You answer weather questions.", role: system}
    - model_not_shown: "Give tomorrow's forecast"
    - output_contains: "18"
    - output_not_contains: Oslo
    - output_regex: "Paris is \\\\d+ C"
    - output_number: {value: 18}
    - output_equals: "Paris is 18 C"
    - stop_reason: completed
    - max_steps: {min: 2, max: 2}
    - token_budget: {max_tokens: 5000}
    - cost_budget: {max_usd: 0.01}
    - latency_budget: {max_ms: 600000}
    - llm_judge: The answer gives the temperature in Paris.
    - custom: {function: "checks.py:names_city", params: {city: Paris}}
- id: paris_json
  input: What is the weather in Paris, as JSON?
  expect:
    - output_json_schema:
        schema: {type: object, required: [city, temp_c], properties: {temp_c: {type: integer}}}
- id: two_cities
  input: Paris or Oslo, which is warmer?
  expect:
    - tool_called: {name: weather, times: 2}
    - trajectory:
        expected: [{tool: weather, args: {city: Oslo}}, {tool: weather, args: {city: Paris}}]
        mode: unordered
- id: follow_up
  inputs:
    - What is the weather in Oslo?
    - And in Paris?
  expect:
    - output_contains: "18"
    - tool_called: {name: weather, times: 2}
- id: forecast
  input: What is the forecast for Paris tomorrow?
  expect:
    - trajectory:
        expected: [{handoff: forecaster}, {tool: forecast, args: {city: Paris}, agent: forecaster}]
        mode: strict
    - tool_called: {name: forecast, agent: forecaster}
    - model_shown: {value: "You are the forecaster", role: system, agent: forecaster}
    - output_contains: "19"
"""

CHECKS = """\
def names_city(ctx, city):
    named = city in str(ctx.output)
    return named, f"the answer {'names' if named else 'does not name'} {city}"
"""

SCORERS = (
    "tool_called",
    "tool_not_called",
    "tool_result",
    "trajectory",
    "model_shown",
    "model_not_shown",
    "output_contains",
    "output_not_contains",
    "output_regex",
    "output_number",
    "output_equals",
    "stop_reason",
    "max_steps",
    "token_budget",
    "cost_budget",
    "latency_budget",
    "names_city",  # custom
)


def policy(request: dict[str, Any]) -> Any:
    """The stand-in model and judge: weather for each city asked about, the forecaster for a
    forecast (a handoff, then its tool), a judge's verdict for a judge's request."""
    from agentbench import ToolCall

    messages = request["messages"]
    if messages[0]["content"].startswith("You grade"):
        return '{"score": 0.9, "reason": "it gives the temperature"}'
    results = [orjson.loads(m["content"]) for m in messages if m.get("role") == "tool"]
    question = next(m["content"] for m in reversed(messages) if m.get("role") == "user")
    tools = {t["function"]["name"] for t in request.get("tools") or ()}
    if "forecast" in tools:
        done = [r for r in results if "tomorrow_c" in r]
        if not done:
            return ToolCall("forecast", {"city": "Paris"})
        return f"Tomorrow in {done[0]['city']}: {done[0]['tomorrow_c']} C"
    if "forecast" in question:
        return ToolCall("transfer_to_forecaster", {})
    asked = [c for c in ("Paris", "Oslo") if c in question]
    answered = [r for r in results if r.get("city") in asked]
    if len(answered) < len(asked):
        return [ToolCall("weather", {"city": c}) for c in asked]
    if "JSON" in question:
        return orjson.dumps(answered[0]).decode()
    return "; ".join(f"{r['city']} is {r['temp_c']} C" for r in answered)


def cli(*args: str, cwd: Path | None = None, err: io.StringIO | None = None) -> tuple[int, str]:
    """Exit code and output (stdout, and stderr too unless `err` takes it)."""
    out = io.StringIO()
    code_version.cache_clear()  # once per process, and each command is a new process
    folder = contextlib.chdir(cwd) if cwd is not None else contextlib.nullcontext()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err or out), folder:
        try:
            code = main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return int(code or 0), out.getvalue()


browser = in_browser.browser  # the report tests' headless Chromium (skips without it)


def offline(*args: str, **options: Any) -> tuple[int, str]:
    """The command with no endpoint configured: nothing can reach a live model."""
    with mock.patch.dict(os.environ):
        os.environ.pop("OPENAI_BASE_URL", None)
        os.environ.pop("OPENAI_API_KEY", None)
        return cli(*args, **options)


@contextlib.contextmanager
def live_endpoint() -> Iterator[OpenAICompatibleServer]:
    with (
        OpenAICompatibleServer(responder=policy) as server,
        mock.patch.dict(
            os.environ, {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-test-journey"}
        ),
    ):
        yield server


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=journey", "-c", "user.email=journey@example.invalid", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip()


def eval_id(output: str) -> str:
    found = re.search(r"^eval (eval_\S+):", output, re.MULTILINE)
    assert found, output
    return found.group(1)


@dataclass
class Journey:
    repo: Path
    suite: Path
    db: Path
    recorded: str  # the live eval that recorded the cassettes
    baseline: str  # the replayed eval of the recorded commit
    current: str  # the replayed eval of the change, run against the baseline
    current_code: int
    current_out: str
    good: str  # the commit the cassettes were recorded at
    bad: str  # the commit that changed the forecaster's tool

    def run_of(self, eval_id: str, case_id: str) -> str:
        with duckdb.connect(str(self.db), read_only=True) as conn:
            row = conn.execute(
                "SELECT run_id FROM runs WHERE eval_id = ? AND case_id = ?", [eval_id, case_id]
            ).fetchone()
        assert row, (eval_id, case_id)
        return str(row[0])


@pytest.fixture(scope="module")
def journey(tmp_path_factory: pytest.TempPathFactory) -> Journey:
    repo = tmp_path_factory.mktemp("journey") / "repo"
    suite = repo / "suites" / "weather"
    (suite / "cases").mkdir(parents=True)
    (suite / "agent.py").write_text(AGENT)
    (suite / "suite.yaml").write_text(SUITE)
    (suite / "cases" / "cases.yaml").write_text(CASES)
    (repo / "checks.py").write_text(CHECKS)
    (repo / ".gitignore").write_text(".agentbench/\nreports/\n__pycache__/\n")
    db = repo.parent / "runs.duckdb"
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "weather agent")
    with live_endpoint():
        code, out = cli("run", str(suite), "--live", "--record-mode", "all", "--db", str(db))
    assert code == 0, out
    recorded = eval_id(out)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "recorded")
    good = git(repo, "rev-parse", "HEAD")
    code, out = offline("run", str(suite), "--db", str(db), "--no-report")
    assert code == 0, out
    baseline = eval_id(out)
    (repo / "NOTES.md").write_text("A commit that changes nothing the agent does.\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "notes")
    agent = suite / "agent.py"
    agent.write_text(
        agent.read_text().replace("CITY_TEMPS.get(city, 20) + 1", "CITY_TEMPS.get(city, 20) + 2")
    )
    git(repo, "commit", "-qam", "forecast warmer")
    bad = git(repo, "rev-parse", "HEAD")
    code, out = offline(
        "run",
        str(suite),
        "--db",
        str(db),
        "--baseline",
        baseline,
        "--report-dir",
        str(repo.parent / "reports"),
    )
    return Journey(repo, suite, db, recorded, baseline, eval_id(out), code, out, good, bad)


def test_every_scorer_kind_passes_on_the_recorded_boundary_target(journey: Journey) -> None:
    err = io.StringIO()
    code, out = offline(
        "gate", journey.baseline, "--db", str(journey.db), "--no-report", "--json", err=err
    )
    assert code == 0, err.getvalue()
    results = {r["case_id"]: r for r in orjson.loads(out)["results"]}
    assert all(r["status"] == "passed" for r in results.values()), results
    scores = {s["name"]: s for s in results["paris"]["scores"]}
    for name in SCORERS:
        assert scores[name]["passed"] and scores[name]["value"] == 1.0, (name, scores[name])
    assert scores["llm_judge"]["value"] == pytest.approx(0.9)  # the judge's recorded verdict
    assert [s["name"] for s in results["paris_json"]["scores"]] == ["output_json_schema"]
    assert (journey.suite / "cassettes" / "paris.judge.yaml").is_file()


def test_a_live_recording_measures_model_calls_and_tool_calls(journey: Journey) -> None:
    run = journey.run_of(journey.recorded, "paris")
    with duckdb.connect(str(journey.db), read_only=True) as conn:
        latencies = conn.execute("SELECT latency_ms FROM llm_calls WHERE run_id = ?", [run])
        durations = conn.execute("SELECT duration_ms FROM tool_calls WHERE run_id = ?", [run])
        assert all(value > 0 for (value,) in latencies.fetchall())
        assert all(value > 0 for (value,) in durations.fetchall())


def test_the_change_fails_the_gate_naming_the_step_agent_and_field(journey: Journey) -> None:
    out = journey.current_out
    assert journey.current_code == 1, out
    assert "newly failing (1):" in out
    assert f"weather/forecast ({journey.suite}/cases/cases.yaml:" in out
    assert (
        "first divergence — step 1 (forecaster) tool_result_changed: tool call forecast\n"
        "        result.tomorrow_c: 19 → 20"
    ) in out
    assert "gate: FAILED" in out


def test_diff_of_the_two_evals_and_of_two_runs(journey: Journey) -> None:
    db = str(journey.db)
    code, out = offline(
        "diff",
        journey.baseline,
        journey.current,
        "--db",
        db,
        "--report-dir",
        str(journey.repo.parent / "reports"),
    )
    assert code == 1, out
    assert "first divergence — step 1 (forecaster) tool_result_changed" in out
    before = journey.run_of(journey.baseline, "forecast")
    after = journey.run_of(journey.current, "forecast")
    code, out = offline("diff", before, after, "--db", db)
    assert code == 1, out
    assert "first difference — step 1 (forecaster) tool_result_changed: tool call forecast" in out
    assert "step 2 (forecaster) request_drift: model call #3" in out
    code, out = offline(
        "diff",
        journey.run_of(journey.baseline, "paris"),
        journey.run_of(journey.current, "paris"),
        "--db",
        db,
    )
    assert code == 0, out
    assert "same behaviour: every step matches" in out


def test_traces_list_and_show_a_boundary_run(journey: Journey) -> None:
    db = str(journey.db)
    run = journey.run_of(journey.current, "forecast")
    code, out = offline("traces", "list", "--db", db, "--agent", "agent")
    assert code == 0, out
    assert run in out
    code, out = offline("traces", "show", run, "--db", db)
    assert code == 0, out
    assert "handoff  agent → forecaster (tool)" in out
    assert "[forecaster] tool  forecast(" in out and '"tomorrow_c": 20}' in out
    assert "[forecaster] llm  stand-in" in out
    assert "tool  transfer_to_forecaster({}) → ok" in out


def test_otel_export_names_the_agent_of_each_span(journey: Journey, tmp_path: Path) -> None:
    run = journey.run_of(journey.current, "forecast")
    out_file = tmp_path / "spans.jsonl"
    code, out = offline(
        "traces", "export-otel", run, "--db", str(journey.db), "--out", str(out_file), "--content"
    )
    assert code == 0, out
    spans = []
    for line in out_file.read_text().splitlines():
        for resource in orjson.loads(line)["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                spans.extend(scope["spans"])
    named = []
    for span in spans:
        attributes = {a["key"]: next(iter(a["value"].values())) for a in span["attributes"]}
        named.append((span["name"], attributes.get("gen_ai.agent.name")))
    assert named == [
        ("chat stand-in", "agent"),
        ("execute_tool transfer_to_forecaster", "agent"),
        ("chat stand-in", "forecaster"),
        ("execute_tool forecast", "forecaster"),
        ("chat stand-in", "forecaster"),
        ("invoke_agent agent", "agent"),
    ]
    # Imported back, the run keeps whose steps they were.
    imported = tmp_path / "imported.duckdb"
    code, out = offline("traces", "import-otel", str(out_file), "--db", str(imported))
    assert code == 0, out
    with duckdb.connect(str(imported), read_only=True) as conn:
        (copy,) = conn.execute("SELECT run_id FROM runs").fetchall()
    code, out = offline("traces", "show", copy[0], "--db", str(imported))
    assert "[forecaster] tool  forecast(" in out and "[forecaster] llm" in out, out


def test_history_shows_the_regression(journey: Journey) -> None:
    code, out = offline("history", "--db", str(journey.db), "--suite", "weather", cwd=journey.repo)
    assert code == 0, out
    lines = out.splitlines()
    (at,) = [i for i, line in enumerate(lines) if line.endswith("forecast warmer")]
    assert "80.0%" in lines[at]
    assert lines[at + 1].startswith("    regressed: weather/forecast (")
    assert lines[at + 1].endswith("pass → fail")
    assert [line.split()[-1] for line in lines[1:] if line[:1].isdigit()] == [
        "warmer",
        "recorded",
        "agent",
    ]


def test_bisect_finds_the_commit(journey: Journey) -> None:
    code, out = offline(
        "bisect",
        "forecast",
        "--good",
        journey.good,
        "--bad",
        journey.bad,
        "--suite",
        "suites/weather",
        "--db",
        str(journey.db),
        cwd=journey.repo,
    )
    assert code == 0, out
    assert f"first commit where weather/forecast behaves differently:\n  {journey.bad}" in out
    assert "first divergence — step 1 (forecaster) tool_result_changed" in out


def test_promote_a_boundary_run_into_a_case_that_passes(journey: Journey, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(journey.repo, repo)
    suite = repo / "suites" / "weather"
    git(repo, "checkout", "-q", journey.good, "--", "suites/weather/agent.py")
    run = journey.run_of(journey.baseline, "forecast")
    code, out = offline(
        "promote", run, "--suite", str(suite), "--id", "forecast-again", "--db", str(journey.db)
    )
    assert code == 0, out
    case = (suite / "cases" / "promoted.yaml").read_text()
    assert "id: forecast-again" in case and "name: forecast" in case
    db = str(tmp_path / "promoted.duckdb")
    code, out = offline("run", str(suite), "--db", db, "--no-report", "--filter", "forecast-again")
    assert code == 0, out
    agent = suite / "agent.py"
    agent.write_text(agent.read_text().replace("+ 1", "+ 3"))
    code, out = offline("run", str(suite), "--db", db, "--no-report", "--filter", "forecast-again")
    assert code == 1, out
    assert (
        "step 1 (forecaster) tool_result_changed: tool call forecast result.tomorrow_c: 19 → 21"
        in out
    )


def test_report_shows_the_traffic_of_a_boundary_run(journey: Journey, browser: Any) -> None:
    from selenium.webdriver.common.by import By  # installed: the browser fixture says so

    page = journey.repo.parent / "reports" / journey.current / "index.html"
    requests = in_browser._open(browser, page)
    assert requests == [page.as_uri()]
    row = browser.find_element(By.CSS_SELECTOR, '#case-table tr.case[data-case="forecast"]')
    row.find_element(By.CSS_SELECTOR, "button.expand").click()
    browser.execute_script("document.querySelectorAll('details').forEach(d => d.open = true)")
    detail = row.get_attribute("id").replace("row-", "detail-")
    text = browser.find_element(By.ID, detail).text
    # The conversation and the trace, derived from the traffic.
    assert "What is the forecast for Paris tomorrow?" in text
    assert "calls transfer_to_forecaster" in text
    assert (
        "step 1 handoff\nagent → forecaster (tool)" in text or "agent → forecaster (tool)" in text
    )
    assert "step 1 (forecaster) model call" in text
    assert "step 1 (forecaster) tool forecast" in text
    assert '"tomorrow_c": 20' in text
    assert "effect unknown" in text
    assert "Tomorrow in Paris: 19 C" in text  # the recorded answer, replayed
    # The first divergence, as the terminal said it.
    assert "step 1 (forecaster) tool_result_changed" in text
    assert in_browser._errors(browser) == []


def test_replay_a_boundary_cassette(journey: Journey, tmp_path: Path) -> None:
    cassettes = journey.suite / "cassettes"
    db = str(tmp_path / "replays.duckdb")
    code, out = offline("replay", str(cassettes / "paris.yaml"), "--db", db)
    assert code == 0, out
    assert "behaviour unchanged: every step matches the recording" in out
    code, out = offline("replay", str(cassettes / "follow_up.yaml"), "--db", db)
    assert code == 0 and "original: 8 steps; new: 8 steps" in out, out
    code, out = offline("replay", str(cassettes / "forecast.yaml"), "--db", db)
    assert code == 1, out
    assert (
        "first divergence — step 1 (forecaster) tool_result_changed: tool call forecast\n"
        "    result.tomorrow_c: 19 → 20"
    ) in out
    assert "step 2 (forecaster) request_drift: model call #3\n      messages[5].content" in out
    code, out = offline(
        "replay", str(cassettes / "forecast.yaml"), "--strict", "--json", "--db", db
    )
    assert code == 1, out
    report = orjson.loads(out)
    assert report["first"]["class"] == "tool_result_changed"
    assert (report["first"]["step"], report["first"]["agent"]) == (1, "forecaster")
    assert "replay stopped at model call #3 (--strict)" in report["counterfactual"]
    # The replayed runs are stored as replays of the recording's.
    with duckdb.connect(db, read_only=True) as conn:
        (count,) = conn.execute("SELECT count(*) FROM runs WHERE replay_of IS NOT NULL").fetchone()
    assert count == 5  # follow_up is two runs, one a turn


def test_replay_takes_tool_policies_for_a_boundary_target(journey: Journey) -> None:
    # They reach the MCP servers it reaches through its target context; this one has none,
    # and its own tools run as the framework runs them.
    cassette = journey.suite / "cassettes" / "paris.yaml"
    code, out = offline(
        "replay",
        str(cassette),
        "--tool",
        "weather=recorded",
        "--db",
        str(journey.repo.parent / "policies.duckdb"),
    )
    assert code == 0, out
    assert "verdict: unchanged" in out


def test_replay_with_agent_and_of_a_stored_run(journey: Journey, tmp_path: Path) -> None:
    db = str(tmp_path / "replays.duckdb")
    cassette = str(journey.suite / "cassettes" / "forecast.yaml")
    code, out = offline(
        "replay", cassette, "--agent", "suites.weather.agent:agent", "--db", db, cwd=journey.repo
    )
    assert code == 1 and "step 1 (forecaster) tool_result_changed" in out, out
    # A run of the current code replays unchanged; the baseline's shows the change.
    stores = ("--db", str(journey.db))
    current = journey.run_of(journey.current, "forecast")
    code, out = offline("replay", current, "--suite", str(journey.suite), *stores)
    assert code == 0 and f"replay of run {current}" in out and "unchanged" in out, out
    before = journey.run_of(journey.baseline, "forecast")
    code, out = offline(
        "replay", before, "--agent", "suites.weather.agent:agent", *stores, cwd=journey.repo
    )
    assert code == 1 and "step 1 (forecaster) tool_result_changed" in out, out


def test_replay_live_from_continues_live(journey: Journey, tmp_path: Path) -> None:
    fork = tmp_path / "forecast.fork.yaml"
    cassette = str(journey.suite / "cassettes" / "forecast.yaml")
    with live_endpoint() as server:
        code, out = cli(
            "replay",
            cassette,
            "--live-from",
            "3",
            "--save",
            str(fork),
            "--db",
            str(tmp_path / "replays.duckdb"),
        )
    assert code == 1, out
    # Calls 1 and 2 were answered from the recording; the third went to the live model, which
    # read the changed tool result.
    assert len(server.requests) == 1
    assert "text: 'Tomorrow in Paris: 19 C' → 'Tomorrow in Paris: 20 C'" in out
    assert f"recorded to {fork}" in out
    assert "live_from: 3" in fork.read_text()


def test_run_live_from_divergence_continues_live(journey: Journey, tmp_path: Path) -> None:
    with live_endpoint() as server:
        code, out = cli(
            "run",
            str(journey.suite),
            "--filter",
            "forecast",
            "--no-report",
            "--live-from-divergence",
            "--db",
            str(tmp_path / "runs.duckdb"),
        )
    assert code == 1, out
    assert len(server.requests) == 1  # the third model call; the first two were replayed
    assert 'output does not contain "19"; output: "Tomorrow in Paris: 20 C"' in out
    assert "diverged at step 1 (forecaster); continued live from model call #3" in out
