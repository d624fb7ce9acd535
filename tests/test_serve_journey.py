"""The served desk's whole path, as README shows it, through the real CLI: `agentbench serve`
started as users start it, three conversations from the openai SDK (one streamed), then
`traces list`, `replay RUN_ID` (no --agent: the run knows what served it), `promote` into
the customer-service suite, and `agentbench run` of the promoted case."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

ROOT = Path(__file__).resolve().parent.parent


def _cli(checkout: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentbench", *args],
        cwd=checkout,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.server
def test_a_served_conversation_becomes_a_passing_golden_case(tmp_path: Path) -> None:
    checkout = tmp_path / "shop"
    for folder in ("golden", "replays", "examples"):
        shutil.copytree(ROOT / folder, checkout / folder)
    subprocess.run(["git", "init", "-q"], cwd=checkout, check=True)
    db = checkout / ".agentbench" / "traces.duckdb"
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agentbench",
            "serve",
            "examples/served_desk.py:desk",
            "--port",
            "0",
        ],
        cwd=checkout,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    assert server.stderr is not None
    try:
        url = None
        for line in server.stderr:
            found = re.search(r"on (http://127\.0\.0\.1:\d+/v1)", line)
            if found:
                url = found.group(1)
                break
        assert url, "serve did not start"
        client = subprocess.run(
            [sys.executable, "examples/served_desk.py", url],
            cwd=checkout,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(30)
        server.stderr.close()
    assert client.returncode == 0, client.stderr
    answers = re.findall(r"→ (.*)\n  run (run_\w+)", client.stdout)
    assert [a for a, _ in answers] == [
        "Order E05 is in transit (ordered 2026-06-28).",
        "Refund R-A17-4250 of 42.5 EUR for order A17 is on its way.",
        "We are open Monday to Friday, 9:00 to 17:00.",
    ]
    refund_run = answers[1][1]

    listed = _cli(checkout, "traces", "list", "--since", "1h", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = [orjson.loads(line) for line in listed.stdout.splitlines()]
    roots = {row["run_id"]: row for row in rows if row["parent_run_id"] is None}
    assert set(roots) == {run for _, run in answers}
    conversations = {row["conversation_id"] for row in roots.values()}
    assert len(conversations) == 1 and next(iter(conversations)).startswith("example-")
    assert all(row["request_id"].startswith("req_") for row in roots.values())
    assert all(row["agent_ref"] == "examples/served_desk.py:desk" for row in roots.values())

    conversation = next(iter(roots.values()))["conversation_id"]
    one = _cli(checkout, "traces", "list", "--conversation", conversation, "--json")
    assert {orjson.loads(line)["conversation_id"] for line in one.stdout.splitlines()} == {
        conversation
    }
    shown = _cli(checkout, "traces", "show", refund_run)
    assert f"conversation {conversation} by examples/served_desk.py:desk" in shown.stdout

    replayed = _cli(checkout, "replay", refund_run)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "verdict: unchanged" in replayed.stdout

    promoted = _cli(checkout, "promote", refund_run, "--suite", "golden/customer_service")
    assert promoted.returncode == 0, promoted.stdout + promoted.stderr
    case = re.search(r"case (promoted-\w+) added", promoted.stdout).group(1)

    ran = _cli(
        checkout,
        "run",
        "golden/customer_service",
        "--filter",
        case,
        "--no-report",
        "--db",
        str(tmp_path / "eval.duckdb"),
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "1      1       0" in ran.stdout
    assert db.exists()
    assert os.environ.get("OPENAI_API_KEY") is None  # offline all along
