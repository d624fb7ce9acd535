"""The journeys of the pydantic-ai parts desk whose tools are an MCP server's.

golden/pydantic_ai_mcp is a pydantic-ai agent with `toolsets=[MCPToolset(url)]`: pydantic-ai's
own MCP client (FastMCP's) speaks Streamable HTTP to what `target.mcp_url` hands it, the case's
MCP proxy, which starts the stub server over stdio. The stub server runs live in every replay,
behind the proxy, and is compared with the recording in each cassette. Through the real CLI on
a copy of the suite: the baseline replays unchanged; a changed server answer fails the gate
naming the tool call and the field; a changed tool description is request drift naming the
server, the tool and the field; the fault case shows the agent telling the user what failed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.framework_journeys import (
    baseline_checkout,
    change,
    copy_of,
    first_divergences,
    framework_or_skip,
    gate_against_baseline,
)
from tests.test_journeys import agentbench

pytestmark = pytest.mark.slow  # journeys through the real CLI, seconds each

framework_or_skip("pydantic_ai")
framework_or_skip("fastmcp")  # pydantic-ai's MCP client: pydantic-ai-slim[mcp]
framework_or_skip("mcp")

SUITE = "pydantic_ai_mcp"
CASES = 3


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return baseline_checkout(tmp_path_factory.mktemp("pydantic-ai-mcp"), SUITE, CASES)


@pytest.fixture
def checkout(baseline: Path, tmp_path: Path) -> Path:
    return copy_of(baseline, tmp_path)


def test_unchanged_code_replays_unchanged(checkout: Path) -> None:
    ran = gate_against_baseline(checkout, SUITE, "--strict")
    assert ran.code == 0, ran.out
    assert f"unchanged: {CASES} case(s)" in ran.out
    assert "first divergence" not in ran.out


def test_a_changed_server_answer_fails_the_gate_naming_the_call_and_field(checkout: Path) -> None:
    change(checkout, SUITE, ('"in_stock": 9', '"in_stock": 7'), file="stock_server.py")
    ran = gate_against_baseline(checkout, SUITE, "--filter", "find-a-part")
    assert ran.code == 1, ran.out
    (first,) = first_divergences(ran.out)
    assert (first.step, first.kind, first.what) == (1, "tool_result_changed", "tool call find_part")
    assert "in_stock" in first.details and "9" in first.details and "7" in first.details


def test_a_changed_tool_description_is_request_drift_naming_the_tool(checkout: Path) -> None:
    change(
        checkout,
        SUITE,
        ('"""Look a bike part up by its SKU', '"""Find a bike part by its SKU'),
        file="stock_server.py",
    )
    ran = gate_against_baseline(checkout, SUITE, "--filter", "find-a-part")
    assert ran.code == 1, ran.out
    (first,) = first_divergences(ran.out)
    assert (first.kind, first.what) == ("request_drift", "model call #1")
    assert "mcp stock tools/list: find_part.description: 'Look a bike" in first.details
    assert "Find a bike part" in first.details


def test_the_fault_case_shows_the_agent_telling_the_user_what_failed(checkout: Path) -> None:
    ran = gate_against_baseline(checkout, SUITE, "--filter", "warehouse-down", "--json")
    assert ran.code == 0, ran.out
    (result,) = ran.json()["results"]
    assert result["status"] == "passed"
    # The run as stored: the fault reached the model as a tool result, and the answer says it.
    shown = agentbench(checkout, "traces", "show", result["run_id"])
    assert shown.code == 0, shown.out + shown.err
    (output,) = [line for line in shown.out.splitlines() if line.lstrip().startswith("output ")]
    assert "I could not look it up: tool 'find_part' failed" in output
    assert "(injected fault: a JSON-RPC error)" in output
    # The trace knows the call failed, though the framework sent back only text.
    assert 'find_part({"sku":"K-410"}) → system_error' in shown.out


def test_an_is_error_answer_is_the_tools_own_no_in_the_trace(checkout: Path) -> None:
    ran = gate_against_baseline(checkout, SUITE, "--filter", "too-few-to-reserve", "--json")
    assert ran.code == 0, ran.out
    (result,) = ran.json()["results"]
    shown = agentbench(checkout, "traces", "show", result["run_id"])
    assert "→ business_failure" in shown.out, shown.out


def test_recorded_tools_answer_with_no_server_started(checkout: Path) -> None:
    # A server that cannot start at all: the recording answers every call, its answers in
    # the key order the server gave them (pydantic-ai passes structured content on as JSON).
    change(
        checkout,
        SUITE,
        ("server = MCPServer(", "raise SystemExit(3)\nserver = MCPServer("),
        file="stock_server.py",
    )
    change(checkout, SUITE, ("scorers:", "tools: {default: recorded}\nscorers:"), file="suite.yaml")
    ran = gate_against_baseline(checkout, SUITE, "--strict")
    assert ran.code == 0, ran.out
    assert f"unchanged: {CASES} case(s)" in ran.out
