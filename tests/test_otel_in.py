"""OpenTelemetry in: spans from instrumentations nobody here wrote become replayable runs.

`examples/otel/plain_app.py` is a plain openai-SDK program (no agentbench in it), run in a
subprocess under the official `opentelemetry-instrumentation-openai-v2` (the latest
conventions with content as span attributes, and its v1.30 path with content as log events)
or OpenInference's instrumentation, talking to the bundled OpenAI-compatible server, and
exporting over real OTLP/HTTP to the collector stand-in, which writes the OTLP/JSON file
the CLI imports. The journey: import → show → promote into a new suite for the equivalent
agentbench agent → replay unchanged (exit 0) → change the tool → replay names the divergence.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from agentbench.cli import main
from agentbench.replay.stored_events import events_of
from agentbench.runtime.models import ToolCall
from agentbench.testing import OpenAICompatibleServer
from agentbench.testing.collector import OtlpCollector
from agentbench.trace import TraceStore

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "examples" / "otel" / "plain_app.py"
AGENT = ROOT / "examples" / "otel" / "weather_agent.py"
SYSTEM = "You answer weather questions. Use get_weather; never guess."

pytestmark = [pytest.mark.server, pytest.mark.slow]


def weather_model(request: dict[str, Any]) -> Any:
    """Asks for the weather once, then answers from the tool's result."""
    last = request["messages"][-1]
    if last["role"] == "tool":
        data = json.loads(last["content"])
        return f"It is {data['celsius']} °C in {data['city']}."
    return ToolCall(name="get_weather", arguments={"city": "Paris"})


def recorded(tmp: Path, instrumentation: str, *, no_content: bool = False) -> Path:
    """Run the plain program once under the instrumentation; the collector's file."""
    out = tmp / f"{instrumentation}.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    with OpenAICompatibleServer(responder=weather_model) as server, OtlpCollector(out) as collector:
        done = subprocess.run(
            [
                sys.executable,
                str(APP),
                "--base-url",
                server.base_url,
                "--otlp",
                collector.endpoint,
                "--instrumentation",
                instrumentation,
                *(["--no-content"] if no_content else []),
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "It is 21.0 °C in Paris."
    return out


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def imported(capsys: pytest.CaptureFixture[str], spans: Path, db: Path) -> str:
    code, out, err = cli(capsys, "traces", "import-otel", str(spans), "--db", str(db))
    assert code == 0, err
    assert "1 run(s) stored" in out and "2 model call(s), 1 tool call(s)" in out, out
    return out.split("stored ")[1].split()[0]


def the_events(db: Path, run_id: str) -> list[Any]:
    store = TraceStore(db)
    try:
        return events_of(store.run(run_id))
    finally:
        store.close()


@pytest.mark.parametrize("instrumentation", ["openai-v2", "openai-v2-events", "openinference"])
def test_a_plain_sdk_program_s_trace_is_stored_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], instrumentation: str
) -> None:
    db = tmp_path / "t.duckdb"
    run_id = imported(capsys, recorded(tmp_path, instrumentation), db)
    events = the_events(db, run_id)
    kinds = [e.kind for e in events]
    assert kinds == [
        "run_started",
        "model_request",
        "model_response",
        "tool_started",
        "tool_finished",
        "model_request",
        "model_response",
        "run_finished",
    ]
    first, second = events[1].request, events[5].request
    assert first["model"] == "gpt-4o-mini" and first["temperature"] == 0
    assert first["messages"] == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "How warm is it in Paris?"},
    ]
    call = events[2].response.tool_calls[0]
    assert (call.name, json.loads(call.arguments)) == ("get_weather", {"city": "Paris"})
    assert second["messages"][2]["tool_calls"][0]["id"] == call.id
    assert second["messages"][3] == {
        "role": "tool",
        "tool_call_id": call.id,
        "content": '{"city": "Paris", "celsius": 21.0}',
    }
    assert events[4].result.data == {"city": "Paris", "celsius": 21.0}
    assert events[6].response.text == "It is 21.0 °C in Paris."
    assert events[6].response.usage.input_tokens > 0
    assert events[-1].output == "It is 21.0 °C in Paris." and events[-1].stop_reason == "completed"
    # OpenInference records the whole request body, tool definitions included.
    assert ("tools" in first) == (instrumentation == "openinference")
    code, out, _ = cli(capsys, "traces", "show", run_id, "--db", str(db))
    assert code == 0 and "imported from" in out and "2 traces joined by conversation" in out
    assert "code 1.4.0" in out  # the program's service.version


def test_imported_trace_promotes_and_replays_against_an_agentbench_agent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "t.duckdb"
    run_id = imported(capsys, recorded(tmp_path, "openai-v2"), db)
    agent_file = tmp_path / "app" / "weather_agent.py"
    agent_file.parent.mkdir()
    shutil.copy(AGENT, agent_file)
    suite = tmp_path / "suite"
    code, out, err = cli(
        capsys,
        "promote",
        run_id,
        "--suite",
        str(suite),
        "--agent",
        f"{agent_file}:agent",
        "--db",
        str(db),
    )
    assert code == 0, err
    assert f"new suite suite in {suite}" in out
    cassette = next((suite / "cassettes").glob("*.yaml"))
    code, out, err = cli(capsys, "replay", str(cassette), "--db", str(tmp_path / "r.duckdb"))
    assert code == 0, out + err
    assert "behaviour unchanged" in out and "verdict: unchanged" in out
    # openai-v2 does not record tool definitions: the agent's are not compared, and said so.
    assert "request drift" not in out and "tools: added" not in out
    assert "not compared: tools (the trace the recording was made from did not" in out
    # So the promoted case passes `agentbench run` too, where drift would fail it.
    code, out, err = cli(
        capsys, "run", str(suite), "--db", str(tmp_path / "e.duckdb"), "--no-report"
    )
    assert code == 0, out + err
    # A changed tool: the replay names the step where behaviour diverged.
    agent_file.write_text(agent_file.read_text().replace('"paris": 21.0', '"paris": 25.0'))
    code, out, err = cli(capsys, "replay", str(cassette), "--db", str(tmp_path / "r.duckdb"))
    assert code == 1, out + err
    assert "tool_result_changed" in out or "result changed" in out, out
    assert "get_weather" in out and "25.0" in out


def test_a_tool_result_spelled_another_way_is_not_drift(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The program sent `json.dumps(result)`; an agentbench tool returning the same dict is
    sent as compact JSON. Against a recording from a trace, the data is what is compared."""
    db = tmp_path / "t.duckdb"
    run_id = imported(capsys, recorded(tmp_path, "openai-v2"), db)
    agent_file = tmp_path / "app" / "weather_agent.py"
    agent_file.parent.mkdir()
    source = AGENT.read_text()
    dumped = 'return json.dumps({"city": city, "celsius": CELSIUS.get(city.lower())})'
    assert dumped in source
    source = source.replace("def get_weather(city: str) -> str:", "def get_weather(city: str):")
    agent_file.write_text(source.replace(dumped, dumped.replace("json.dumps(", "(")))
    suite = tmp_path / "suite"
    code, _, err = cli(
        capsys,
        "promote",
        run_id,
        "--suite",
        str(suite),
        "--agent",
        f"{agent_file}:agent",
        "--db",
        str(db),
    )
    assert code == 0, err
    code, out, err = cli(
        capsys, "run", str(suite), "--db", str(tmp_path / "e.duckdb"), "--no-report", "--json"
    )
    assert code == 0, out + err
    assert json.loads(out)["results"][0]["drifts"] == []


def test_promote_names_the_steps_after_the_suite_s_agent_or_says_why_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An imported run bears its service's name; its case's steps are recorded under the
    name of the agent that will replay it — unless that agent cannot be imported here."""
    db = tmp_path / "t.duckdb"
    run_id = imported(capsys, recorded(tmp_path, "openai-v2"), db)
    app = tmp_path / "app.py"
    app.write_text("def weather(question, target):\n    return 'sunny'\n")
    code, _, err = cli(
        capsys,
        "promote",
        run_id,
        "--suite",
        str(tmp_path / "ok"),
        "--agent",
        f"{app}:weather",
        "--db",
        str(db),
    )
    assert code == 0, err
    info = yaml.safe_load(next((tmp_path / "ok" / "cassettes").glob("*.yaml")).read_text())
    steps = info["metadata"]["agentbench"]["trajectory"]
    assert {s["agent"] for s in steps} == {s["signature"][1] for s in steps} == {"weather"}
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('no settings here')\n\ndef weather(q, t):\n    pass\n")
    code, _, err = cli(
        capsys,
        "promote",
        run_id,
        "--suite",
        str(tmp_path / "kept"),
        "--agent",
        f"{broken}:weather",
        "--db",
        str(db),
    )
    assert code == 0, err
    assert "could not be loaded" in err and "no settings here" in err
    assert "the case's steps keep the trace's agent name" in err
    info = yaml.safe_load(next((tmp_path / "kept" / "cassettes").glob("*.yaml")).read_text())
    assert {s["agent"] for s in info["metadata"]["agentbench"]["trajectory"]} == {"weather-app"}


def test_spans_without_content_import_with_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spans = recorded(tmp_path, "openai-v2", no_content=True)
    code, said, _ = cli(
        capsys, "traces", "import-otel", str(spans), "--db", str(tmp_path / "t.duckdb")
    )
    assert code == 0
    assert "cannot be replayed: the span carries no message content" in said
    assert "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only" in said
    assert "2 traces joined" not in said  # without content, calls cannot be joined either


def _span_line(attributes: dict[str, Any], name: str = "chat gpt-4", **span: Any) -> str:
    encoded = [
        {"key": key, "value": {"intValue": str(v)} if isinstance(v, int) else {"stringValue": v}}
        for key, v in attributes.items()
    ]
    body = {
        "traceId": "0af7651916cd43dd8448eb211c80319c",
        "spanId": "b7ad6b7169203331",
        "name": name,
        "kind": 3,
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": "1700000000500000000",
        "attributes": encoded,
        **span,
    }
    return json.dumps(
        {
            "resourceSpans": [
                {"resource": {}, "scopeSpans": [{"scope": {"name": "x"}, "spans": [body]}]}
            ]
        }
    )


def test_the_oldest_conventions_indexed_prompt_attributes_are_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spans = tmp_path / "old.jsonl"
    spans.write_text(
        _span_line(
            {
                "gen_ai.system": "openai",
                "gen_ai.request.model": "gpt-4",
                "gen_ai.prompt.0.role": "system",
                "gen_ai.prompt.0.content": "Be brief.",
                "gen_ai.prompt.1.role": "user",
                "gen_ai.prompt.1.content": "Hi",
                "gen_ai.completion.0.role": "assistant",
                "gen_ai.completion.0.content": "Hello.",
                "gen_ai.completion.0.finish_reason": "stop",
                "gen_ai.usage.input_tokens": 9,
                "gen_ai.usage.output_tokens": 2,
            }
        )
        + "\n"
    )
    db = tmp_path / "t.duckdb"
    code, out, err = cli(capsys, "traces", "import-otel", str(spans), "--db", str(db))
    assert code == 0, err
    run_id = out.split("stored ")[1].split()[0]
    events = the_events(db, run_id)
    assert events[1].request["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
    ]
    assert events[2].response.text == "Hello." and events[2].response.usage.output_tokens == 2


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{not json\n", "bad.jsonl:1: not JSON"),
        (
            '{"resourceSpans": [{"scopeSpans": [{"spans": '
            '[{"traceId": "zz", "spanId": "b7ad6b7169203331"}]}]}]}\n',
            "traceId 'zz' is neither 32 hex digits nor base64",
        ),
        (
            _span_line(
                {"gen_ai.operation.name": "chat", "gen_ai.input.messages": '[{"role": "user"}]'}
            )
            + "\n",
            "attribute gen_ai.input.messages: message 0: parts: expected a list of parts",
        ),
        (
            _span_line({"gen_ai.operation.name": "chat", "gen_ai.input.messages": "[oops"}) + "\n",
            "attribute gen_ai.input.messages is not JSON",
        ),
        (
            '{"something": "else"}\n',
            "expected an OTLP/JSON object with resourceSpans or resourceLogs",
        ),
        (_span_line({"http.method": "GET"}, name="GET /") + "\n", "no GenAI spans in"),
    ],
)
def test_malformed_files_name_the_line_and_what_was_expected(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, expected: str
) -> None:
    spans = tmp_path / "bad.jsonl"
    spans.write_text(content)
    code, out, err = cli(
        capsys, "traces", "import-otel", str(spans), "--db", str(tmp_path / "t.duckdb")
    )
    assert code == 2, out + err
    assert expected in err and "Traceback" not in err
