"""`agentbench serve` per caller: a key names its caller, who sees, streams and cancels only
the runs it started; other callers' runs, runs the store holds that this server did not
serve, and ids that are only a prefix all answer the same 404; an admin key reads every
served run; a restart keeps who started what. Key files are bounded and checked; a server
without keys is one user's, on loopback."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx2 as httpx
import openai
import orjson
import pytest
from sdk_clients import closed_after_test
from serve_support import Desk, desk_agent, keyring, served, service_for

from agentbench import Runner
from agentbench.cli import main
from agentbench.runtime.models import FunctionModel
from agentbench.trace import TraceStore

ROOT = Path(__file__).resolve().parent.parent
ALICE, BOB, OPS = (
    "alice-key-7Qm2Vb8Nc4Rt6Yw1",
    "bob-key-Zs3Kd5Hf0Jg9Lp2Xc",
    "ops-key-Wq4Er7Ty1Ui8Op3As",
)
KEYS = {"alice": ALICE, "bob": BOB, "ops": OPS}
QUESTION = [{"role": "user", "content": "Where is my order A17?"}]


def _as(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


def _wait_for(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.01)


def _frames(http: httpx.Client, run_id: str, key: str) -> list[tuple[str, dict]]:
    frames, kind = [], ""
    with http.stream("GET", f"/v1/runs/{run_id}/events", headers=_as(key)) as stream:
        assert stream.status_code == 200
        for line in stream.iter_lines():
            if line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: "):
                frames.append((kind, orjson.loads(line[6:])))
    return frames


def test_a_caller_sees_streams_and_cancels_only_its_own_runs(tmp_path: Path) -> None:
    desk = Desk(delay_s=30)
    store = TraceStore(tmp_path / "traces.duckdb")
    service = service_for(desk_agent(desk), store=store, keys=keyring(KEYS, admins=("ops",)))
    with served(service) as url, httpx.Client(base_url=url) as http:
        created = http.post("/v1/runs", json={"input": "Where is A17?"}, headers=_as(ALICE))
        run_id = created.json()["id"]
        _wait_for(lambda: desk.calls == 1)
        by_bob = [
            http.get(f"/v1/runs/{run_id}", headers=_as(BOB)),
            http.get(f"/v1/runs/{run_id}/events", headers=_as(BOB)),
            http.delete(f"/v1/runs/{run_id}", headers=_as(BOB)),
        ]
        unknown = http.get("/v1/runs/run_0123456789abcdef", headers=_as(BOB))
        by_admin = http.get(f"/v1/runs/{run_id}", headers=_as(OPS))
        admin_cancel = http.delete(f"/v1/runs/{run_id}", headers=_as(OPS))
        still = http.get(f"/v1/runs/{run_id}", headers=_as(ALICE))
        cancelled = http.delete(f"/v1/runs/{run_id}", headers=_as(ALICE))
        frames = _frames(http, run_id, ALICE)
    store.close()
    assert created.status_code == 202
    # Another caller's run is answered exactly as a run that does not exist.
    assert [r.status_code for r in by_bob] == [404, 404, 404]
    assert {r.json()["error"]["code"] for r in [*by_bob, unknown]} == {"run_not_found"}
    assert by_bob[0].json()["error"]["message"].replace(run_id, "ID") == (
        unknown.json()["error"]["message"].replace("run_0123456789abcdef", "ID")
    )
    # An admin key reads every served run, and cancels only its own.
    assert by_admin.status_code == 200 and by_admin.json()["id"] == run_id
    assert admin_cancel.status_code == 404
    assert still.json()["status"] == "running"
    assert cancelled.status_code == 200 and cancelled.json()["stop_reason"] == "cancelled"
    assert frames[0][0] == "run_started" and frames[-1][0] == "done"
    rows = TraceStore(tmp_path / "traces.duckdb").sql("SELECT run_id, caller FROM runs").rows
    assert rows == [(run_id, "alice")]


async def test_only_served_runs_are_visible_and_ids_match_exactly(tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "traces.duckdb")
    # A run another program recorded in the same store: not this server's to show.
    other = await Runner.run(desk_agent(), "Where is A17?", store=store)
    service = service_for(desk_agent(), store=store, keys=keyring(KEYS, admins=("ops",)))
    with served(service) as url:
        client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key=ALICE, max_retries=0)
        answer = await client.chat.completions.create(model="desk", messages=QUESTION)
        await client.close()
        mine = answer.model_extra["agentbench"]["run_id"]
        with httpx.Client(base_url=url) as http:
            asked = {
                (key_name, label): http.get(f"/v1/runs/{run_id}", headers=_as(key)).status_code
                for key_name, key in (("alice", ALICE), ("ops", OPS))
                for label, run_id in (
                    ("other program's", other.run_id),
                    ("its events", f"{other.run_id}/events"),
                    ("prefix", mine[:10]),
                    ("longer prefix", mine[:-1]),
                    ("own", mine),
                )
            }
    store.close()
    assert asked == {
        (name, label): 200 if label == "own" else 404
        for name in ("alice", "ops")
        for label in ("other program's", "its events", "prefix", "longer prefix", "own")
    }


def test_who_started_a_run_survives_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "traces.duckdb"
    keys = keyring(KEYS, admins=("ops",))
    store = TraceStore(db)
    with served(service_for(desk_agent(), store=store, keys=keys)) as url:
        answer = closed_after_test(
            openai.OpenAI(base_url=f"{url}/v1", api_key=ALICE, max_retries=0)
        )
        run_id = answer.chat.completions.create(model="desk", messages=QUESTION).model_extra[
            "agentbench"
        ]["run_id"]
    store.close()
    store = TraceStore(db)  # a new server on the same store: the run is answered from it
    with (
        served(service_for(desk_agent(), store=store, keys=keys)) as url,
        httpx.Client(base_url=url) as http,
    ):
        alice = http.get(f"/v1/runs/{run_id}", headers=_as(ALICE))
        bob = http.get(f"/v1/runs/{run_id}", headers=_as(BOB))
        bob_events = http.get(f"/v1/runs/{run_id}/events", headers=_as(BOB))
        ops = http.get(f"/v1/runs/{run_id}", headers=_as(OPS))
        frames = _frames(http, run_id, ALICE)
    store.close()
    assert alice.status_code == 200 and alice.json()["output"] == "Order A17 is delivered."
    assert (bob.status_code, bob_events.status_code, ops.status_code) == (404, 404, 200)
    assert frames[-1] == ("done", alice.json())
    # The key's name is stored, never the key.
    assert TraceStore(db).sql("SELECT DISTINCT caller FROM runs").rows == [("alice",)]
    assert all(key.encode() not in db.read_bytes() for key in KEYS.values())


def test_a_keyless_server_answers_only_requests_addressed_to_loopback() -> None:
    with served(service_for(desk_agent())) as url, httpx.Client(base_url=url) as http:
        rebound = http.get("/v1/models", headers={"host": "attacker.example"})
        cross_site = http.post(
            "/v1/runs", json={"input": "hi"}, headers={"origin": "https://attacker.example"}
        )
        sandboxed = http.post("/v1/runs", json={"input": "hi"}, headers={"origin": "null"})
        local_page = http.get("/v1/models", headers={"origin": "http://localhost:3000"})
        named = http.get("/v1/models", headers={"host": "localhost:8000"})
    assert [rebound.status_code, cross_site.status_code, sandboxed.status_code] == [403] * 3
    assert "--keys FILE" in rebound.json()["error"]["message"]
    assert local_page.status_code == named.status_code == 200


def _serve(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`agentbench serve` that must refuse to start (a timeout: it started serving)."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "agentbench",
            "serve",
            "tests/fixtures/served_agents.py:desk",
            "--port",
            "0",
            *args,
        ],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.server
def test_without_keys_serve_refuses_to_listen_beyond_loopback(tmp_path: Path) -> None:
    refused = _serve("--host", "0.0.0.0", "--db", str(tmp_path / "t.duckdb"))
    assert refused.returncode == 2, refused.stderr
    assert "--host 0.0.0.0: without keys anyone who can reach that address" in refused.stderr
    assert "Traceback" not in refused.stderr


GOOD = "k" * 16


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("alice: short", "keys:1: a key is 16 to 512 letters, digits or '-._~+/=' (this one has 5"),
        (f"alice: {GOOD}\nalice: {'m' * 16}", "keys:2: key name 'alice' is given twice (also at"),
        (f"alice: {GOOD}\nbob: {GOOD}", "keys:2: the key of 'bob' is also the key of 'alice'"),
        (f"al ice: {GOOD}", "keys:1: expected 'name: key' (or 'name: key admin')"),
        (f"al/ice: {GOOD}", "keys:1: key name 'al/ice': expected 1 to 64 letters"),
        (f"local: {GOOD}", "keys:1: the name 'local' is the keyless server's"),
        (f"ops: {GOOD} root", "keys:1: after the key, only 'admin' may follow (got 'root')"),
        (f"alice: {'k' * 15}é", "keys:1: a key is 16 to 512 letters"),
        ("# only a comment\n\n", "holds no key (expected lines 'name: key')"),
        (f"alice {GOOD}", "keys:1: expected 'name: key'"),
    ],
)
def test_a_bad_key_file_is_refused_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, says: str
) -> None:
    keys = tmp_path / "keys"
    keys.write_text(text, encoding="utf-8")
    assert main(["serve", "x:y", "--keys", str(keys)]) == 2
    said = capsys.readouterr().err
    assert says in said
    assert GOOD not in said  # an error never repeats a key


def test_key_files_are_bounded_and_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    huge, binary, missing = tmp_path / "huge", tmp_path / "binary", tmp_path / "missing"
    huge.write_text("".join(f"k{i}: {'x' * 40}{i:08d}\n" for i in range(2000)))
    binary.write_bytes(b"alice: \xff\xfe" + b"k" * 20)
    said = {}
    for path in (huge, binary, missing):
        assert main(["serve", "x:y", "--keys", str(path)]) == 2
        said[path.name] = capsys.readouterr().err
    assert "over 64 KiB; a key file holds at most 1,000 'name: key' lines" in said["huge"]
    assert "not UTF-8 text (byte 7)" in said["binary"]
    assert "cannot read it: No such file or directory" in said["missing"]


def test_keys_come_from_a_file_and_an_environment_variable(tmp_path: Path) -> None:
    from agentbench.serve.callers import KeyEntries, read_key_file, read_key_variable

    keys = tmp_path / "keys"
    keys.write_text(f"# callers\nalice: {ALICE}\n\nops: {OPS} admin\n")
    entries = KeyEntries()
    read_key_file(keys, entries)
    read_key_variable("SERVE_KEYS", f"bob: {BOB}, carol: {'c' * 20}\n", entries)
    ring = entries.keyring()
    bare = KeyEntries()
    read_key_variable("SERVE_KEY", f"  {BOB}\n", bare)
    assert [(c.name, c.admin) for c in ring.callers] == [
        ("alice", False),
        ("ops", True),
        ("bob", False),
        ("carol", False),
    ]
    assert ring.identify(OPS).admin and ring.identify(BOB).name == "bob"
    assert ring.identify(ALICE + "x") is None and ring.identify("") is None
    assert [c.name for c in bare.keyring().callers] == ["default"]
    assert set(ring.secrets) == {ALICE, OPS, BOB, "c" * 20}


def test_a_keyed_server_masks_every_key_it_knows(tmp_path: Path) -> None:
    """A caller pasting a key (its own or another's) into a message: masked in the store and
    in the answer."""

    def echo(request: dict) -> str:
        return f"You said: {request['messages'][-1]['content']}"

    agent = desk_agent()
    agent.model = FunctionModel(echo)
    store = TraceStore(tmp_path / "traces.duckdb")
    with served(service_for(agent, store=store, keys=keyring(KEYS))) as url:
        client = closed_after_test(
            openai.OpenAI(base_url=f"{url}/v1", api_key=ALICE, max_retries=0)
        )
        answer = client.chat.completions.create(
            model="desk", messages=[{"role": "user", "content": f"bob's key is {BOB}"}]
        )
    store.close()
    assert answer.choices[0].message.content == "You said: bob's key is [REDACTED]"
    assert BOB.encode() not in (tmp_path / "traces.duckdb").read_bytes()


def test_keys_read_from_the_environment_leave_it_and_an_open_key_file_is_warned_of(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The variable is read once and removed, so the agents' tools and the processes they
    start do not inherit the keys; a key file other users can read is warned of."""
    from agentbench.commands.serve import _keys

    monkeypatch.setenv("SERVE_KEYS", f"alice: {ALICE}")
    kept, shared = tmp_path / "kept", tmp_path / "shared"
    for path, mode in ((kept, 0o600), (shared, 0o644)):
        path.write_text(f"bob: {BOB}\n")
        path.chmod(mode)
    ring = _keys(kept, "SERVE_KEYS")
    quiet = capsys.readouterr().err
    _keys(shared, None)
    warned = capsys.readouterr().err
    assert [c.name for c in ring.callers] == ["bob", "alice"]
    assert "SERVE_KEYS" not in os.environ
    assert quiet == ""
    assert f"can be read by other users (mode 644); chmod 600 {shared}" in warned
