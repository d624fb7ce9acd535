"""`agentbench serve` as users start it, stopped with SIGTERM under load: running requests
drain within the bound, the rest are cancelled, and every run is in the store."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx2 as httpx
import pytest
from sdk_clients import closed_after_test

from agentbench.trace import TraceStore

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

ROOT = Path(__file__).resolve().parent.parent
AGENTS = "tests/fixtures/served_agents.py:desk"
QUESTION = {"model": "desk", "messages": [{"role": "user", "content": "Where is A17?"}]}


class Served:
    """`agentbench serve` in a child process, on a free port."""

    def __init__(
        self, db: Path, delay_s: float, *args: str, target: str = AGENTS, gate: Path | None = None
    ) -> None:
        env = {**os.environ, "AGENTBENCH_TEST_DELAY": str(delay_s)}
        if gate is not None:
            env["AGENTBENCH_TEST_GATE"] = str(gate)
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "agentbench",
                "serve",
                target,
                "--port",
                "0",
                "--db",
                str(db),
                *args,
            ],
            cwd=ROOT,
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.log: list[str] = []
        self.url = self._wait_for_url()
        self._reader = threading.Thread(target=self._drain_log, daemon=True)
        self._reader.start()

    def _wait_for_url(self) -> str:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.log.append(line)
            found = re.search(r"on (http://127\.0\.0\.1:\d+)/v1", line)
            if found:
                return found.group(1)
        raise AssertionError("serve did not start:\n" + "".join(self.log))

    def _drain_log(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.log.append(line)

    def running(self) -> int:
        return httpx.get(f"{self.url}/healthz").json()["running"]

    def stop(self) -> None:
        """SIGTERM, then the exit uvicorn makes after a graceful shutdown: it re-raises the
        signal it caught, so supervisors see the process ended on SIGTERM."""
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=30)
        self._reader.join(5)
        assert self.process.stderr is not None
        self.process.stderr.close()
        assert code == -signal.SIGTERM, "".join(self.log)
        assert "Application shutdown complete" in "".join(self.log)


def _post_in_thread(url: str, results: list, path: str = "/v1/chat/completions") -> None:
    def post() -> None:
        try:
            body = QUESTION if path.endswith("completions") else {"input": "Where is A17?"}
            results.append(httpx.post(f"{url}{path}", json=body, timeout=60).status_code)
        except httpx.TransportError as error:
            results.append(type(error).__name__)

    threading.Thread(target=post, daemon=True).start()


def _wait_for(condition, why=lambda: "", timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting: {why()}")
        time.sleep(0.02)


def _stop_reasons(db: Path) -> list[str]:
    store = TraceStore(db)
    rows = store.sql("SELECT stop_reason FROM runs WHERE parent_run_id IS NULL").rows
    return sorted(row[0] for row in rows)


@pytest.mark.server
def test_sigterm_lets_running_requests_finish_and_stores_them_all(tmp_path: Path) -> None:
    db = tmp_path / "traces.duckdb"
    served = Served(db, 1.0, "--drain", "20")
    results: list = []
    for _ in range(6):
        _post_in_thread(served.url, results)
    _wait_for(lambda: served.running() == 6)
    served.stop()
    _wait_for(lambda: len(results) == 6)
    assert results == [200] * 6
    assert _stop_reasons(db) == ["completed"] * 6
    with pytest.raises(httpx.TransportError):
        httpx.post(f"{served.url}/v1/chat/completions", json=QUESTION)


def _draining(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz").status_code == 503
    except httpx.TransportError:  # not listening: not draining either
        return False


@pytest.mark.server
def test_during_the_drain_new_requests_are_answered_503_with_retry_after(tmp_path: Path) -> None:
    """The listening socket stays open while running requests finish: a request arriving
    then is told to go elsewhere (503, Retry-After), not refused a connection."""
    db, gate = tmp_path / "traces.duckdb", tmp_path / "open"
    served = Served(db, 0.0, "--drain", "60", gate=gate)
    results: list = []
    for _ in range(3):
        _post_in_thread(served.url, results)
    _wait_for(lambda: served.running() == 3)
    served.process.send_signal(signal.SIGTERM)
    _wait_for(lambda: _draining(served.url), lambda: "".join(served.log))
    late = httpx.post(f"{served.url}/v1/chat/completions", json=QUESTION)
    late_run = httpx.post(f"{served.url}/v1/runs", json={"input": "Where is A17?"})
    health = httpx.get(f"{served.url}/healthz")
    gate.touch()  # the running requests may finish now
    served.stop()
    _wait_for(lambda: len(results) == 3)
    assert (late.status_code, late_run.status_code) == (503, 503)
    assert late.headers["retry-after"] == "1" and late.json()["error"]["code"] == "draining"
    assert health.json()["status"] == "draining" and health.json()["running"] == 3
    assert results == [200] * 3
    assert _stop_reasons(db) == ["completed"] * 3


@pytest.mark.server
def test_sigterm_past_the_drain_bound_cancels_and_still_stores_every_run(tmp_path: Path) -> None:
    db = tmp_path / "traces.duckdb"
    served = Served(db, 60.0, "--drain", "1")
    results: list = []
    for _ in range(3):
        _post_in_thread(served.url, results)
    for _ in range(2):
        _post_in_thread(served.url, results, "/v1/runs")
    _wait_for(lambda: served.running() == 5, lambda: f"{served.running()} running, {results}")
    started = time.monotonic()
    served.stop()
    assert time.monotonic() - started < 15
    assert _stop_reasons(db) == ["cancelled"] * 5
    assert "Traceback" not in "".join(served.log)


@pytest.mark.server
def test_served_on_an_openai_compatible_model_over_http(tmp_path: Path) -> None:
    """`--model/--base-url`: the served conversation's model is a real HTTP endpoint (the
    bundled server, answering as the desk's model does), called through the openai SDK."""
    import asyncio

    import openai
    from serve_support import Desk

    from agentbench.testing import OpenAICompatibleServer

    desk = Desk()

    def answer(request: dict) -> object:
        return asyncio.run(desk(request))

    with OpenAICompatibleServer(responder=answer) as model_server:
        served = Served(
            tmp_path / "traces.duckdb",
            0.0,
            "--model",
            "desk-model",
            "--base-url",
            model_server.base_url,
            target="tests/fixtures/served_agents.py:plain",
        )
        try:
            client = closed_after_test(
                openai.OpenAI(base_url=f"{served.url}/v1", api_key="unused", max_retries=0)
            )
            reply = client.chat.completions.create(
                model="plain", messages=[{"role": "user", "content": "Where is A17?"}]
            )
        finally:
            served.stop()
    assert reply.choices[0].message.content == "Order A17 is delivered."
    assert desk.calls == 2  # a tool call, then the answer: both over HTTP
    assert _stop_reasons(tmp_path / "traces.duckdb") == ["completed"]
