"""MCP calls kept apart from each other and from the machine (issue 34, finding 7): an answer
over the size limit is refused and the next call to the server is served; a server that stops
answering is stopped and started again, a bounded number of times, and the call that found it
says so; a huge JSON-RPC error is the server's error; the server's whole process group ends
with it, however the agent's process ends. Against the project's fault server
(tests/mcp_servers/faults.py), over stdio and over streamable HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from agentbench import ResultKind, ToolCall
from agentbench.errors import UsageError
from agentbench.runtime.mcp import HttpServer, StdioServer, close_all, mcp_tools
from agentbench.runtime.mcp import connection as conn
from agentbench.testing import OpenAICompatibleServer
from tests.mcp_servers import ROOT, serving_over_http

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

CONSOLE = str(Path(sys.executable).with_name("agentbench"))
BOUND_S = 60.0  # for anything a test waits on; never reached when things work


def faults(env: dict[str, str] | None = None, **options: Any) -> StdioServer:
    return StdioServer(
        [sys.executable, "-m", "tests.mcp_servers.faults"], cwd=ROOT, env=env, **options
    )


def by_name(tools: list[Any]) -> dict[str, Any]:
    return {t.name: t for t in tools}


@pytest.fixture(autouse=True, scope="module")
def _stop_servers() -> Iterator[None]:
    yield
    close_all()


@pytest.fixture
def quick_ping(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server whose call was given up gets 1 s, not 5, to answer the ping that follows."""
    monkeypatch.setattr(conn, "PING_TIMEOUT_S", 1.0, raising=False)


# -- answers over the size limit ---------------------------------------------------------------
async def test_a_50_mb_answer_is_refused_and_the_next_call_is_served_by_the_same_server() -> None:
    server = faults({"RUN": "too-large"})
    tools = by_name(mcp_tools(server, timeout_s=30))
    before = await tools["count"].invoke({})
    refused = await tools["big"].invoke({"size": 50_000_000})
    assert refused.kind is ResultKind.SYSTEM_ERROR
    said = re.search(
        r"answered 'big' with a message of ([\d,]+) bytes, over the limit of 16,777,216 bytes "
        r"\(max_message_bytes\); it was dropped unread, and the server keeps serving",
        refused.error or "",
    )
    assert said is not None, refused.error
    assert int(said.group(1).replace(",", "")) > 50_000_000
    after = await tools["count"].invoke({})
    assert after.data == {"count": 2, "pid": before.data["pid"]}  # neither stuck nor restarted
    assert conn.connection(server).starts == 1


async def test_the_size_limit_is_set_per_server() -> None:
    tools = by_name(mcp_tools(faults({"RUN": "small-limit"}, max_message_bytes=100_000)))
    fits = await tools["big"].invoke({"size": 40_000})
    assert fits.kind is ResultKind.OK and fits.truncated  # cut for the model, as any result
    refused = await tools["big"].invoke({"size": 200_000})
    assert refused.kind is ResultKind.SYSTEM_ERROR
    assert "over the limit of 100,000 bytes (max_message_bytes)" in (refused.error or "")
    with pytest.raises(UsageError, match=r"StdioServer: max_message_bytes must be at least 1024"):
        faults(max_message_bytes=10)
    with pytest.raises(UsageError, match=r"HttpServer: max_restarts must be a whole number"):
        HttpServer("http://127.0.0.1:1/mcp", max_restarts=-1)


@pytest.mark.parametrize("json_body", [False, True], ids=["event-stream", "json-body"])
async def test_over_http_answers_are_bounded_and_the_session_serves_on(json_body: bool) -> None:
    with serving_over_http(json=json_body) as url:
        # 2 MB is past the SDK's own 1 MiB event limit (which it reports as a closed
        # connection) and well within ours.
        default = by_name(mcp_tools(HttpServer(url)))
        assert (await default["big"].invoke({"size": 2_000_000})).kind is ResultKind.OK
        server = HttpServer(url, max_message_bytes=1_000_000)
        tools = by_name(mcp_tools(server))
        refused = await tools["big"].invoke({"size": 3_000_000})
        said = re.search(
            r"with a message of ([\d,]+) bytes, over the limit of 1,000,000 bytes",
            refused.error or "",
        )
        assert said is not None, refused.error
        assert int(said.group(1).replace(",", "")) > 6_000_000  # text and structured content
        assert (await tools["big"].invoke({"size": 400_000})).kind is ResultKind.OK
        assert (await tools["echo"].invoke({"text": "still"})).data == "still"
        assert conn.connection(server).starts == 1
        close_all()  # while the server is there to end its sessions


def test_the_id_of_a_message_thrown_away_is_found_at_either_end() -> None:
    from agentbench.runtime.mcp.limits import Discarded

    text = b"x" * 20_000
    messages = {
        # The Python SDK writes the id first; the TypeScript SDK writes the result first.
        b'{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"%s"}]}}': 7,
        b'{"result":{"content":[{"text":"%s","id":3}]},"jsonrpc":"2.0","id":"r-7"}': "r-7",
        b'{"result":{"rows":["%s"]},"id":8,"jsonrpc":"2.0"}': 8,
        # Not an answer to a call: a notification, a request from the server.
        b'{"method":"notifications/message","params":{"data":"%s"},"jsonrpc":"2.0"}': None,
        b'{"jsonrpc":"2.0","method":"sampling/createMessage","params":{"m":"%s"},"id":7}': None,
        # An id inside the result is not the message's.
        b'{"jsonrpc":"2.0","result":{"rows":[{"t":"%s","id":3}]}}': None,
    }
    for layout, expected in messages.items():
        message = layout.replace(b"%s", text)
        discarded = Discarded(message[:9_000])
        for at in range(9_000, len(message), 5_000):
            discarded.feed(message[at : at + 5_000])
        assert (discarded.response_id(), discarded.size) == (expected, len(message)), layout


# -- a huge JSON-RPC error -----------------------------------------------------------------------
@pytest.mark.parametrize("over", ["stdio", "http"])
async def test_a_1_mb_json_rpc_error_is_the_servers_error_cut_with_its_size(over: str) -> None:
    with contextlib.ExitStack() as stack:
        if over == "http":
            server: Any = HttpServer(stack.enter_context(serving_over_http()))
        else:
            server = faults({"RUN": "big-error"})
        tools = by_name(mcp_tools(server))
        answer = await tools["big_error"].invoke({"size": 1_048_576})
        error = answer.error or ""
        assert answer.kind is ResultKind.SYSTEM_ERROR
        assert "answered 'big_error' with error -32603: EEEE" in error
        assert error.endswith("EEE… [a message of 1,048,576 characters]"), error[-200:]
        assert len(error) < 1_000 and "closed the connection" not in error
        assert (await tools["echo"].invoke({"text": "after"})).data == "after"
        assert conn.connection(server).starts == 1
        if over == "http":
            close_all()


# -- a server that stops answering -------------------------------------------------------------
async def test_a_server_that_stops_answering_is_stopped_and_the_next_call_starts_it_again(
    quick_ping: None,
) -> None:
    server = faults({"RUN": "stuck"})
    tools = by_name(mcp_tools(server, timeout_s=2))
    first = await tools["count"].invoke({})
    stuck = await tools["stall"].invoke({})
    assert stuck.kind is ResultKind.SYSTEM_ERROR
    assert stuck.error is not None and stuck.error.startswith(
        "tool 'stall' timed out after 2 s: MCP server (stdio: python -m tests.mcp_servers.faults) "
        "did not answer 'stall' in time; it did not answer a ping within 1 s either: it was "
        "stopped, and the next call starts it again (restart 1 of at most 3 in a row)"
    ), stuck.error
    assert _ends(first.data["pid"])
    after = await tools["count"].invoke({})
    assert after.data["count"] == 1 and after.data["pid"] != first.data["pid"]
    link = conn.connection(server)
    assert (link.starts, link.restarts_in_a_row) == (2, 0)  # answered again: the count restarts


async def test_a_slow_server_that_still_answers_keeps_running(quick_ping: None) -> None:
    server = faults({"RUN": "slow"})
    tools = by_name(mcp_tools(server, timeout_s=1))
    slow = await tools["slow"].invoke({"seconds": 30})
    assert (slow.error or "").endswith("; it still answers a ping, so it keeps running")
    assert (await tools["echo"].invoke({"text": "here"})).data == "here"
    assert conn.connection(server).starts == 1


async def test_a_call_cancelled_while_its_server_is_stuck_leaves_the_next_call_a_new_server(
    quick_ping: None, tmp_path: Path
) -> None:
    started = tmp_path / "stalled"
    server = faults({"RUN": "cancelled", "FAULTS_STARTED": str(started)})
    tools = by_name(mcp_tools(server, timeout_s=10))
    first = await tools["count"].invoke({})
    call = asyncio.create_task(tools["stall"].invoke({}))
    await _exists(started)
    call.cancel()  # a run cancelled mid-call: no timeout ever fires for this call
    with contextlib.suppress(asyncio.CancelledError):
        await call
    after = await tools["count"].invoke({})  # waits for the ping's verdict, then a new server
    assert after.kind is ResultKind.OK and after.data["pid"] != first.data["pid"]
    assert _ends(first.data["pid"])


async def test_restarts_in_a_row_are_bounded(tmp_path: Path) -> None:
    snapshot = tmp_path / "tools.json"
    mcp_tools(faults({"RUN": "bound-snapshot"}), schema=snapshot)
    crashes = "import sys; print('crashing on start', file=sys.stderr); sys.exit(7)"
    server = StdioServer([sys.executable, "-c", crashes], max_restarts=2)
    tools = by_name(mcp_tools(server, schema=snapshot))
    errors = [(await tools["echo"].invoke({"text": "x"})).error or "" for _ in range(4)]
    assert all("failed to start" in error for error in errors[:3]), errors
    assert (
        "is not started again: it was restarted 2 times in a row without answering a call in "
        "between (max_restarts=2)"
    ) in errors[3]
    assert conn.connection(server).starts == 3


async def test_over_http_a_server_that_stops_answering_is_a_clear_error_and_a_new_session(
    quick_ping: None,
) -> None:
    with serving_over_http() as url:
        server = HttpServer(url)
        tools = by_name(mcp_tools(server, timeout_s=2))
        stuck = await tools["stall"].invoke({"seconds": 4})
        assert (stuck.error or "").startswith(
            f"tool 'stall' timed out after 2 s: MCP server (http: {url}) did not answer 'stall' "
            "in time; it did not answer a ping within 1 s either: its session was closed, and "
            "the next call opens a new one (restart 1 of at most 3 in a row)"
        ), stuck.error
        # The server's loop is blocked for the rest of its 4 s: the new session waits for it.
        assert (await tools["echo"].invoke({"text": "back"})).data == "back"
        assert conn.connection(server).starts == 2
        close_all()


# -- the server's whole process group ends with it ---------------------------------------------
def test_a_child_the_server_started_ends_with_the_server() -> None:
    tools = by_name(mcp_tools(faults({"RUN": "child"}), include=["spawn_child"]))
    pids = asyncio.run(tools["spawn_child"].invoke({})).data
    close_all()  # what runs at interpreter exit (the server exits at once on its own)
    assert _ends(pids["server"]) and _ends(pids["child"])


AGENT_PROCESS = textwrap.dedent("""
    import asyncio, json, sys
    from pathlib import Path

    from agentbench import Agent, Runner, ScriptedModel, ToolCall
    from agentbench.runtime.mcp import StdioServer, mcp_tools

    root, how, started = sys.argv[1:]
    server = StdioServer(
        [sys.executable, "-m", "tests.mcp_servers.faults"], cwd=root,
        env={"FAULTS_STARTED": started},
    )
    tools = {t.name: t for t in mcp_tools(server, include=["spawn_child", "slow"])}


    async def main():
        print(json.dumps((await tools["spawn_child"].invoke({})).data), flush=True)
        if how == "exit":
            return
        agent = Agent(name="waits", tools=[tools["slow"]])
        model = ScriptedModel([ToolCall("slow", {"seconds": 600}), "done"])
        run = asyncio.create_task(Runner.run(agent, "go", model=model))
        while not Path(started).exists():
            await asyncio.sleep(0.01)
        if how == "cancel":
            run.cancel()
            try:
                await run
            except asyncio.CancelledError:
                return
        print("waiting", flush=True)
        await run


    asyncio.run(main())
""")


@pytest.mark.parametrize("how", ["exit", "cancel", "sigint", "sigterm", "sigkill"])
def test_no_process_of_the_server_outlives_the_agents_process(how: str, tmp_path: Path) -> None:
    started = tmp_path / "started"
    agent = subprocess.Popen(
        [sys.executable, "-c", AGENT_PROCESS, str(ROOT), how, str(started)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a terminal's foreground group: a Ctrl-C reaches all of it
    )
    try:
        assert agent.stdout is not None
        pids = json.loads(agent.stdout.readline() or "null")
        assert pids is not None, agent.communicate()
        if how.startswith("sig"):
            assert agent.stdout.readline() == "waiting\n", agent.communicate()
            os.killpg(agent.pid, getattr(signal, how.upper()))
        agent.communicate(timeout=BOUND_S)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(agent.pid, signal.SIGKILL)
    assert _ends(pids["server"]), f"the server outlived the agent ({how})"
    assert _ends(pids["child"]), f"the server's child outlived the agent ({how})"


AGENT = """
import os, sys

from agentbench import Agent
from agentbench.runtime.mcp import StdioServer, mcp_tools

server = StdioServer(
    [sys.executable, "-m", "tests.mcp_servers.faults"],
    cwd=os.environ["FAULTS_ROOT"],
    env={"FAULTS_STARTED": os.environ["FAULTS_STARTED"]},
)
agent = Agent(name="spawner", instructions="Use the tools.",
              tools=mcp_tools(server, include=["spawn_child", "slow"]))
"""
SUITE = """
name: spawner
agent: agent.py:agent
model: {name: spawner-model}
cassettes: cassettes
scorers:
  - stop_reason: completed
"""


def test_ctrl_c_mid_call_is_exit_130_and_ends_the_servers_process_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    suite = tmp_path / "suites" / "spawner"
    (suite / "cases").mkdir(parents=True)
    (suite / "agent.py").write_text(AGENT)
    (suite / "suite.yaml").write_text(SUITE)
    (suite / "cases" / "cases.yaml").write_text("- id: spawn\n  input: Start a child.\n")
    started = tmp_path / "started"
    monkeypatch.setenv("FAULTS_ROOT", str(ROOT))
    monkeypatch.setenv("FAULTS_STARTED", str(started))
    pids: dict[str, int] = {}

    def respond(request: dict[str, Any]) -> object:
        last = request["messages"][-1]
        if last["role"] != "tool":
            return ToolCall("spawn_child", {})
        pids.update(json.loads(last["content"]))
        return ToolCall("slow", {"seconds": 600})

    with OpenAICompatibleServer(responder=respond) as model:
        command = [
            *(CONSOLE, "run", "suites/spawner", "--live", "--no-report"),
            *("--base-url", model.base_url, "--db", str(tmp_path / "evals.duckdb")),
        ]
        cli = subprocess.Popen(
            command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            _wait_for(lambda: started.exists() or cli.poll() is not None)
            assert cli.poll() is None, cli.communicate()
            cli.send_signal(signal.SIGINT)
            out, err = cli.communicate(timeout=BOUND_S)
        finally:
            cli.kill()
    assert cli.returncode == 130, out + err
    assert "Traceback" not in err and "interrupted" in err
    assert _ends(pids["server"]) and _ends(pids["child"])


# -- helpers -------------------------------------------------------------------------------------
def _wait_for(condition: Any) -> None:
    deadline = time.monotonic() + BOUND_S
    while not condition():
        assert time.monotonic() < deadline, "never happened"
        time.sleep(0.02)


async def _exists(path: Path) -> None:
    deadline = time.monotonic() + BOUND_S
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        await asyncio.sleep(0.02)


def _ends(pid: int) -> bool:
    """Whether process `pid` is gone (or a zombie) within a bound."""
    deadline = time.monotonic() + 15
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    return True
