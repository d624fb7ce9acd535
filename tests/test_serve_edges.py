"""`agentbench serve` at its edges (issue 34's review of serve): cancelling a finished run
after a restart, bodies that are not UTF-8 or not JSON, key files and variables written in
unusual ways, and what a failing model or agent is answered.

The probes, each answered otherwise before: DELETE of one's own finished run after a restart
was 404 "no run … that this key may see" while GET was 200 (409 before the restart); a body
`"hi \\xff"` was FastAPI's `{"detail": "There was an error parsing the body"}`; a key file
starting with a UTF-8 byte order mark was refused as `key name '\\ufeffalice'`;
`AGENTBENCH_SERVE_KEYS=""` was "not set"; a model raising was `500 "RuntimeError:
RuntimeError: …"` where docs/serve.md says 502.
"""

from __future__ import annotations

from pathlib import Path

import httpx2 as httpx
import openai
import pytest
from serve_support import desk_agent, keyring, served, service_for

from agentbench.cli import main
from agentbench.runtime.memory import MemoryPolicy
from agentbench.runtime.models import FunctionModel
from agentbench.serve.callers import KeyEntries, read_key_file
from agentbench.trace import TraceStore

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

ROOT = Path(__file__).resolve().parent.parent
ALICE, BOB, OPS = "alice-key-7Qm2Vb8Nc4Rt6Yw1", "bob-key-Zs3Kd5Hf0Jg9Lp2Xc", "ops-key-Wq4Er7Ty1Ui"
QUESTION = [{"role": "user", "content": "Where is my order A17?"}]


def _as(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


def test_cancelling_your_finished_run_is_409_before_and_after_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "traces.duckdb"
    keys = keyring({"alice": ALICE, "bob": BOB, "ops": OPS}, admins=("ops",))
    store = TraceStore(db)
    with served(service_for(desk_agent(), store=store, keys=keys)) as url:
        with openai.OpenAI(base_url=f"{url}/v1", api_key=ALICE, max_retries=0) as client:
            answer = client.chat.completions.create(model="desk", messages=QUESTION)
        run_id = answer.model_extra["agentbench"]["run_id"]
        with httpx.Client(base_url=url) as http:
            before = http.delete(f"/v1/runs/{run_id}", headers=_as(ALICE))
    store.close()
    store = TraceStore(db)  # a new server on the same store
    with (
        served(service_for(desk_agent(), store=store, keys=keys)) as url,
        httpx.Client(base_url=url) as http,
    ):
        seen = http.get(f"/v1/runs/{run_id}", headers=_as(ALICE))
        after = http.delete(f"/v1/runs/{run_id}", headers=_as(ALICE))
        other = http.delete(f"/v1/runs/{run_id}", headers=_as(BOB))
        admin = http.delete(f"/v1/runs/{run_id}", headers=_as(OPS))  # reads all, cancels its own
    store.close()
    assert (seen.status_code, before.status_code, after.status_code) == (200, 409, 409)
    for answered in (before, after):
        assert answered.json()["error"]["code"] == "run_finished"
        assert answered.json()["error"]["message"] == (
            f"run {run_id} cannot be cancelled: it already finished (completed)"
        )
    assert other.status_code == admin.status_code == 404
    assert other.json()["error"]["code"] == "run_not_found"


@pytest.mark.parametrize(
    ("body", "content_type", "code", "says"),
    [
        (b'"hi \xff"', "application/json", "invalid_unicode", "invalid UTF-8 at byte offset 4"),
        (
            b'{"model": "desk", "messages": [{"role": "user", "content": "hi \xff"}]}',
            "application/json",
            "invalid_unicode",
            "invalid UTF-8 at byte offset 63",
        ),
        (b"\xc3(", "text/plain", "invalid_unicode", "invalid UTF-8 at byte offset 0"),
        (
            b'{"model": "desk", "messages": [}',
            "application/json",
            "invalid_json",
            "not valid JSON at line 1, column 32",
        ),
        (b'{"model": "desk",\n "messages": ', "text/plain", "invalid_json", "at line 2, column"),
        (
            b'{"messages": ' + b"[" * 5000 + b"]" * 5000 + b"}",
            "application/json",
            "invalid_json",
            "nests arrays or objects too deeply",
        ),
    ],
    ids=["utf8-string", "utf8-in-content", "utf8-text-plain", "json", "json-cut", "json-deep"],
)
def test_a_body_that_is_not_utf8_or_not_json_is_a_400_in_the_openai_shape(
    body: bytes, content_type: str, code: str, says: str
) -> None:
    with served(service_for(desk_agent())) as url, httpx.Client(base_url=url) as http:
        answers = [
            http.post(path, content=body, headers={"content-type": content_type})
            for path in ("/v1/chat/completions", "/v1/runs")
        ]
    for answer in answers:
        assert answer.status_code == 400
        error = answer.json()["error"]
        assert set(answer.json()) == {"error"} and set(error) == {
            "message",
            "type",
            "param",
            "code",
        }
        assert (error["type"], error["code"]) == ("invalid_request_error", code)
        assert says in error["message"]


def test_unknown_routes_and_methods_are_answered_in_the_openai_shape() -> None:
    with served(service_for(desk_agent())) as url, httpx.Client(base_url=url) as http:
        missing = http.get("/v1/nothing")
        wrong = http.put("/v1/runs")
    assert missing.status_code == 404
    assert missing.json()["error"]["message"] == "Not Found: GET /v1/nothing"
    assert wrong.status_code == 405 and wrong.headers["allow"] == "POST"
    assert wrong.json()["error"]["message"] == "Method Not Allowed: PUT /v1/runs"


def test_a_key_file_starting_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_bytes(b"\xef\xbb\xbf" + f"alice: {ALICE}\r\nops: {OPS} admin\r\n".encode())
    entries = KeyEntries()
    read_key_file(keys, entries)
    ring = entries.keyring()
    assert [(c.name, c.admin) for c in ring.callers] == [("alice", False), ("ops", True)]
    assert ring.identify(ALICE).name == "alice"


def test_an_empty_key_variable_is_said_to_be_empty_not_unset(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("AGENTBENCH_SERVE_KEYS", "")
    monkeypatch.delenv("NO_SUCH_SERVE_KEYS", raising=False)
    assert main(["serve", "x:y", "--api-key-env", "AGENTBENCH_SERVE_KEYS"]) == 2
    empty = capsys.readouterr().err
    assert main(["serve", "x:y", "--api-key-env", "NO_SUCH_SERVE_KEYS"]) == 2
    unset = capsys.readouterr().err
    assert empty.strip() == (
        "error: --api-key-env AGENTBENCH_SERVE_KEYS: that environment variable is set but "
        "empty (expected 'name: key' entries, or one key)"
    )
    assert unset.strip() == (
        "error: --api-key-env NO_SUCH_SERVE_KEYS: that environment variable is not set"
    )


def _model_that_raises(request: dict) -> str:
    raise RuntimeError("upstream exploded")


def _estimator_with_a_bug(message: dict) -> int:
    raise ValueError("the estimator has a bug")


def test_a_failing_model_is_502_and_a_failing_agent_500_each_saying_it_once() -> None:
    model_down = desk_agent(name="model_down")
    model_down.model = FunctionModel(_model_that_raises)
    buggy = desk_agent(name="buggy")  # its own code fails before any model call
    buggy.memory = MemoryPolicy(max_tokens=10, estimator=_estimator_with_a_bug)
    with served(service_for(model_down, buggy)) as url, httpx.Client(base_url=url) as http:
        answers = {
            name: http.post("/v1/chat/completions", json={"model": name, "messages": QUESTION})
            for name in ("model_down", "buggy")
        }
    upstream, agent = answers["model_down"], answers["buggy"]
    assert upstream.status_code == 502
    assert upstream.json()["error"]["code"] == "model_failed"
    assert upstream.json()["error"]["message"].startswith("RuntimeError: upstream exploded (run ")
    assert agent.status_code == 500
    assert agent.json()["error"]["code"] == "agent_failed"
    assert agent.json()["error"]["message"].startswith("ValueError: the estimator has a bug (run ")
    for answer in (upstream, agent):
        assert answer.text.count("Error:") == 1 and "Traceback" not in answer.text
    doc = (ROOT / "docs" / "guides" / "production.md").read_text()
    assert "502 for a failing model (`model_failed`" in doc
    assert "500 for a failing agent (`agent_failed`" in doc
