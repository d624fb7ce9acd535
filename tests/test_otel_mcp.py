"""OpenTelemetry out, by the conventions' shapes: tool definitions flat, MCP calls as MCP.

`gen_ai.tool.definitions` goes out in the GenAI conventions' flat shape (`{"type": "function",
"name", "description", "parameters"}`), and the importer reads it back as well as OpenAI's
nested shape that older exports hold. A call to an MCP server's tool carries the MCP
conventions' attributes on its `execute_tool` span, checked over OTLP/HTTP against the
project's own fault server (tests/mcp_servers/faults.py) over stdio and over HTTP, and
mcp-server-time for a JSON-RPC error. `mcp_call_attributes` is the convention for a program
making its own MCP spans.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import SpanKind

from agentbench import Agent, Runner, ScriptedModel, ToolCall, tool
from agentbench.otel import OTelHook, export_runs, import_files
from agentbench.otel.mcp import mcp_call_attributes, span_kind, tool_error_attributes
from agentbench.otel.messages import tool_definitions_in, tool_definitions_out
from agentbench.replay.stored_events import events_of
from agentbench.testing.collector import OtlpCollector
from agentbench.trace import TraceStore

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

ROOT = Path(__file__).resolve().parents[1]


@tool(effect="read_only")
def lookup(city: str) -> dict[str, Any]:
    """Look a city up."""
    return {"city": city}


def attributes(span: dict[str, Any]) -> dict[str, Any]:
    found = {}
    for item in span.get("attributes", []):
        value = item["value"]
        found[item["key"]] = next(iter(value.values())) if value else None
    return found


def traced_run(agent: Agent, script: list[Any], *, content: bool = False) -> list[dict]:
    """The spans a run of `agent` sends over OTLP/HTTP through `OTelHook`."""
    with OtlpCollector() as collector:
        provider = TracerProvider()
        provider.add_span_processor(
            SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{collector.endpoint}/v1/traces"))
        )
        hook = OTelHook(tracer_provider=provider, capture_content=content)
        Runner.run_sync(agent, "go", model=ScriptedModel(script), hooks=[hook])
        provider.shutdown()
    return collector.spans()


def tool_spans(spans: list[dict]) -> dict[str, dict[str, Any]]:
    return {
        attributes(s)["gen_ai.tool.name"]: attributes(s)
        | {"kind": s["kind"], **s.get("status", {})}
        for s in spans
        if s["name"].startswith("execute_tool ")
    }


LOOKUP_FLAT = {
    "type": "function",
    "name": "lookup",
    "parameters": lookup.parameters,
    "description": "Look a city up.",
}


# -- tool definitions --------------------------------------------------------------------------
def test_tool_definitions_go_out_in_the_flat_shape() -> None:
    agent = Agent(name="guide", instructions="Answer.", tools=[lookup])
    spans = traced_run(agent, [ToolCall("lookup", {"city": "Paris"}), "fine"], content=True)
    chats = [attributes(s) for s in spans if s["name"].startswith("chat ")]
    assert len(chats) == 2
    for chat in chats:
        definitions = json.loads(chat["gen_ai.tool.definitions"])
        assert definitions == [LOOKUP_FLAT]
        assert "function" not in definitions[0]
        assert definitions[0]["parameters"]["properties"]["city"]["type"] == "string"


def test_the_flat_shape_and_the_nested_one_read_back_the_same() -> None:
    nested = [lookup.openai_schema()]
    assert tool_definitions_out(nested) == [LOOKUP_FLAT]
    assert tool_definitions_in([LOOKUP_FLAT], whole=True) == nested
    assert tool_definitions_in(nested) == nested  # what agentbench wrote before
    # Another instrumentation's flat entries: OpenAI's function fields, nulls left out.
    other = [
        {"type": "function", "name": "f", "description": None, "parameters": None, "x": 1},
        {"name": "g", "parameters": {"type": "object"}, "strict": True},
        {"type": "custom", "name": "grammar", "format": {"type": "text"}},
        "not a tool",
    ]
    assert tool_definitions_in(other) == [
        {"type": "function", "function": {"name": "f"}},
        {
            "type": "function",
            "function": {"name": "g", "parameters": {"type": "object"}, "strict": True},
        },
        {"type": "custom", "custom": {"name": "grammar", "format": {"type": "text"}}},
    ]
    # An entry of no shape the conventions know is kept as it is.
    assert tool_definitions_out([{"type": "x", "x": {}, "extra": 1}]) == [
        {"type": "x", "x": {}, "extra": 1}
    ]


def definitions_in(text: str) -> list[Any]:
    """The tool definitions of every span of an OTLP/JSON export, parsed."""
    found = []
    for line in text.splitlines():
        for resource in json.loads(line)["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    for item in span.get("attributes", []):
                        if item["key"] == "gen_ai.tool.definitions":
                            found.append(json.loads(item["value"]["stringValue"]))
    return found


def _nest_definitions(line: str) -> str:
    """An export line with its tool definitions in OpenAI's nested shape (an older export)."""
    document = json.loads(line)
    for resource in document["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                for item in span.get("attributes", []):
                    if item["key"] == "gen_ai.tool.definitions":
                        flat = json.loads(item["value"]["stringValue"])
                        nested = tool_definitions_in(flat, whole=True)
                        assert nested != flat
                        item["value"]["stringValue"] = json.dumps(nested)
    return json.dumps(document)


@pytest.mark.parametrize("shape", ["flat", "nested"])
def test_the_import_reads_both_shapes_of_an_export(tmp_path: Path, shape: str) -> None:
    store = TraceStore(tmp_path / "original.duckdb")
    agent = Agent(name="guide", instructions="Answer.", tools=[lookup])
    script = [ToolCall("lookup", {"city": "Paris"}), "fine"]
    Runner.run_sync(agent, "Where?", model=ScriptedModel(script), store=store)
    store.flush()
    out = tmp_path / "spans.jsonl"
    [run] = store.runs(limit=10)
    export_runs(store, [run.run_id], out, content=True)
    text = out.read_text(encoding="utf-8")
    assert definitions_in(text) == [[LOOKUP_FLAT], [LOOKUP_FLAT]]
    if shape == "nested":
        out.write_text("\n".join(_nest_definitions(line) for line in text.splitlines()) + "\n")
    copy = TraceStore(tmp_path / "copy.duckdb")
    summary = import_files(copy, [out])
    assert len(summary.stored) == 1
    [twin] = copy.runs(limit=10)
    requests = [e.request for e in events_of(copy.run(twin.run_id)) if e.kind == "model_request"]
    originals = [e.request for e in events_of(store.run(run.run_id)) if e.kind == "model_request"]
    assert [r["tools"] for r in requests] == [r["tools"] for r in originals]
    assert requests[0]["tools"] == [lookup.openai_schema()]
    copy.close()
    store.close()


# -- MCP tool calls ----------------------------------------------------------------------------
mcp = pytest.importorskip("mcp")

from agentbench.runtime.mcp import HttpServer, StdioServer, close_all, mcp_tools  # noqa: E402
from tests.mcp_servers import serving_over_http  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def _stop_servers() -> Any:
    yield
    close_all()


def faults(**env: str) -> StdioServer:
    return StdioServer([sys.executable, "-m", "tests.mcp_servers.faults"], cwd=ROOT, env=env)


def test_an_mcp_tool_call_carries_the_mcp_attributes_over_stdio() -> None:
    tools = mcp_tools(faults(RUN="otel-stdio"), include=["echo", "refuse"], prefix="faults")
    agent = Agent(name="mixed", tools=[*tools, lookup])
    script = [
        [
            ToolCall("faults_echo", {"text": "hi"}),
            ToolCall("faults_refuse", {"account": "A-17"}),
            ToolCall("lookup", {"city": "Paris"}),
        ],
        "done",
    ]
    spans = tool_spans(traced_run(agent, script))
    echo, refused, python = spans["faults_echo"], spans["faults_refuse"], spans["lookup"]
    assert echo["gen_ai.operation.name"] == "execute_tool"
    assert echo["mcp.method.name"] == "tools/call"
    assert echo["network.transport"] == "pipe"
    assert echo["mcp.protocol.version"]  # what the session agreed on, e.g. 2025-11-25
    assert "mcp.session.id" not in echo  # stdio has no session id
    assert echo["agentbench.mcp.server"] == "stdio: python -m tests.mcp_servers.faults"
    assert echo["agentbench.mcp.tool.remote_name"] == "echo"
    assert "error.type" not in echo and echo.get("code", 0) == 0
    # The tool's own "no" (isError) is a failed call to the conventions: error.type tool_error.
    assert refused["error.type"] == "tool_error" and refused["code"] == 2
    assert refused["agentbench.tool.result_kind"] == "business_failure"
    assert not refused.get("message")  # the tool's words are content: not in the status
    # The span stays the GenAI execute_tool span (the MCP attributes are added to it).
    assert echo["kind"] == refused["kind"] == 1  # SPAN_KIND_INTERNAL in OTLP
    # A Python tool beside it is no MCP call.
    assert not any(key.startswith(("mcp.", "network.")) for key in python)


def test_a_python_tool_named_like_an_mcp_tool_is_not_one() -> None:
    mcp_tools(faults(RUN="otel-names"), include=["echo"])  # an MCP tool `echo` in this process

    @tool(name="echo")
    def local_echo(text: str) -> str:
        """Echo, in Python."""
        return text

    agent = Agent(name="local", tools=[local_echo])
    spans = tool_spans(traced_run(agent, [ToolCall("echo", {"text": "hi"}), "done"]))
    assert "mcp.method.name" not in spans["echo"]


def test_a_json_rpc_error_is_the_error_type() -> None:
    pytest.importorskip("mcp_server_time")
    server = StdioServer([sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"])
    [ghost] = mcp_tools(server, include=["get_current_time"])
    ghost.remote_name = "no_such_tool"  # the server answers an unknown tool with -32602
    agent = Agent(name="clock", tools=[ghost])
    script = [ToolCall("get_current_time", {"timezone": "UTC"}), "done"]
    span = tool_spans(traced_run(agent, script))["get_current_time"]
    assert span["error.type"] == "-32602" and span["rpc.response.status_code"] == "-32602"
    assert span["code"] == 2 and "no_such_tool" in span["message"]


def test_of_two_tools_alike_but_for_their_server_the_span_names_the_newest() -> None:
    # A run's spans find its MCP tools among the process's by name and schema. An older tool
    # alike but for its server (an earlier agent's, not yet collected) is not the run's.
    from agentbench.otel.mcp import McpToolIndex
    from agentbench.runtime.mcp.tools import McpTool

    spec = {"name": "echo", "description": "Echo.", "inputSchema": {"type": "object"}}

    def made(port: int) -> McpTool:
        server = HttpServer(f"http://127.0.0.1:{port}/mcp")
        return McpTool(server, spec, name="echo", timeout_s=5, max_result_chars=100)

    older, newer = made(41001), made(41002)
    found = McpToolIndex().tools_of([newer.openai_schema()])["echo"]
    assert found is newer and found is not older
    assert McpToolIndex.started(found)["server.port"] == 41002


def test_an_mcp_tool_call_over_http_carries_session_and_server() -> None:
    with serving_over_http() as url:
        server = HttpServer(url, headers={"Authorization": "Bearer secret-token"})
        tools = mcp_tools(server, include=["echo"])
        agent = Agent(name="remote", tools=tools)
        spans = traced_run(agent, [ToolCall("echo", {"text": "over http"}), "done"])
    echo = tool_spans(spans)["echo"]
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    assert echo["mcp.method.name"] == "tools/call"
    assert echo["network.transport"] == "tcp" and echo["network.protocol.name"] == "http"
    assert echo["server.address"] == "127.0.0.1" and int(echo["server.port"]) == port
    assert echo["mcp.session.id"] and echo["mcp.protocol.version"]
    assert "secret-token" not in json.dumps(spans)


# -- the convention for a program's own MCP spans ----------------------------------------------
def test_mcp_call_attributes_for_a_client_tool_call() -> None:
    name, found = mcp_call_attributes(
        "tools/call",
        tool="get-weather",
        transport="stdio",
        session_id="8267461134f24305af708e66b8eda71a",
        request_id=3,
        protocol_version="2025-06-18",
        error_type=None,
    )
    assert name == "tools/call get-weather"
    assert found == {
        "mcp.method.name": "tools/call",
        "gen_ai.tool.name": "get-weather",
        "gen_ai.operation.name": "execute_tool",
        "jsonrpc.request.id": "3",
        "mcp.session.id": "8267461134f24305af708e66b8eda71a",
        "mcp.protocol.version": "2025-06-18",
        "network.transport": "pipe",
    }
    assert span_kind("client") is SpanKind.CLIENT and span_kind("server") is SpanKind.SERVER


def test_mcp_call_attributes_for_errors_sides_and_other_methods() -> None:
    # On the client's span every JSON-RPC error code is an error…
    _, client = mcp_call_attributes(
        "tools/call", tool="t", transport="http", request_id="r-7", rpc_status_code=-32602
    )
    assert client["error.type"] == "-32602" and client["rpc.response.status_code"] == "-32602"
    assert client["network.transport"] == "tcp" and client["network.protocol.name"] == "http"
    # …on the server's, invalid params is the caller's mistake, and an internal error is not.
    _, served = mcp_call_attributes(
        "tools/call", tool="t", transport="http", rpc_status_code=-32602, side="server"
    )
    assert "error.type" not in served and served["rpc.response.status_code"] == "-32602"
    _, broke = mcp_call_attributes(
        "tools/call", tool="t", transport="http", rpc_status_code=-32603, side="server"
    )
    assert broke["error.type"] == "-32603"
    _, refused = mcp_call_attributes(
        "tools/call", tool="t", transport="pipe", error_type="tool_error"
    )
    assert refused["error.type"] == "tool_error"
    # The peer's address: the server's on the client's span, the client's on the server's.
    _, peer = mcp_call_attributes(
        "initialize", transport="http", address="10.1.2.80", port=8080, side="server"
    )
    assert peer["client.address"] == "10.1.2.80" and peer["client.port"] == 8080
    assert "server.address" not in peer
    # A method other than tools/call is no execute_tool; a notification has no request id.
    name, listed = mcp_call_attributes("notifications/initialized", transport="stdio")
    assert name == "notifications/initialized"
    assert "gen_ai.operation.name" not in listed and "jsonrpc.request.id" not in listed
    name, prompt = mcp_call_attributes(
        "prompts/get", prompt="analyze-code", transport="stdio", request_id=1
    )
    assert name == "prompts/get analyze-code" and prompt["gen_ai.prompt.name"] == "analyze-code"
    with pytest.raises(ValueError, match="unknown MCP transport"):
        mcp_call_attributes("ping", transport="carrier-pigeon")


def test_the_runtimes_mcp_failures_map_to_error_types() -> None:
    assert tool_error_attributes("ok", None) == {}
    assert tool_error_attributes("business_failure", "A-17 is closed") == {
        "error.type": "tool_error"
    }
    answered = "MCP server (stdio: python -m x) answered 'ghost' with error -32602: Unknown tool"
    assert tool_error_attributes("system_error", answered) == {
        "error.type": "-32602",
        "rpc.response.status_code": "-32602",
    }
    late = "tool 'slow' timed out after 1 s: MCP server (stdio: x) did not answer 'slow' in time"
    assert tool_error_attributes("system_error", late) == {"error.type": "timeout"}
    # A tool's own text that happens to read like one is not taken for it.
    said = "the server said: answered 'x' with error -1: no"
    assert tool_error_attributes("system_error", said) == {"error.type": "system_error"}


@pytest.mark.parametrize(
    ("suite", "transport"),
    [("openai_agents_mcp", "pipe"), ("pydantic_ai_mcp", "tcp")],
)
def test_a_boundary_targets_mcp_calls_through_the_proxy_carry_the_mcp_attributes(
    suite: str, transport: str
) -> None:
    # A framework's own MCP client, reaching the case's proxy (stdio through the bridge, or
    # Streamable HTTP), replayed from the shipped cassettes with no server: its tool calls
    # are MCP calls to the conventions, and the injected fault is a failed one.
    import asyncio

    from agentbench.boundary.session import mcp_servers_for, run_turns
    from agentbench.boundary.target import CallableTarget
    from agentbench.loading import load_object
    from agentbench.replay.cassette import Cassette
    from agentbench.replay.models import ReplayModel
    from agentbench.replay.session import recorded_turns
    from agentbench.replay.tool_policy import ToolPolicies

    pytest.importorskip("agents" if suite == "openai_agents_mcp" else "fastmcp")
    # By its file: another test of this worker may have left `golden` imported from a checkout
    # that holds only its own suite.
    agent = load_object(f"{ROOT / 'golden' / suite / 'agent.py'}:parts_desk")
    target = CallableTarget.of(agent, where="")
    found: dict[str, dict[str, Any]] = {}
    for case in ("find-a-part", "warehouse-down"):
        cassette = Cassette.load(ROOT / "replays" / suite / f"{case}.yaml")
        model = ReplayModel(cassette, strict=True)
        mcp = mcp_servers_for(model, ToolPolicies.parse("recorded"))
        with OtlpCollector() as collector:
            provider = TracerProvider()
            provider.add_span_processor(
                SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{collector.endpoint}/v1/traces"))
            )
            hook = OTelHook(tracer_provider=provider)
            turns = recorded_turns(cassette.info)
            asyncio.run(run_turns(target, model, turns, variables={}, hooks=[hook], mcp=mcp))
            provider.shutdown()
            found[case] = tool_spans(collector.spans())["find_part"]
        assert not model.drifts  # the recorded session, replayed as it was
    ok, failed = found["find-a-part"], found["warehouse-down"]
    assert ok["mcp.method.name"] == "tools/call" and ok["gen_ai.operation.name"] == "execute_tool"
    assert ok["network.transport"] == transport
    assert ok["agentbench.mcp.server"] == "agentbench mcp-proxy: stock"
    assert ok["mcp.protocol.version"]
    assert "error.type" not in ok
    assert failed["error.type"] == "system_error" and failed["code"] == 2
