"""OpenTelemetry out: `OTelHook` spans over a real OTLP/HTTP exporter, and `traces export-otel`.

The hook is given a real SDK `TracerProvider` whose `OTLPSpanExporter` posts protobuf to the
collector stand-in on 127.0.0.1, which decodes what arrived; nothing is read back from the
SDK's memory. The export is checked through the CLI and read back by the importer: a property
test over generated runs (tool failures, rejected calls, unicode, handoffs) and the shipped
golden suites' runs checks that agentbench → OTel → agentbench keeps every field replay needs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from agentbench import Agent, BusinessFailure, Runner, ScriptedModel, ToolCall, tool
from agentbench.cli import main
from agentbench.otel import OTelHook, export_runs, import_files
from agentbench.replay.stored_events import events_of
from agentbench.testing.collector import OtlpCollector
from agentbench.trace import TraceStore

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

ROOT = Path(__file__).resolve().parents[1]
SECRET = "sk-live-" + "Q7x9" * 8


@tool(effect="read_only")
def lookup(city: str) -> dict[str, Any]:
    """Look a city up."""
    if city == "nowhere":
        raise BusinessFailure(f"no such city: {city}")
    if city == "boom":
        raise RuntimeError("the lookup service is down")
    return {"city": city, "note": f"token {SECRET}" if city == "leak" else "fine"}


def attributes(span: dict[str, Any]) -> dict[str, Any]:
    found = {}
    for item in span.get("attributes", []):
        value = item["value"]
        found[item["key"]] = next(iter(value.values())) if value else None
    return found


def traced(collector: OtlpCollector, *, content: bool | None) -> tuple[OTelHook, TracerProvider]:
    provider = TracerProvider()
    provider.add_span_processor(
        SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{collector.endpoint}/v1/traces"))
    )
    return OTelHook(tracer_provider=provider, capture_content=content), provider


def test_hook_sends_genai_spans_over_otlp_http() -> None:
    script = [
        ToolCall("lookup", {"city": "Paris"}),
        ToolCall("lookup", {"city": "boom"}),
        "Paris is fine.",
    ]
    agent = Agent(name="guide", instructions="Answer.", tools=[lookup])
    with OtlpCollector() as collector:
        hook, provider = traced(collector, content=False)
        result = Runner.run_sync(agent, "How is Paris?", model=ScriptedModel(script), hooks=[hook])
        provider.shutdown()
    assert collector.headers[0]["content-type"] == "application/x-protobuf"
    spans = collector.spans()
    names = sorted(span["name"] for span in spans)
    assert names == [
        "chat scripted",
        "chat scripted",
        "chat scripted",
        "execute_tool lookup",
        "execute_tool lookup",
        "invoke_agent guide",
    ]
    by_name = {span["name"]: span for span in spans}
    run = by_name["invoke_agent guide"]
    run_attrs = attributes(run)
    assert run_attrs["gen_ai.operation.name"] == "invoke_agent"
    assert run_attrs["gen_ai.agent.name"] == "guide"
    assert run_attrs["agentbench.stop_reason"] == "completed"
    assert run_attrs["gen_ai.conversation.id"] == result.run_id
    for span in spans:
        assert span["traceId"] == run["traceId"] and len(span["traceId"]) == 32
        if span is not run:
            assert span["parentSpanId"] == run["spanId"]
    chat = attributes(next(s for s in spans if s["name"].startswith("chat")))
    assert chat["gen_ai.operation.name"] == "chat"
    assert chat["gen_ai.request.model"] == "scripted"
    assert chat["gen_ai.response.finish_reasons"] == {"values": [{"stringValue": "tool_calls"}]}
    assert int(chat["gen_ai.usage.input_tokens"]) > 0
    tools = [
        attributes(s) | {"status": s.get("status", {})}
        for s in spans
        if "execute_tool" in s["name"]
    ]
    assert [t["agentbench.tool.result_kind"] for t in tools] == ["ok", "system_error"]
    assert tools[1]["status"].get("code") == 2 and tools[1]["error.type"] == "system_error"
    assert tools[0]["gen_ai.tool.call.id"] and tools[0]["gen_ai.tool.name"] == "lookup"
    # Content is opt-in: none of it went out.
    assert not any(
        key in attributes(span)
        for span in spans
        for key in ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments")
    )


def test_hook_content_is_opt_in_by_environment_and_scrubbed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "span_only")
    agent = Agent(name="guide", instructions="Answer.", tools=[lookup])
    script = [ToolCall("lookup", {"city": "leak"}), "done"]
    with OtlpCollector() as collector:
        hook, provider = traced(collector, content=None)
        Runner.run_sync(agent, "leak please", model=ScriptedModel(script), hooks=[hook])
        provider.shutdown()
    spans = collector.spans()
    wire = json.dumps(collector.requests)
    assert SECRET not in wire  # the tool result carried it; the redactor scrubbed it
    chat = [attributes(s) for s in spans if s["name"].startswith("chat")]
    assert "gen_ai.provider.name" in chat[0]  # the latest conventions' name, as opted in
    sent = json.loads(chat[0]["gen_ai.input.messages"])
    assert sent[0] == {
        "role": "system",
        "parts": [{"type": "text", "content": sent[0]["parts"][0]["content"]}],
    }
    assert sent[-1] == {"role": "user", "parts": [{"type": "text", "content": "leak please"}]}
    answered = json.loads(chat[0]["gen_ai.output.messages"])
    assert answered[0]["parts"][0]["type"] == "tool_call"
    assert answered[0]["parts"][0]["arguments"] == {"city": "leak"}
    assert answered[0]["finish_reason"] == "tool_calls"
    tool_span = attributes(next(s for s in spans if s["name"] == "execute_tool lookup"))
    assert json.loads(tool_span["gen_ai.tool.call.arguments"]) == {"city": "leak"}
    assert (
        "REDACTED" in tool_span["gen_ai.tool.call.result"]
        or SECRET not in tool_span["gen_ai.tool.call.result"]
    )


def test_handoff_runs_are_child_spans() -> None:
    specialist = Agent(name="refunds", instructions="Refund.")
    front = Agent(name="front", instructions="Route.", handoffs=[specialist])
    script = [
        ToolCall("transfer_to_refunds", {"reason": "refund", "summary": "wants a refund"}),
        "Refunded.",
    ]
    with OtlpCollector() as collector:
        hook, provider = traced(collector, content=True)
        Runner.run_sync(front, "refund me", model=ScriptedModel(script), hooks=[hook])
        provider.shutdown()
    spans = {s["name"]: s for s in collector.spans()}
    assert spans["invoke_agent refunds"]["parentSpanId"] == spans["invoke_agent front"]["spanId"]
    events = [e["name"] for e in spans["invoke_agent front"].get("events", [])]
    assert "agentbench.handoff" in events


# -- export, and the round trip -------------------------------------------------------------------
def comparable(store: TraceStore, run_id: str) -> list[dict[str, Any]]:
    """The run's events as replay reads them, without what a round trip may renumber."""
    out = []
    for event in events_of(store.run(run_id)):
        if event.kind == "text_delta":
            continue
        fields = event.model_dump(mode="json", exclude={"run_id", "seq", "ts"})
        fields.pop("parent_run_id", None)
        fields.pop("child_run_id", None)
        fields.pop("duration_ms", None)
        if event.kind == "model_response":
            fields["response"].pop("raw", None)
            fields["response"]["latency_ms"] = round(fields["response"]["latency_ms"], 3)
        if event.kind == "tool_finished":
            fields["result"].pop("duration_ms")
        out.append(fields)
    return out


def assert_round_trip(original: TraceStore, tmp: Path) -> int:
    runs = original.runs(limit=100_000)
    out = tmp / "spans.jsonl"
    export_runs(original, [run.run_id for run in runs], out, content=True)
    copy = TraceStore(tmp / "copy.duckdb")
    summary = import_files(copy, [out])
    assert len(summary.stored) == len(runs)
    by_start = {(r.agent, r.started_at): r for r in copy.runs(limit=100_000)}
    for run in runs:
        twin = by_start[(run.agent, run.started_at)]
        assert comparable(copy, twin.run_id) == comparable(original, run.run_id), run.run_id
        assert (twin.parent_run_id is None) == (run.parent_run_id is None)
        assert twin.stop_reason == run.stop_reason and twin.output == run.output
    copy.close()
    return len(runs)


CITIES = st.sampled_from(["Paris", "nowhere", "boom", "Zürich 🌧", "leak", 'qu"ote'])
STEPS = st.lists(
    st.one_of(
        st.builds(lambda c: ToolCall("lookup", {"city": c}), CITIES),
        st.builds(
            lambda c: [ToolCall("lookup", {"city": c}), ToolCall("lookup", {"city": "Paris"})],
            CITIES,
        ),
        st.just(ToolCall("lookup", "{not json")),
        st.just(ToolCall("no_such_tool", {})),
    ),
    max_size=4,
)


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=STEPS, answer=st.text(min_size=1, max_size=40))
def test_round_trip_keeps_what_replay_needs(
    tmp_path_factory: pytest.TempPathFactory, steps: list[Any], answer: str
) -> None:
    tmp = tmp_path_factory.mktemp("roundtrip")
    store = TraceStore(tmp / "original.duckdb")
    agent = Agent(name="guide", instructions="Answer with the lookup tool.", tools=[lookup])
    Runner.run_sync(agent, "Where?", model=ScriptedModel([*steps, answer]), store=store)
    store.flush()
    assert assert_round_trip(store, tmp) == 1
    store.close()


def test_every_golden_run_survives_the_round_trip_through_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "golden.duckdb"
    assert main(["run", str(ROOT / "golden"), "--no-report", "--db", str(db)]) == 0
    out = tmp_path / "golden.jsonl"
    assert main(["traces", "export-otel", "--db", str(db), "--out", str(out), "--content"]) == 0
    said = capsys.readouterr().out
    assert "conversation(s) to" in said
    copy_db = tmp_path / "copy.duckdb"
    assert main(["traces", "import-otel", str(out), "--db", str(copy_db)]) == 0
    said = capsys.readouterr().out
    assert "without content" not in said
    original = TraceStore(db)
    copy = TraceStore(copy_db)
    runs = original.runs(limit=100_000)
    assert len(copy.runs(limit=100_000)) == len(runs) > 50
    by_start = {(r.agent, r.started_at): r for r in copy.runs(limit=100_000)}
    for run in runs:
        twin = by_start[(run.agent, run.started_at)]
        assert comparable(copy, twin.run_id) == comparable(original, run.run_id), run.run_id
    # Importing the same file again stores nothing twice.
    assert main(["traces", "import-otel", str(out), "--db", str(copy_db)]) == 0
    assert f", {len(runs)} already there" in capsys.readouterr().out


def test_export_without_content_says_it_cannot_be_replayed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = TraceStore(tmp_path / "t.duckdb")
    agent = Agent(name="guide", instructions="Answer.", tools=[lookup])
    result = Runner.run_sync(
        agent,
        "Where?",
        model=ScriptedModel([ToolCall("lookup", {"city": "Paris"}), "ok"]),
        store=store,
    )
    store.close()
    out = tmp_path / "bare.jsonl"
    code = main(
        [
            "traces",
            "export-otel",
            result.run_id,
            "--db",
            str(tmp_path / "t.duckdb"),
            "--out",
            str(out),
        ]
    )
    captured = capsys.readouterr()
    assert code == 0 and "cannot be imported for replay" in captured.err
    assert "gen_ai.input.messages" not in out.read_text()
    assert main(["traces", "import-otel", str(out), "--db", str(tmp_path / "in.duckdb")]) == 0
    said = capsys.readouterr().out
    assert "cannot be replayed: the span carries no message content" in said
    imported = said.split("stored ")[1].split()[0]
    code = main(
        [
            "promote",
            imported,
            "--suite",
            str(tmp_path / "suite"),
            "--agent",
            "x.py:agent",
            "--db",
            str(tmp_path / "in.duckdb"),
        ]
    )
    captured = capsys.readouterr()
    assert code == 2 and "cannot be promoted" in captured.err
    assert not (tmp_path / "suite").exists()
    # The export is deterministic: the same runs, the same ids.
    again = tmp_path / "again.jsonl"
    main(
        [
            "traces",
            "export-otel",
            result.run_id,
            "--db",
            str(tmp_path / "t.duckdb"),
            "--out",
            str(again),
        ]
    )
    assert again.read_text() == out.read_text()


def test_without_the_otel_extra_the_commands_say_what_to_install(tmp_path: Path) -> None:
    script = (
        "import sys; sys.modules['opentelemetry'] = None\n"
        "from agentbench.cli import main\n"
        f"sys.exit(main(['traces', 'import-otel', {str(tmp_path)!r}]))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert "pip install 'agentbench[otel]'" in done.stderr and "Traceback" not in done.stderr
    imported = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, agentbench.cli; "
            "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))",
        ],
        capture_output=True,
        text=True,
    )
    assert imported.stdout.strip() == "[]"  # the CLI starts without importing OpenTelemetry


def test_an_export_is_the_same_file_from_another_process(tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "t.duckdb")
    agent = Agent(name="guide", instructions="Answer.", tools=[lookup])
    script = [ToolCall("lookup", {"city": "Paris"}), "ok"]
    Runner.run_sync(agent, "Where?", model=ScriptedModel(script), store=store)
    store.close()
    outs = []
    for name in ("one", "two"):  # separate processes: nothing shared but the store
        out = tmp_path / f"{name}.jsonl"
        command = [sys.executable, "-m", "agentbench", "traces", "export-otel", "--content"]
        command += ["--db", str(tmp_path / "t.duckdb"), "--out", str(out)]
        subprocess.run(command, check=True, capture_output=True)
        outs.append(out.read_text())
    assert outs[0] == outs[1] and '"service.name"' in outs[0]


def test_a_tool_result_sent_back_as_an_error_keeps_it_through_otel() -> None:
    from agentbench.otel.messages import from_parts, to_parts

    failed = {"role": "tool", "tool_call_id": "toolu_02", "content": "no card", "is_error": True}
    exported = to_parts(failed)
    assert exported["parts"][0]["is_error"] is True
    assert from_parts(exported, 0) == failed
    ok = {"role": "tool", "tool_call_id": "toolu_01", "content": "found"}
    assert "is_error" not in to_parts(ok)["parts"][0]
    assert from_parts(to_parts(ok), 0) == ok
