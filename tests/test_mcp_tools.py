"""MCP servers' tools as agent tools, against real servers from PyPI (mcp-server-time,
mcp-server-git over stdio) and the project's own fault server (tests/mcp_servers/faults.py)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
pytest.importorskip("mcp_server_time")

from mcp import types

from agentbench import Agent, ResultKind, Runner, ScriptedModel, ToolCall, tool
from agentbench.errors import ToolDefinitionError
from agentbench.runtime.mcp import (
    HttpServer,
    McpServerError,
    StdioServer,
    close_all,
    effect_of,
    mcp_tools,
)
from agentbench.runtime.mcp import connection as conn
from agentbench.runtime.mcp.tools import tool_result
from agentbench.runtime.tools import BusinessFailure, Effect
from tests.mcp_servers import serving_over_http

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

ROOT = Path(__file__).resolve().parent.parent
TIME = StdioServer([sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"])


def faults(**env: str) -> StdioServer:
    return StdioServer([sys.executable, "-m", "tests.mcp_servers.faults"], cwd=ROOT, env=env)


@pytest.fixture(autouse=True, scope="module")
def _stop_servers() -> Any:
    yield
    close_all()


def by_name(tools: list[Any]) -> dict[str, Any]:
    return {t.name: t for t in tools}


# -- mapping -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("annotations", "effect"),
    [
        ({"readOnlyHint": True}, Effect.READ_ONLY),
        ({"readOnlyHint": True, "destructiveHint": True}, Effect.READ_ONLY),
        ({"readOnlyHint": False, "destructiveHint": False}, Effect.WRITE),
        ({"destructiveHint": True}, Effect.WRITE),
        ({}, Effect.UNKNOWN),
        ({"idempotentHint": True}, Effect.UNKNOWN),
    ],
)
def test_effect_comes_from_the_annotations(annotations: dict, effect: Effect) -> None:
    assert effect_of(annotations) is effect


def text(value: str) -> types.TextContent:
    return types.TextContent(type="text", text=value)


def test_results_keep_structured_and_text_content() -> None:
    same = types.CallToolResult(content=[text('{"a": 1}')], structured_content={"a": 1})
    assert tool_result(same) == {"a": 1}
    wrapped = types.CallToolResult(content=[text("8")], structured_content={"result": "8"})
    assert tool_result(wrapped) == "8"
    differs = types.CallToolResult(content=[text("one row")], structured_content={"rows": [1]})
    assert tool_result(differs) == {"structured": {"rows": [1]}, "text": "one row"}
    plain = types.CallToolResult(content=[text("a"), text("b")])
    assert tool_result(plain) == "a\nb"
    image = types.ImageContent(type="image", data="QUJD", mime_type="image/png")
    assert tool_result(types.CallToolResult(content=[image])) == "[image image/png, 3 bytes]"
    refused = types.CallToolResult(content=[text("account closed")], is_error=True)
    with pytest.raises(BusinessFailure, match="account closed"):
        tool_result(refused)


# -- a real server from PyPI -------------------------------------------------------------------
async def test_time_server_tools_have_the_servers_schema_effect_and_results() -> None:
    tools = by_name(mcp_tools(TIME, prefix="time", timeout_s=20))
    assert set(tools) == {"time_get_current_time", "time_convert_time"}
    now = tools["time_get_current_time"]
    assert now.remote_name == "get_current_time"
    assert (now.effect, now.idempotent, now.timeout_s) == (Effect.READ_ONLY, True, 20)
    assert now.openai_schema()["function"]["parameters"]["required"] == ["timezone"]
    assert "timezone" in now.description.lower()

    ok = await now.invoke({"timezone": "Asia/Tokyo"})
    assert ok.kind is ResultKind.OK and ok.data["timezone"] == "Asia/Tokyo"
    refused = await now.invoke({"timezone": "Mars/Olympus"})
    assert refused.kind is ResultKind.BUSINESS_FAILURE
    assert "Mars/Olympus" in refused.error
    assert "Retrying the same call will not change it" in refused.observation()


async def test_arguments_are_checked_against_the_servers_schema_before_the_call() -> None:
    tools = by_name(mcp_tools(TIME, include=["convert_time"]))
    convert = tools["convert_time"]
    result = await convert.invoke({"time": 930, "source_timezone": "UTC"})
    assert result.kind is ResultKind.SYSTEM_ERROR
    assert "target_timezone" in result.error and "930" in result.error


def test_include_names_the_missing_tool_and_what_the_server_has() -> None:
    with pytest.raises(ToolDefinitionError, match=r"no tool named 'clock'.*convert_time"):
        mcp_tools(TIME, include=["clock"])


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=T", "-c", "user.email=t@example.com"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "notes.txt").write_text("first\n")
    subprocess.run([*git, "add", "notes.txt"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "add notes"], check=True)
    (repo / "notes.txt").write_text("first\nsecond\n")
    return repo


async def test_git_server_reads_a_temporary_repository(repo: Path) -> None:
    pytest.importorskip("mcp_server_git")
    server = StdioServer([sys.executable, "-m", "mcp_server_git", "--repository", str(repo)])
    tools = by_name(mcp_tools(server, prefix="git"))
    assert tools["git_git_status"].effect is Effect.READ_ONLY
    assert tools["git_git_add"].effect is Effect.WRITE
    assert tools["git_git_reset"].effect is Effect.WRITE

    status = await tools["git_git_status"].invoke({"repo_path": str(repo)})
    assert status.kind is ResultKind.OK and "notes.txt" in str(status.data)
    log = await tools["git_git_log"].invoke({"repo_path": str(repo)})
    assert "add notes" in str(log.data)
    diff = await tools["git_git_diff_unstaged"].invoke({"repo_path": str(repo)})
    assert "+second" in str(diff.data)


# -- faults ------------------------------------------------------------------------------------
async def test_a_slow_call_times_out_and_the_server_keeps_serving() -> None:
    tools = by_name(mcp_tools(faults(), timeout_s=1))
    slow = await tools["slow"].invoke({"seconds": 30})
    assert slow.kind is ResultKind.SYSTEM_ERROR and "timed out after 1 s" in slow.error
    echo = await tools["echo"].invoke({"text": "still here"})
    assert echo.data == "still here"


async def test_is_error_is_a_business_failure_and_a_protocol_error_a_system_error() -> None:
    tools = by_name(mcp_tools(faults()))
    refused = await tools["refuse"].invoke({"account": "A-17"})
    assert refused.kind is ResultKind.BUSINESS_FAILURE and "A-17 is closed" in refused.error
    # mcp-server-time answers an unknown tool with JSON-RPC -32602, as the spec asks.
    ghost = by_name(mcp_tools(TIME))["get_current_time"]
    ghost.remote_name = "no_such_tool"  # the server no longer has the tool it listed
    answer = await ghost.invoke({"timezone": "UTC"})
    assert answer.kind is ResultKind.SYSTEM_ERROR
    assert "no_such_tool" in answer.error and "error -32602" in answer.error


async def test_a_server_that_dies_is_restarted_and_a_write_is_not_repeated() -> None:
    server = faults(RUN="restart-write")
    tools = by_name(mcp_tools(server))
    first = await tools["count"].invoke({})
    crashed = await tools["crash"].invoke({})
    assert crashed.kind is ResultKind.SYSTEM_ERROR
    assert "closed the connection during the call" in crashed.error
    assert "not repeated" in crashed.error and "'crash'" in crashed.error
    after = await tools["count"].invoke({})
    assert after.data["count"] == 1 and after.data["pid"] != first.data["pid"]
    assert conn.connection(server).starts == 2


async def test_a_read_only_call_the_server_died_in_is_repeated_once(tmp_path: Path) -> None:
    server = faults(RUN="restart-read")
    tools = by_name(mcp_tools(server))
    result = await tools["crash_once"].invoke({"marker": str(tmp_path / "crashed")})
    assert result.kind is ResultKind.OK and result.data.startswith("answered by")
    assert conn.connection(server).starts == 2


async def test_a_server_that_cannot_start_is_a_system_error_with_its_stderr(
    tmp_path: Path,
) -> None:
    snapshot = tmp_path / "tools.json"
    by_name(mcp_tools(faults(RUN="snapshot-for-crash"), schema=snapshot))
    broken = by_name(mcp_tools(faults(FAULTS_CRASH_ON_START="1"), schema=snapshot))
    result = await broken["echo"].invoke({"text": "x"})
    assert result.kind is ResultKind.SYSTEM_ERROR
    assert "failed to start" in result.error and "crashing on start as asked" in result.error


def test_a_server_that_never_answers_the_handshake_is_stopped_after_its_timeout() -> None:
    # Not the faults server: one that must import the MCP SDK first may, on a loaded machine,
    # not yet have said its pid when the 2 s are up. Saying nothing is all this one does.
    hangs = "import os, sys, time; print(f'pid {os.getpid()}', file=sys.stderr, flush=True); "
    server = StdioServer(
        [sys.executable, "-c", hangs + "time.sleep(3600)"], cwd=ROOT, startup_timeout_s=2
    )
    with pytest.raises(McpServerError, match=r"handshake within 2 s") as caught:
        mcp_tools(server)
    pid = int(str(caught.value).rsplit("pid ", 1)[1].split()[0])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.05)
    assert not _alive(pid)


def test_listing_a_server_that_is_not_installed_names_the_command() -> None:
    with pytest.raises(McpServerError, match=r"could not be started.*no-such-mcp-server"):
        mcp_tools(StdioServer(["no-such-mcp-server", "--flag"]))


def test_a_malformed_input_schema_names_the_server_tool_and_place() -> None:
    with pytest.raises(ToolDefinitionError) as caught:
        mcp_tools(faults(FAULTS_BAD_SCHEMA="1"))
    message = str(caught.value)
    assert "tool 'echo': inputSchema" in message and "properties/text/type" in message
    assert "include=" in message
    fine = by_name(mcp_tools(faults(FAULTS_BAD_SCHEMA="1"), include=["count", "plain"]))
    assert set(fine) == {"count", "plain"} and fine["plain"].effect is Effect.UNKNOWN


# -- the snapshot: an agent defined without the server -----------------------------------------
def test_the_snapshot_is_written_once_and_then_needs_no_server(tmp_path: Path) -> None:
    snapshot = tmp_path / "time_tools.json"
    live = mcp_tools(TIME, prefix="time", schema=snapshot)
    assert snapshot.exists() and '"server": "stdio: python -m mcp_server_time' in (
        snapshot.read_text()
    )
    absent = StdioServer(["no-such-mcp-server"])
    offline = mcp_tools(absent, prefix="time", schema=snapshot)
    assert [t.openai_schema() for t in offline] == [t.openai_schema() for t in live]
    assert absent not in conn._connections  # nothing was started


def test_a_broken_snapshot_names_the_file(tmp_path: Path) -> None:
    snapshot = tmp_path / "tools.json"
    snapshot.write_text('{"version": 1, "tools": [{"description": "no name"}]}')
    with pytest.raises(ToolDefinitionError, match=r"tools\.json: tools\[0\]"):
        mcp_tools(TIME, schema=snapshot)


# -- over HTTP -----------------------------------------------------------------------------------
@pytest.fixture
def http_faults() -> Any:
    with serving_over_http() as url:
        yield url


async def test_http_server_tools(http_faults: str) -> None:
    server = HttpServer(http_faults, headers={"Authorization": "Bearer secret-token"})
    assert "secret-token" not in repr(server) + server.describe()
    tools = by_name(mcp_tools(server))
    assert (await tools["echo"].invoke({"text": "over http"})).data == "over http"
    assert (await tools["refuse"].invoke({"account": "B"})).kind is ResultKind.BUSINESS_FAILURE


# -- in an agent -------------------------------------------------------------------------------
@tool(effect="read_only")
def shout(text: str) -> str:
    """Upper-case the text."""
    return text.upper()


async def test_an_agent_mixes_mcp_and_python_tools_and_runs_share_one_server() -> None:
    server = faults(RUN="agent")
    agent = Agent(name="mixed", tools=[*mcp_tools(server, include=["echo", "count"]), shout])
    for expected in (1, 2):
        model = ScriptedModel(
            [
                [ToolCall("echo", {"text": "hi"}), ToolCall("shout", {"text": "hi"})],
                ToolCall("count", {}),
                "done",
            ]
        )
        result = await Runner.run(agent, "go", model=model)
        finished = [e for e in result.events if e.kind == "tool_finished"]
        assert [(e.tool, e.effect) for e in finished] == [
            ("echo", "read_only"),
            ("shout", "read_only"),
            ("count", "read_only"),
        ]
        assert finished[0].result.data == "hi" and finished[1].result.data == "HI"
        assert (
            finished[2].result.data["count"] == expected
        )  # the second run's server is the first's
    assert conn.connection(server).starts == 1


def test_a_sync_run_on_its_own_loop_uses_the_same_server() -> None:
    server = faults(RUN="sync")
    agent = Agent(name="sync", tools=mcp_tools(server, include=["count"]))
    counts = []
    for _ in range(2):
        model = ScriptedModel([ToolCall("count", {}), "done"])
        result = Runner.run_sync(agent, "go", model=model)
        counts.append(next(e for e in result.events if e.kind == "tool_finished").result.data)
    assert [c["count"] for c in counts] == [1, 2] and counts[0]["pid"] == counts[1]["pid"]


def test_closing_stops_the_server_process() -> None:
    server = faults(RUN="close")
    tools = by_name(mcp_tools(server, include=["count"]))
    pid = asyncio.run(tools["count"].invoke({})).data["pid"]
    close_all()  # what runs at interpreter exit
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.05)
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped) counts as stopped.
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    return True
