"""The journeys of the OpenAI Agents SDK parts desk whose tools are an MCP server's.

golden/openai_agents_mcp is an Agents SDK agent with `mcp_servers=[MCPServerStdio(...)]`: the
SDK's own MCP client starts what `target.mcp_stdio` hands it, which reaches the case's MCP
proxy. The stub server runs live in every replay, behind the proxy, and is compared with the
recording in each cassette. Through the real CLI on a copy of the suite: the baseline replays
unchanged; a changed server answer fails the gate naming the tool call and the field; a
changed tool description is request drift naming the server, the tool and the field; with
`tools: recorded` the recording answers and no server is started; a call the recording never
made is answered with an error naming the nearest recorded call; the fault case shows the
agent telling the user what failed.
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

framework_or_skip("agents")
framework_or_skip("mcp")

SUITE = "openai_agents_mcp"
CASES = 3


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return baseline_checkout(tmp_path_factory.mktemp("openai-agents-mcp"), SUITE, CASES)


@pytest.fixture
def checkout(baseline: Path, tmp_path: Path) -> Path:
    return copy_of(baseline, tmp_path)


def test_unchanged_code_replays_unchanged(checkout: Path) -> None:
    ran = gate_against_baseline(checkout, SUITE, "--strict")
    assert ran.code == 0, ran.out
    assert f"unchanged: {CASES} case(s)" in ran.out


def test_a_changed_server_answer_fails_the_gate_naming_the_call_and_field(checkout: Path) -> None:
    change(checkout, SUITE, ('"in_stock": 14', '"in_stock": 12'), file="stock_server.py")
    ran = gate_against_baseline(checkout, SUITE, "--filter", "find-a-part")
    assert ran.code == 1, ran.out
    (first,) = first_divergences(ran.out)
    assert (first.step, first.kind, first.what) == (1, "tool_result_changed", "tool call find_part")
    assert "in_stock" in first.details and "14" in first.details and "12" in first.details


def test_a_changed_tool_description_is_request_drift_naming_the_tool(checkout: Path) -> None:
    change(
        checkout,
        SUITE,
        ('"""Look a spare part up by its SKU', '"""Find a spare part by its SKU'),
        file="stock_server.py",
    )
    ran = gate_against_baseline(checkout, SUITE, "--filter", "find-a-part")
    assert ran.code == 1, ran.out
    (first,) = first_divergences(ran.out)
    assert (first.kind, first.what) == ("request_drift", "model call #1")
    assert "mcp stock tools/list: find_part.description: 'Look a spare" in first.details


def test_recorded_tools_answer_with_no_server_started(checkout: Path) -> None:
    # A server that cannot start at all: the recording answers every call.
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


def test_a_call_the_recording_never_made_names_the_nearest_recorded_call(checkout: Path) -> None:
    change(checkout, SUITE, ("scorers:", "tools: {default: recorded}\nscorers:"), file="suite.yaml")
    # A recording made when the desk sent SKUs in lower case: today's call is not in it.
    cassette = checkout / "replays" / SUITE / "find-a-part.yaml"
    recorded = "          params:\n            arguments:\n              sku: A-100"
    assert cassette.read_text().count(recorded) == 1
    cassette.write_text(cassette.read_text().replace(recorded, recorded.replace("A-100", "a-100")))
    ran = gate_against_baseline(checkout, SUITE, "--filter", "find-a-part", "--json")
    assert ran.code == 1, ran.out
    (result,) = ran.json()["results"]
    assert result["status"] == "failed"
    # The proxy's error reached the model as the tool's result: the first divergence.
    first = result["diverged_at"]
    assert first["class"] == "tool_result_changed", first
    # (cut to the width of a line there; the whole message is the proxy tests')
    assert "the warehouse failed: agentbench mcp-proxy: no recorded an" in first["cause"]


def test_the_fault_case_shows_the_agent_telling_the_user_what_failed(checkout: Path) -> None:
    ran = gate_against_baseline(checkout, SUITE, "--filter", "warehouse-down", "--json")
    assert ran.code == 0, ran.out
    (result,) = ran.json()["results"]
    assert result["status"] == "passed"
    said = {s["name"]: s for s in result["scores"]}["output_contains"]
    assert said["passed"] and "injected fault" in said["reason"], said
    # The trace knows the call failed, though the SDK sent the model back only text.
    shown = agentbench(checkout, "traces", "show", result["run_id"])
    assert 'find_part({"sku":"A-100"}) → system_error' in shown.out, shown.out
