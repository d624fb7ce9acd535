"""`agentbench mcp-proxy` as a user runs it: between the real `mcp` SDK's client (or raw
JSON-RPC lines) and a real MCP server (golden/openai_agents_mcp's stock server, over stdio).

Record then replay with no server; a call the recording lacks names the nearest recorded one
(exit 1); each fault kind; a live server whose tool description changed is named by tool and
field; `--update` refreshes the recording and says what changed; Streamable HTTP with
`--port`; bad input is a one-line error with exit 2.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentbench.mcp_proxy.recording import load_file

pytestmark = pytest.mark.slow  # processes: an MCP server behind a proxy, each a second or so

pytest.importorskip("mcp")

ROOT = Path(__file__).resolve().parent.parent
SERVER = [sys.executable, "-m", "golden.openai_agents_mcp.stock_server"]
PROXY = [sys.executable, "-m", "agentbench", "mcp-proxy"]
HANDSHAKE = [
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    },
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
]


def find(sku: str, number: int = 3) -> dict[str, Any]:
    params = {"name": "find_part", "arguments": {"sku": sku}}
    return {"jsonrpc": "2.0", "id": number, "method": "tools/call", "params": params}


def proxy(
    *args: str, messages: list[dict[str, Any]], cwd: Path = ROOT
) -> tuple[int, dict[Any, Any], str]:
    """Run the proxy with `messages` on its stdin; (exit code, answers by id, stderr)."""
    lines = "".join(json.dumps(m) + "\n" for m in messages)
    done = subprocess.run(
        [*PROXY, *args], input=lines, capture_output=True, text=True, cwd=cwd, timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    answers = {}
    for line in done.stdout.splitlines():
        message = json.loads(line)
        answers[message.get("id")] = message
    return done.returncode, answers, done.stderr


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("mcp") / "stock.mcp.yaml"
    code, answers, err = proxy(
        "--record", str(path), "--", *SERVER, messages=[*HANDSHAKE, find("A-100"), find("Z-9", 4)]
    )
    assert code == 0, err
    assert answers[3]["result"]["structuredContent"]["in_stock"] == 14
    assert answers[4]["result"]["isError"] is True
    return path


def test_a_recording_keeps_the_handshake_the_tool_list_and_every_call(recording: Path) -> None:
    (kept,) = load_file(recording).values()
    assert (
        kept.initialize is not None and kept.initialize["serverInfo"]["name"] == "agentbench-stock"
    )
    assert [t["name"] for t in kept.tools or []] == ["find_part", "reserve_part"]
    calls = [(c.method, c.params.get("arguments")) for c in kept.calls]
    assert calls == [("tools/call", {"sku": "A-100"}), ("tools/call", {"sku": "Z-9"})]


def test_replay_answers_as_recorded_with_no_server(recording: Path, tmp_path: Path) -> None:
    code, answers, err = proxy(
        "--replay", str(recording), messages=[*HANDSHAKE, find("A-100"), find("Z-9", 4)],
        cwd=tmp_path,  # no golden/ here: nothing could start the server
    )  # fmt: skip
    assert code == 0, err
    assert answers[1]["result"]["serverInfo"]["name"] == "agentbench-stock"
    assert answers[3]["result"]["structuredContent"]["in_stock"] == 14
    assert "no part with SKU Z-9" in answers[4]["result"]["content"][0]["text"]
    assert "answered 4 request(s); 0 difference(s)" in err


def test_a_call_the_recording_lacks_names_the_nearest_recorded_call(recording: Path) -> None:
    code, answers, err = proxy("--replay", str(recording), messages=[*HANDSHAKE, find("A-101")])
    assert code == 1, err
    message = answers[3]["error"]["message"]
    assert 'no recorded answer for tools/call find_part {"sku":"A-101"}' in message
    assert 'nearest recorded: tools/call find_part {"sku":"A-100"}' in message
    assert "arguments.sku: 'A-100' → 'A-101'" in message
    assert "no recorded answer: tools/call find_part" in err


@pytest.mark.parametrize(
    ("rule", "check"),
    [
        ("fault", lambda a: a["result"]["isError"] and "injected fault" in str(a)),
        ("fault:jsonrpc", lambda a: "injected fault: a JSON-RPC error" in a["error"]["message"]),
        ("stub:{\"sku\": \"A-100\", \"in_stock\": 0}",
         lambda a: a["result"]["structuredContent"] == {"sku": "A-100", "in_stock": 0}),
        ("fault:slow:0.3", lambda a: a["result"]["structuredContent"]["in_stock"] == 14),
    ],
    ids=["error", "jsonrpc", "stub", "slow"],
)  # fmt: skip
def test_a_tool_policy_answers_in_place_of_the_recording(
    recording: Path, rule: str, check: Any
) -> None:
    code, answers, err = proxy(
        "--replay", str(recording), "--tool", f"find_part={rule}",
        messages=[*HANDSHAKE, find("A-100")],
    )  # fmt: skip
    assert code == 0, err
    assert check(answers[3]), answers[3]


def test_an_injected_crash_ends_the_session_with_no_answer(recording: Path) -> None:
    _, answers, err = proxy(
        "--replay", str(recording), "--tool", "find_part=fault:crash",
        messages=[*HANDSHAKE, find("A-100")],
    )  # fmt: skip
    assert 3 not in answers and 1 in answers
    assert "ended by an injected crash" in err


def test_a_live_server_with_another_description_is_named_by_tool_and_field(
    recording: Path, tmp_path: Path
) -> None:
    changed = tmp_path / "stock_server.py"
    source = (ROOT / "golden" / "openai_agents_mcp" / "stock_server.py").read_text()
    changed.write_text(source.replace('"""Look a spare part up', '"""Find a spare part'))
    code, answers, err = proxy(
        "--replay", str(recording), "--live", "--", sys.executable, str(changed),
        messages=[*HANDSHAKE, find("A-100")],
    )  # fmt: skip
    assert code == 1, err
    assert answers[3]["result"]["structuredContent"]["in_stock"] == 14
    assert "tool list changed: tools/list" in err
    assert "find_part.description: 'Look a spare" in err and "'Find a spare" in err


def test_update_refreshes_the_tool_list_and_says_what_changed(
    recording: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "stock.mcp.yaml"
    copy.write_text(recording.read_text())
    changed = tmp_path / "stock_server.py"
    source = (ROOT / "golden" / "openai_agents_mcp" / "stock_server.py").read_text()
    changed.write_text(source.replace('"""Look a spare part up', '"""Find a spare part'))
    done = subprocess.run(
        [*PROXY, "--update", str(copy), "--", sys.executable, str(changed)],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "find_part.description" in done.stderr and "1 change(s) to the tools" in done.stderr
    (kept,) = load_file(copy).values()
    assert (kept.tools or [])[0]["description"].startswith("Find a spare part")
    assert len(kept.calls) == 2  # the recorded calls are kept


def test_streamable_http_serves_the_real_sdk_client(recording: Path) -> None:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    server = subprocess.Popen(
        [*PROXY, "--replay", str(recording), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        assert line.startswith("agentbench mcp-proxy: serving http://127.0.0.1:"), line
        url = line.split("serving ", 1)[1].strip()

        async def use() -> tuple[list[str], Any]:
            async with streamable_http_client(url) as streams, ClientSession(*streams[:2]) as s:
                await s.initialize()
                tools = await s.list_tools()
                result = await s.call_tool("find_part", {"sku": "A-100"})
                return [t.name for t in tools.tools], result.structured_content

        names, content = asyncio.run(use())
        assert names == ["find_part", "reserve_part"]
        assert content is not None and content["in_stock"] == 14
    finally:
        server.terminate()
        server.communicate(timeout=10)  # and its pipes closed


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ([], "needs one of --record, --replay or --update FILE"),
        (["--replay", "nosuch.yaml"], "--replay: nosuch.yaml"),
        (["--record", "x.yaml"], "--record needs the real server"),
        (["--replay", "x.yaml", "--tool", "find_part=fault:boom"], "expected fault, fault:error"),
        (["--update", "x.yaml"], "--update needs the live server"),
    ],
    ids=["no-mode", "missing-file", "record-without-server", "bad-fault", "update-without-server"],
)  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(args: list[str], says: str, tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_text("format: 1\nservers: {}\n")
    done = subprocess.run(
        [*PROXY, *args], capture_output=True, text=True, timeout=30, cwd=tmp_path, input=""
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert says in done.stderr
    assert "Traceback" not in done.stderr


def test_a_server_that_never_starts_leaves_the_recording_as_it_was(tmp_path: Path) -> None:
    kept = tmp_path / "stock.mcp.yaml"
    kept.write_text("format: 1\nservers: {}\n")
    code, answers, err = proxy(
        "--record", str(kept), "--", str(tmp_path / "no-such-server"), messages=HANDSHAKE[:1]
    )
    assert code == 3, err  # the real server failed
    assert "could not be started" in answers[1]["error"]["message"]
    assert "nothing recorded" in err and "left as it was" in err
    assert kept.read_text() == "format: 1\nservers: {}\n"
