"""Production traces replay against the real app: OTel spans → a golden case of the app itself.

A plain openai-SDK app (two tools, the model asking for both at once; no agentbench in it) is
written to a folder of its own and run once "in production": in a subprocess, under the real
instrumentation package (`opentelemetry-instrumentation-openai-v2` on the latest conventions
or on its v1.30 log events, or OpenInference's), against the bundled OpenAI-compatible server,
exporting over OTLP/HTTP to the collector stand-in. Then, through the real CLI: `traces
import-otel` → `promote --agent weather_app.py:answer` (the app's own function: a boundary
target) → `agentbench run`, which passes on the unchanged app and fails, naming the step and
the field, when a tool's result, the prompt or a setting the trace recorded changes.

What the spans could not carry is not drift: openai-v2 records no tool definitions and no
tool_choice, re-serializes the model's tool-call arguments from an object, and records the
app's `stop="END"` as the list ["END"].
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from agentbench.cli import main
from agentbench.runtime.models import ToolCall
from agentbench.testing import OpenAICompatibleServer
from agentbench.testing.collector import OtlpCollector

ROOT = Path(__file__).resolve().parents[1]
INSTRUMENTED = ROOT / "examples" / "otel"  # plain_app.instrument: the OTel SDK set up as usual
QUESTION = "How is the weather in Paris?"
FOLLOW_UP = "And is it windy?"
ANSWER = "21.0 °C and wind 12 km/h in Paris."

pytestmark = [pytest.mark.server, pytest.mark.slow]  # served apps traced, replayed, promoted

APP = '''\
"""A weather app on the openai SDK: call the model, run the tools it asks for, repeat."""

import json

from openai import OpenAI

SYSTEM = "You answer weather questions. Use the tools; never guess."
STREAM = False
CELSIUS = {"paris": 21.0, "oslo": 4.5}
WIND = {"paris": 12, "oslo": 30}


def _tool(name, description):
    parameters = {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    }
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


TOOLS = [
    _tool("get_weather", "Current temperature of a city, in Celsius."),
    _tool("get_wind", "Current wind speed of a city, in km/h."),
]


def get_weather(city):
    return {"city": city, "celsius": CELSIUS.get(city.lower())}


def get_wind(city):
    return {"city": city, "kmh": WIND.get(city.lower())}


def reply(client, target, messages):
    """The model's message, as the app sends it back; streamed when STREAM says so."""
    asked = dict(
        model=target.model,
        messages=messages,
        tools=TOOLS,
        tool_choice="auto",
        temperature=0,
        max_tokens=300,
        stop="END",
    )
    if not STREAM:
        message = client.chat.completions.create(**asked).choices[0].message
        return message.model_dump(exclude_none=True)
    text, calls = "", {}
    chunks = client.chat.completions.create(
        **asked, stream=True, stream_options={"include_usage": True}
    )
    for chunk in chunks:
        delta = chunk.choices[0].delta if chunk.choices else None
        text += (delta.content or "") if delta else ""
        for part in (delta.tool_calls or []) if delta else []:
            call = calls.setdefault(part.index, {"id": "", "name": "", "arguments": ""})
            call["id"] = part.id or call["id"]
            call["name"] += part.function.name or ""
            call["arguments"] += part.function.arguments or ""
    message = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = [
            {"id": c["id"], "type": "function",
             "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in calls.values()
        ]
    return message


def answer(question, target):
    """`question`: the user's, or the chat so far; `target`: where the model is (base_url,
    api_key, model): the app's settings."""
    with OpenAI(base_url=target.base_url, api_key=target.api_key, max_retries=0) as client:
        return converse(client, question, target)


def converse(client, question, target):
    said = [{"role": "user", "content": question}] if isinstance(question, str) else question
    messages = [{"role": "system", "content": SYSTEM}, *said]
    for _ in range(5):
        message = reply(client, target, messages)
        if not message.get("tool_calls"):
            return message["content"]
        messages.append(message)
        for call in message["tool_calls"]:
            function = call["function"]
            tool = {"get_weather": get_weather, "get_wind": get_wind}[function["name"]]
            result = tool(**json.loads(function["arguments"]))
            messages.append(
                {"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result)}
            )
    return "I could not find out."
'''

# Production: the app called with its own settings, under the instrumentation.
PRODUCTION = """\
import sys
import types

app_folder, instrumented, instrumentation, otlp, base_url = sys.argv[1:6]
sys.path[:0] = [app_folder, instrumented]
from plain_app import instrument

tracer_provider, logger_provider = instrument(instrumentation, otlp)
from weather_app import answer

settings = types.SimpleNamespace(base_url=base_url, api_key="sk-local", model="gpt-4o-mini")
question, follow_up = sys.argv[6:8]
first = answer(question, settings)
print(first)
if follow_up:  # a chat: the next turn is handed the dialogue so far
    said = [{"role": "user", "content": question}, {"role": "assistant", "content": first}]
    print(answer([*said, {"role": "user", "content": follow_up}], settings))
tracer_provider.shutdown()
if logger_provider is not None:
    logger_provider.shutdown()
"""


def weather_model(request: dict[str, Any]) -> Any:
    """Asks for both tools at once (for the follow-up, the wind alone), with compact arguments
    as OpenAI's models write them, then answers from what they returned."""
    messages = request["messages"]
    asked = max(i for i, m in enumerate(messages) if m["role"] == "user")
    results = [json.loads(m["content"]) for m in messages[asked:] if m["role"] == "tool"]
    if not results and messages[asked]["content"] == FOLLOW_UP:
        return ToolCall(name="get_wind", arguments='{"city":"Paris"}')
    if not results:
        return [
            ToolCall(name="get_weather", arguments='{"city":"Paris"}'),
            ToolCall(name="get_wind", arguments='{"city":"Paris"}'),
        ]
    wind = next(r for r in results if "kmh" in r)
    weather = next((r for r in results if "celsius" in r), None)
    if weather is None:
        return f"Wind {wind['kmh']} km/h in {wind['city']}."
    return f"{weather['celsius']} °C and wind {wind['kmh']} km/h in {weather['city']}."


def agentbench(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentbench", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )


@dataclass
class Promoted:
    instrumentation: str
    folder: Path  # the app, its suite (with the promoted case and cassette), the trace store
    promote_said: str

    def copy(self, to: Path) -> Path:
        """The app and its suite in a folder of the test's own, to change."""
        shutil.copytree(self.folder, to)
        return to


def in_production(folder: Path, instrumentation: str, app: str, follow_up: str = "") -> Promoted:
    """The app run once in production under the instrumentation (asked QUESTION, then
    `follow_up` in the same chat), its trace imported and its last turn promoted into a
    suite whose agent is the app's own `answer`."""
    folder.mkdir(parents=True)
    (folder / "weather_app.py").write_text(app)
    (folder / "production.py").write_text(PRODUCTION)
    spans = folder / "spans.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    with (
        OpenAICompatibleServer(responder=weather_model) as server,
        OtlpCollector(spans) as collector,
    ):
        ran = subprocess.run(
            [
                sys.executable,
                str(folder / "production.py"),
                str(folder),
                str(INSTRUMENTED),
                instrumentation,
                collector.endpoint,
                server.base_url,
                QUESTION,
                follow_up,
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines()[0] == ANSWER
    imported = agentbench("traces", "import-otel", "spans.jsonl", "--db", "t.duckdb", cwd=folder)
    assert imported.returncode == 0, imported.stderr
    stored = [line.split()[1] for line in imported.stdout.splitlines() if line.startswith("stored")]
    run_id = stored[-1]  # the last turn
    made = agentbench(
        "promote",
        run_id,
        "--suite",
        "suite",
        "--agent",
        "weather_app.py:answer",
        "--db",
        "t.duckdb",
        cwd=folder,
    )
    assert made.returncode == 0, made.stdout + made.stderr
    return Promoted(instrumentation, folder, made.stdout)


@pytest.fixture(scope="module", params=["openai-v2", "openai-v2-events", "openinference"])
def promoted(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Promoted:
    return in_production(tmp_path_factory.mktemp(request.param) / "app", request.param, APP)


@pytest.fixture(scope="module", params=["openai-v2", "openinference"])
def chatted(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Promoted:
    """The second turn of a chat: its own trace, whose requests carry the dialogue so far."""
    folder = tmp_path_factory.mktemp(request.param) / "app"
    return in_production(folder, request.param, APP, follow_up=FOLLOW_UP)


@pytest.fixture(scope="module", params=["openai-v2", "openinference"])
def streamed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Promoted:
    """The same, the app streaming its answers (OpenInference then records `stream: true`)."""
    app = APP.replace("STREAM = False", "STREAM = True")
    return in_production(tmp_path_factory.mktemp(request.param) / "app", request.param, app)


def run_suite(capsys: pytest.CaptureFixture[str], folder: Path) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    code = main(
        ["run", str(folder / "suite"), "--db", str(folder / "e.duckdb"), "--no-report", "--json"]
    )
    out = capsys.readouterr().out
    return code, json.loads(out)


def reasons(result: dict[str, Any]) -> str:
    return "\n".join(s["reason"] for s in result["results"][0]["scores"] if not s["passed"])


def edit(file: Path, old: str, new: str) -> None:
    text = file.read_text()
    assert old in text
    file.write_text(text.replace(old, new))


def test_unchanged_app_passes_its_promoted_production_case(
    promoted: Promoted, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = promoted.copy(tmp_path / "app")
    code, result = run_suite(capsys, folder)
    assert code == 0, reasons(result)
    assert result["verdict"]["status"] == "passed" and result["summary"]["passed"] == 1
    case = result["results"][0]
    assert case["drifts"] == [] and case["divergences"] == []
    cassette = yaml.safe_load(next((folder / "suite" / "cassettes").glob("*.yaml")).read_text())
    info = cassette["metadata"]["agentbench"]
    # The steps are the app's function's, as the replayed run names them.
    assert {step["agent"] for step in info["trajectory"]} == {"answer"}
    # The cassette says what the trace could not know, and promote said it.
    recorded = info["imported_trace"].get("recorded_fields")
    if promoted.instrumentation == "openinference":  # the whole request body is on the span
        assert recorded is None and "the trace recorded only" not in promoted.promote_said
    else:
        assert recorded == ["max_tokens", "messages", "model", "stop", "temperature"]
        assert "the trace recorded only max_tokens, messages, model, stop, temperature" in (
            promoted.promote_said
        )


def test_a_changed_tool_result_fails_naming_the_step_and_field(
    promoted: Promoted, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = promoted.copy(tmp_path / "app")
    edit(folder / "weather_app.py", '"paris": 21.0', '"paris": 25.0')
    code, result = run_suite(capsys, folder)
    assert code == 1 and result["verdict"]["status"] == "failed"
    said = reasons(result)
    assert "step 1 (answer) tool_result_changed: tool call get_weather" in said, said
    assert "result.celsius: 21.0 → 25.0" in said, said
    first = result["results"][0]["divergences"][0]
    assert (first["class"], first["step"], first["label"]) == (
        "tool_result_changed",
        1,
        "tool call get_weather",
    )


def test_a_changed_prompt_is_request_drift_at_its_path(
    promoted: Promoted, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = promoted.copy(tmp_path / "app")
    edit(folder / "weather_app.py", "Use the tools; never guess.", "Use the tools.")
    code, result = run_suite(capsys, folder)
    assert code == 1
    said = reasons(result)
    assert "model call #1 at step 1 (answer): messages[0].content:" in said, said
    assert "'…ns. Use the tools; never guess.' → '…ns. Use the tools.'" in said, said
    drift = result["results"][0]["drifts"][0]
    assert [c["path"] for c in drift["changes"]] == ["messages[0].content"]


def test_a_setting_the_trace_recorded_is_still_compared(
    promoted: Promoted, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Only what the trace could not know is left out: a recorded setting that changes is
    drift, for every instrumentation."""
    folder = promoted.copy(tmp_path / "app")
    edit(folder / "weather_app.py", "temperature=0,", "temperature=0.7,")
    code, result = run_suite(capsys, folder)
    assert code == 1
    assert "model call #1 at step 1 (answer): temperature: 0 → 0.7" in reasons(result)


def test_tool_definitions_are_compared_where_the_trace_recorded_them(
    promoted: Promoted, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = promoted.copy(tmp_path / "app")
    edit(folder / "weather_app.py", "in km/h.", "in metres per second.")
    code, result = run_suite(capsys, folder)
    if promoted.instrumentation == "openinference":
        assert code == 1
        said = reasons(result)
        assert "model call #1 at step 1 (answer): tools[1].function.description:" in said
        assert "'…ed of a city, in km/h.' → '…ed of a city, in metre" in said
    else:  # openai-v2 never recorded the tools: nothing to compare them with
        assert code == 0, reasons(result)


def test_replay_of_the_cassette_agrees_with_run(
    promoted: Promoted, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`agentbench replay` of the promoted cassette says what `run` says, and names what it
    did not compare."""
    folder = promoted.copy(tmp_path / "app")
    cassette = next((folder / "suite" / "cassettes").glob("*.yaml"))
    capsys.readouterr()
    code = main(["replay", str(cassette), "--db", str(folder / "r.duckdb")])
    out = capsys.readouterr().out
    assert code == 0 and "verdict: unchanged" in out and "request drift" not in out, out
    if promoted.instrumentation == "openinference":
        assert "not compared" not in out
    else:
        assert "not compared: tool_choice, tools (the trace the recording was made" in out
    edit(folder / "weather_app.py", '"paris": 21.0', '"paris": 25.0')
    code = main(["replay", str(cassette), "--db", str(folder / "r.duckdb")])
    out = capsys.readouterr().out
    assert code == 1 and "verdict: DIVERGED" in out
    assert "first divergence — step 1 (answer) tool_result_changed: tool call get_weather" in out


def test_agentbench_s_own_export_of_the_app_s_runs_promotes_as_well(
    promoted: Promoted, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The app's runs as agentbench stored them, exported as OTel spans and imported
    elsewhere (agentbench's own spans hold whole requests), promote to the app's function."""
    folder = promoted.copy(tmp_path / "app")
    assert run_suite(capsys, folder)[0] == 0
    spans, store = folder / "own.jsonl", folder / "own.duckdb"
    exported = ["traces", "export-otel", "--db", str(folder / "e.duckdb"), "--out", str(spans)]
    assert main([*exported, "--content"]) == 0
    assert main(["traces", "import-otel", str(spans), "--db", str(store)]) == 0
    run_id = capsys.readouterr().out.split("stored ")[1].split()[0]
    shutil.rmtree(folder / "suite")
    agent = str(folder / "weather_app.py") + ":answer"
    promote = ["promote", run_id, "--suite", str(folder / "suite"), "--agent", agent]
    assert main([*promote, "--db", str(store)]) == 0
    said = capsys.readouterr().out
    assert "the trace recorded only" not in said  # the whole request: every field compared
    code, result = run_suite(capsys, folder)
    assert code == 0, reasons(result)
    edit(folder / "weather_app.py", '"paris": 12', '"paris": 40')
    code, result = run_suite(capsys, folder)
    assert code == 1
    assert "step 1 (answer) tool_result_changed: tool call get_wind" in reasons(result)


def test_a_streaming_app_replays_its_streamed_trace(
    streamed: Promoted, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """How the app took its answers (streamed) is not what it asked: not drift."""
    folder = streamed.copy(tmp_path / "app")
    code, result = run_suite(capsys, folder)
    assert code == 0, reasons(result)
    edit(folder / "weather_app.py", '"paris": 21.0', '"paris": 25.0')
    code, result = run_suite(capsys, folder)
    assert code == 1
    assert "step 1 (answer) tool_result_changed: tool call get_weather" in reasons(result)


def test_a_later_turn_of_a_chat_replays_with_the_dialogue_it_was_handed(
    chatted: Promoted, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = chatted.copy(tmp_path / "app")
    case = yaml.safe_load((folder / "suite" / "cases" / "promoted.yaml").read_text())[0]
    assert case["input"] == [
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": ANSWER},
        {"role": "user", "content": FOLLOW_UP},
    ]
    code, result = run_suite(capsys, folder)
    assert code == 0, reasons(result)
    edit(folder / "weather_app.py", '"paris": 12', '"paris": 40')
    code, result = run_suite(capsys, folder)
    assert code == 1
    assert "step 1 (answer) tool_result_changed: tool call get_wind" in reasons(result)
