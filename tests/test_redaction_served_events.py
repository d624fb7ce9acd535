"""A finished served run's events are shown through the redactor that learned all of it
(issue 34, finding 2).

`GET /v1/runs/{id}/events` of a finished run showed the password in `run_started.input` and in
the first `model_request`: the run's redactor met those events before the `login(password=…)`
call that told it the value was a secret, and each event was kept as it was first redacted,
while the store masked the same run again at its end. Now, once a run has finished, every
event it replays has passed the run's final redactor; a live stream cannot take back the
events it already sent (see docs/serve.md).
"""

from __future__ import annotations

from pathlib import Path

import httpx2 as httpx
import pytest
from serve_support import served, service_for

from agentbench import Agent, ToolCall, tool
from agentbench.runtime.models import FunctionModel
from agentbench.trace import TraceStore

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

PASSWORD = "Winter-Is-Coming-2024"
MARKER = b"visible-marker-9a9a"


@tool(effect="read_only")
def log_in(user: str, password: str) -> str:
    """Log a user in.

    Args:
        user: Who.
        password: Their password.
    """
    return "logged in (visible-marker-9a9a)"


def careless(request: dict) -> object:
    """Passes the password the user typed to `log_in`, then answers."""
    if request["messages"][-1]["role"] == "tool":
        return "You are logged in."
    return ToolCall("log_in", {"user": "ada", "password": PASSWORD})


def vault() -> Agent:
    return Agent(name="vault", tools=[log_in], model=FunctionModel(careless))


def events_of(http: httpx.Client, run_id: str, last_event_id: int | None = None) -> bytes:
    headers = {"last-event-id": str(last_event_id)} if last_event_id is not None else {}
    with http.stream("GET", f"/v1/runs/{run_id}/events", headers=headers) as stream:
        return stream.read()


@pytest.mark.parametrize("held", [True, False], ids=["held_in_memory", "from_the_store"])
def test_a_finished_runs_events_mask_what_it_learned_late(tmp_path: Path, held: bool) -> None:
    store = TraceStore(tmp_path / "traces.duckdb")
    # keep_finished=0: the finished run is answered from the store, not from memory.
    service = service_for(vault(), store=store, keep_finished=1000 if held else 0)
    asked = {"agent": "vault", "input": f"log me in as ada, my password is {PASSWORD}"}
    with served(service) as url, httpx.Client(base_url=url) as http:
        run_id = http.post("/v1/runs", json=asked).json()["id"]
        live = events_of(http, run_id)  # from the first event, until the run is done
        after = events_of(http, run_id)
        resumed = events_of(http, run_id, last_event_id=0)
        status = http.get(f"/v1/runs/{run_id}").content
    store.close()
    assert b"event: done" in live and b"event: done" in after
    for shown in (after, resumed, status):
        assert MARKER in shown or shown is status
        assert PASSWORD.encode() not in shown
    assert b"my password is [REDACTED]" in after
    assert b"event: run_started" not in resumed and b"event: model_request" in resumed
