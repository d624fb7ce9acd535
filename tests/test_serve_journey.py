"""The served desk's whole path, as README shows it, through the real CLI: `agentbench serve`
started as users start it, three conversations from the openai SDK (one streamed), then
`traces list`, `replay RUN_ID` (no --agent: the run knows what served it), `promote` into
the customer-service suite, and `agentbench run` of the promoted case. Then the desk served
to several callers with a key file, each one's runs its own, across a restart."""

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
from sdk_clients import closed_after_test

pytestmark = pytest.mark.slow  # journeys through the real CLI, seconds each

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


KEYS = {
    "alice": "alice-Qm2Vb8Nc4Rt6Yw1Zs3Kd",
    "bob": "bob-Hf0Jg9Lp2Xc7Wq4Er7Ty1",
    "ops": "ops-Ui8Op3As5Df6Gh7Jk8Lz9",
}


def _serve_keyed(db: Path, keys: Path) -> tuple[subprocess.Popen[str], str]:
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agentbench",
            "serve",
            "tests/fixtures/served_agents.py:desk",
            "--keys",
            str(keys),
            "--db",
            str(db),
            "--port",
            "0",
        ],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    assert server.stderr is not None
    for line in server.stderr:
        found = re.search(r"on (http://127\.0\.0\.1:\d+/v1) .*; 3 key\(s\)\)", line)
        if found:
            return server, found.group(1)
    raise AssertionError("serve did not start")


def _stop(server: subprocess.Popen[str]) -> None:
    server.send_signal(signal.SIGTERM)
    server.wait(30)
    assert server.stderr is not None
    server.stderr.close()


@pytest.mark.server
def test_a_desk_served_to_several_callers_keeps_each_ones_runs_its_own(tmp_path: Path) -> None:
    """Three keys in a key file; the openai SDK as each caller's client. Alice's answers and
    runs are hers: Bob cannot read, stream or cancel them (404, as for no run at all), the
    admin key reads them, a wrong key is refused, and all of it holds after a restart."""
    import openai

    db, keys = tmp_path / "traces.duckdb", tmp_path / "serve-keys"
    keys.write_text(
        "# name: key [admin]\n"
        f"alice: {KEYS['alice']}\nbob: {KEYS['bob']}\nops: {KEYS['ops']} admin\n"
    )

    def client(url: str, who: str) -> openai.OpenAI:
        return closed_after_test(
            openai.OpenAI(base_url=url, api_key=KEYS.get(who, who), max_retries=0)
        )

    server, url = _serve_keyed(db, keys)
    try:
        alice, bob, ops = client(url, "alice"), client(url, "bob"), client(url, "ops")
        question = [{"role": "user", "content": "Where is my order A17?"}]
        answer = alice.chat.completions.create(model="desk", messages=question)
        run = answer.model_extra["agentbench"]["run_id"]
        streamed = alice.chat.completions.create(model="desk", messages=question, stream=True)
        text = "".join(c.choices[0].delta.content or "" for c in streamed if c.choices)
        mine = alice.get(f"/runs/{run}", cast_to=object)
        as_admin = ops.get(f"/runs/{run}", cast_to=object)
        for attempt in (
            lambda: bob.get(f"/runs/{run}", cast_to=object),
            lambda: bob.get(f"/runs/{run}/events", cast_to=object),
            lambda: bob.delete(f"/runs/{run}", cast_to=object),
            lambda: bob.get(f"/runs/{run[:12]}", cast_to=object),
        ):
            with pytest.raises(openai.NotFoundError, match=r"no run .* that this key may see"):
                attempt()
        with pytest.raises(openai.AuthenticationError):
            client(url, "not-a-key-at-all-0000").models.list()
    finally:
        _stop(server)
    server, url = _serve_keyed(db, keys)  # restarted on the same store
    try:
        after_restart = client(url, "alice").get(f"/runs/{run}", cast_to=object)
        with pytest.raises(openai.NotFoundError):
            client(url, "bob").get(f"/runs/{run}", cast_to=object)
    finally:
        _stop(server)
    assert answer.choices[0].message.content == text == "Order A17 is delivered."
    assert mine["output"] == as_admin["output"] == after_restart["output"] == text
    listed = subprocess.run(
        [sys.executable, "-m", "agentbench", "traces", "list", "--db", str(db), "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    callers = {orjson.loads(line)["caller"] for line in listed.stdout.splitlines()}
    assert callers == {"alice"}
    shown = subprocess.run(
        [sys.executable, "-m", "agentbench", "traces", "show", run, "--db", str(db)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "by tests/fixtures/served_agents.py:desk for caller alice" in shown.stdout
    assert all(key.encode() not in db.read_bytes() for key in KEYS.values())
