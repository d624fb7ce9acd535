"""MCP tool calls in traces and cassettes: replayed without the server, and a changed server
result reported as `tool_result_changed`; `agentbench tools list` shows where tools come from."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from agentbench import Agent, ScriptedModel, ToolCall
from agentbench.cli import main
from agentbench.replay.replayer import Replayer
from agentbench.replay.session import record_session
from agentbench.runtime.mcp import StdioServer, close_all, mcp_tools
from agentbench.runtime.mcp import connection as conn
from golden.mcp_time.agent import TIME_SERVER

ROOT = Path(__file__).resolve().parent.parent
REPLAYS = ROOT / "replays" / "mcp_time"


def test_golden_mcp_cassette_replays_with_the_tools_recorded_and_no_server(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(ROOT)
    close_all()  # servers other tests of this process started: none may be running here
    code = main(
        [
            "replay",
            str(REPLAYS / "colleague-office-time.yaml"),
            "--tool",
            "time_convert_time=recorded",
            "--db",
            str(tmp_path / "traces.duckdb"),
            "--json",
        ]
    )
    report = json.loads(capsys.readouterr().out)
    assert code == 0, report
    assert not report["diverged"] and report["stop_reason"] == "completed"
    assert TIME_SERVER not in conn._connections  # the time server was never started


async def test_a_changed_server_result_is_tool_result_changed(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    server = StdioServer([sys.executable, "-m", "tests.mcp_servers.faults"], cwd=ROOT)
    agent = Agent(name="counter", tools=mcp_tools(server, include=["count"]))
    path = tmp_path / "count.yaml"
    script = [ToolCall("count", {}), "counted"]
    try:
        await record_session(agent, "count once", model=ScriptedModel(script), path=path)
        # Live again: the same server process has answered once already, so count is 2.
        live = await Replayer(agent).replay(path)
        recorded = await Replayer(agent, tools={"count": "recorded"}).replay(path)
    finally:
        close_all()
    first = live.first
    assert first is not None and (first.cls, first.label) == (
        "tool_result_changed",
        "tool call count",
    )
    assert first.old["result"]["count"] == 1 and first.new["result"]["count"] == 2
    assert not recorded.diverged


def test_tools_list_shows_effect_timeout_idempotency_and_source(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    assert main(["tools", "list", "golden.mcp_time.agent:clock_agent"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["tool", "effect", "timeout", "idempotent", "source"]
    assert lines[1].split()[:4] == ["time_get_current_time", "read_only", "30", "s"]
    assert lines[1].endswith("mcp stdio: python -m mcp_server_time --local-timezone UTC")
    assert lines[3].split()[0] == "office_timezone"
    assert lines[3].endswith("python golden.mcp_time.agent.office_timezone")
    assert TIME_SERVER not in conn._connections  # listed from the snapshot: nothing started


def test_tools_list_json_follows_handoffs_and_names_fallbacks(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "fx_agents.py").write_text(
        "from agentbench import Agent, tool\n"
        "from agentbench.runtime.fallback import fallback\n"
        "@tool(effect='read_only', idempotent=True, timeout_s=3)\n"
        "def rates(currency: str) -> float:\n    '''Rate.'''\n    return 1.0\n"
        "@tool(effect='write')\n"
        "def mirror(currency: str) -> float:\n    '''Mirror.'''\n    return 1.0\n"
        "book = Agent(name='book', tools=[fallback(rates, mirror, name='fx')])\n"
        "desk = Agent(name='desk', handoffs=[book])\n"
    )
    monkeypatch.chdir(tmp_path)
    assert main(["tools", "list", "fx_agents.py:desk", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["agent"], r["tool"], r["source"]) for r in rows] == [
        ("desk", "transfer_to_book", "handoff → book"),
        ("book", "fx", "fallback: rates → mirror"),
    ]
    assert (rows[1]["effect"], rows[1]["timeout_s"], rows[1]["idempotent"]) == (
        "write",
        None,
        False,
    )


def test_tools_list_refuses_what_is_not_an_agent_or_tools(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    assert main(["tools", "list", "golden.mcp_time.agent:OFFICES"]) == 2
    assert "expected an Agent, a Tool or a list of tools; got dict" in capsys.readouterr().err


async def test_a_live_server_unlike_its_schema_snapshot_is_drift_naming_tool_and_field(
    tmp_path: Path,
) -> None:
    # The agent shows the model its schema= snapshot; the server it runs against has since
    # reworded a tool's description, which the model is not shown: the requests are the same,
    # and only asking the server tells.
    pytest.importorskip("mcp")
    stock = ROOT / "golden" / "openai_agents_mcp" / "stock_server.py"
    reworded = tmp_path / "stock_server.py"
    reworded.write_text(stock.read_text().replace('"""Look a spare part up', '"""Find a part'))
    snapshot = tmp_path / "stock_tools.json"
    path = tmp_path / "find.yaml"
    script = [ToolCall("find_part", {"sku": "A-100"}), "14 in stock"]

    def desk(server_file: Path) -> Agent:
        server = StdioServer([sys.executable, str(server_file)], cwd=ROOT)
        return Agent(name="desk", tools=mcp_tools(server, schema=snapshot, include=["find_part"]))

    try:
        await record_session(desk(stock), "A-100?", model=ScriptedModel(script), path=path)
        unchanged = await Replayer(desk(stock), strict=True).replay(path)
        live = await Replayer(desk(reworded), strict=True).replay(path)
        recorded = await Replayer(desk(reworded), tools={"find_part": "recorded"}).replay(path)
    finally:
        close_all()
    assert not unchanged.drifts and not unchanged.diverged
    (drift,) = live.drifts
    assert drift.call == 1 and live.diverged
    (change,) = drift.drift.changes
    assert change.path == (
        f"mcp stdio: python {reworded} tools/list vs stock_tools.json: "
        "find_part.description"
    )
    assert change.old.startswith("Look a spare part up") and change.new.startswith("Find a part")
    # With the tool's result recorded no server is asked, and nothing is compared.
    assert not recorded.drifts and not recorded.diverged
