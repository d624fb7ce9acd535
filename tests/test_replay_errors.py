"""Errors replay as errors: a model call that failed live is in the cassette and fails again.

A session recorded with `record_session` that ended in a model error (an HTTP 500 after
retries, a timeout) is recorded with its failed call: the real status and body where vcrpy
keeps them, and how agentbench reported the failure beside them. Replay raises the same error,
so the run ends with the same stop reason and message and the comparison says unchanged. A
replay that runs out of recorded answers is never "unchanged", in `agentbench replay` or in a
suite. A suite recorded live (`agentbench run --live --record-mode …`) is different: an outage
says nothing about the code, so it writes no cassette and the case is an infrastructure error.
"""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from vcr import serialize as vcr_serialize
from vcr.serializers import jsonserializer, yamlserializer

from agentbench import ModelError, Runner, ScriptedModel, ToolCall
from agentbench.cli import main
from agentbench.errors import ModelTimeoutError
from agentbench.loading import load_object
from agentbench.replay.cassette import Cassette, CassetteError, Failure
from agentbench.replay.convert import cassette_from_store, store_cassette
from agentbench.replay.models import ReplayModel, RequestDriftError
from agentbench.replay.replayer import Replayer
from agentbench.replay.session import record_session
from agentbench.runtime.events import StopReason
from agentbench.runtime.openai_model import OpenAIModel
from agentbench.runtime.retry import RetryPolicy
from agentbench.testing import HTTPFault, OpenAICompatibleServer
from agentbench.trace.store import TraceStore
from tests.weather_suite import AGENT

FIXTURE = Path(__file__).parent / "fixtures" / "replay_agents.py"
AGENT_REF = f"{FIXTURE}:weather"
QUESTION = "Weather in Paris?"
KEY = "sk-live-0123456789abcdefABCDEF0123"
SERVER_BODY = '{"error": {"message": "llama.cpp: slot 0 crashed", "type": "server_error"}}'
MESSAGE = (
    "model 'test-model' at http://127.0.0.1:1/v1: HTTP 500 from "
    "http://127.0.0.1:1/v1/chat/completions: llama.cpp: slot 0 crashed (gave up after 3 attempts)"
)


def weather():
    return load_object(AGENT_REF)


async def record_failing(path: Path, error: ModelError) -> tuple[object, Cassette]:
    """A session whose tool step succeeds and whose next model call raises `error`."""
    model = ScriptedModel([ToolCall("get_weather", {"city": "Paris"}), error])
    return await record_session(weather(), QUESTION, model=model, path=path, agent_ref=AGENT_REF)


def http_500() -> ModelError:
    return ModelError(MESSAGE, status_code=500, attempts=3, body=SERVER_BODY)


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
async def test_a_failed_call_is_recorded_with_its_status_body_and_message(
    tmp_path: Path, suffix: str
) -> None:
    path = tmp_path / f"failed{suffix}"
    result, _ = await record_failing(path, http_500())
    assert result.stop_reason is StopReason.ERROR
    assert result.error.message == MESSAGE

    # What a plain vcrpy user sees: the real HTTP 500 and the server's body.
    serializer = jsonserializer if suffix == ".json" else yamlserializer
    _, responses, _ = vcr_serialize.deserialize(path.read_text(), serializer)
    assert len(responses) == 2
    failed = responses[1]
    assert failed["status"] == {"code": 500, "message": "Internal Server Error"}
    assert failed["body"]["string"].decode() == SERVER_BODY
    assert failed["headers"]["content-type"] == ["application/json"]
    assert failed["agentbench"]["error"] == {
        "type": "ModelError",
        "message": MESSAGE,
        "attempts": 3,
        "http_response": True,
    }
    assert "agentbench" not in responses[0]  # a successful call is written as it always was

    loaded = Cassette.load(path)
    first, second = loaded.interactions
    assert first.failure is None and first.response().tool_calls[0].name == "get_weather"
    assert second.failure is not None and second.status == 500
    error = second.error()
    assert type(error) is ModelError
    assert (str(error), error.status_code, error.attempts, error.body) == (
        MESSAGE,
        500,
        3,
        SERVER_BODY,
    )
    assert loaded.info["stop_reason"] == "error"


async def test_a_failure_without_an_http_response_says_there_was_none(tmp_path: Path) -> None:
    path = tmp_path / "timeout.yaml"
    timeout = ModelTimeoutError(
        "model 'm': timed out after 5 s (gave up after 4 attempts)", attempts=4
    )
    await record_failing(path, timeout)
    response = yaml.safe_load(path.read_text())["interactions"][1]["response"]
    assert response["status"] == {"code": 0, "message": "no response"}
    assert response["body"] == {"string": ""}
    assert response["agentbench"]["error"]["http_response"] is False

    replayed = Cassette.load(path).interactions[1].error()
    assert type(replayed) is ModelTimeoutError
    assert (str(replayed), replayed.status_code, replayed.attempts, replayed.body) == (
        str(timeout),
        None,
        4,
        None,
    )


async def test_replay_raises_the_recorded_error_after_checking_the_request(
    tmp_path: Path,
) -> None:
    path = tmp_path / "failed.yaml"
    await record_failing(path, http_500())
    cassette = Cassette.load(path)
    asked = cassette.interactions[1].request

    model = ReplayModel(cassette)
    await model.complete(cassette.interactions[0].request)
    with pytest.raises(ModelError) as raised:
        await model.complete(asked)
    assert (str(raised.value), raised.value.status_code, raised.value.body) == (
        MESSAGE,
        500,
        SERVER_BODY,
    )
    assert model.drifts == [] and model.unanswered == []

    # A different request is drift first, as for any recorded call: strict stops there...
    changed = {**asked, "messages": [*asked["messages"][:-1], {"role": "user", "content": "?"}]}
    strict = ReplayModel(Cassette.load(path), strict=True)
    await strict.complete(cassette.interactions[0].request)
    with pytest.raises(RequestDriftError):
        await strict.complete(changed)
    # ...and lenient replay keeps the drift, then fails as recorded.
    lenient = ReplayModel(Cassette.load(path))
    await lenient.complete(cassette.interactions[0].request)
    with pytest.raises(ModelError, match="slot 0 crashed"):
        await lenient.complete(changed)
    assert [d.index for d in lenient.drifts] == [1]


async def test_a_live_continuation_that_fails_is_recorded_too(tmp_path: Path) -> None:
    path = tmp_path / "short.yaml"
    await old_style_cassette(path)
    live = ScriptedModel([http_500()])
    report = await Replayer(weather(), live_model=live, record_mode="new_episodes").replay(path)
    assert not report.diverged, report.render()
    extended = Cassette.load(report.saved_to)
    assert [i.failure is None for i in extended.interactions] == [True, False]
    assert extended.interactions[1].failure.message == MESSAGE
    assert extended.info["stop_reason"] == "error"


async def test_the_replayed_run_ends_as_recorded_and_is_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "failed.yaml"
    recorded, _ = await record_failing(path, http_500())
    report = await Replayer(weather()).replay(path)
    assert not report.diverged, report.render()
    assert report.result.stop_reason is StopReason.ERROR
    assert report.result.error.message == recorded.error.message == MESSAGE
    assert report.result.error.type == "ModelError"


async def test_a_secret_in_an_error_body_or_message_never_reaches_the_file(
    tmp_path: Path,
) -> None:
    body = orjson.dumps(
        {
            "error": {"message": f"invalid api key {KEY}", "type": "auth"},
            "echo": {"headers": {"Authorization": "Bearer abcdefghijklmnopqrstuvwxyz012345"}},
        }
    ).decode()
    error = ModelError(f"HTTP 500: invalid api key {KEY}", status_code=500, body=body)
    for suffix in (".yaml", ".json"):
        path = tmp_path / f"secret{suffix}"
        await record_failing(path, error)
        text = path.read_text()
        assert KEY not in text and "abcdefghijklmnopqrstuvwxyz012345" not in text
        assert "[REDACTED]" in text
        failed = Cassette.load(path).interactions[1]
        assert "invalid api key" in failed.failure.message  # scrubbed, not dropped
        assert failed.status == 500


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        ({"type": "KeyError"}, "error.type: 'KeyError' is not an error agentbench replays"),
        ({"message": None}, "error.message: expected the error's message as text"),
        ({"attempts": "three"}, "error.attempts: expected a whole number from 1"),
        ({"http_response": "yes"}, "error.http_response: expected true or false"),
    ],
)
async def test_a_corrupt_error_record_names_the_file_and_interaction(
    tmp_path: Path, edit: dict, expected: str
) -> None:
    path = tmp_path / "failed.yaml"
    await record_failing(path, http_500())
    data = yaml.safe_load(path.read_text())
    data["interactions"][1]["response"]["agentbench"]["error"].update(edit)
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(CassetteError) as raised:
        Cassette.load(path)
    assert str(raised.value).startswith(f"{path}: interaction 2: response.agentbench.")
    assert expected in str(raised.value)


async def test_an_error_response_without_the_record_of_the_failure_is_refused(
    tmp_path: Path,
) -> None:
    path = tmp_path / "failed.yaml"
    await record_failing(path, http_500())
    data = yaml.safe_load(path.read_text())
    del data["interactions"][1]["response"]["agentbench"]
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(CassetteError, match=r"interaction 2: the response is HTTP 500, not a chat"):
        Cassette.load(path)


async def old_style_cassette(path: Path) -> Cassette:
    """A run that ended in a model error, recorded without its failed call (as agentbench did
    before failures were recorded)."""
    await record_failing(path, http_500())
    cassette = Cassette.load(path)
    cassette.interactions = cassette.interactions[:1]
    cassette.save(path)
    return cassette


async def test_a_call_the_recording_cannot_answer_is_never_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "old.yaml"
    await old_style_cassette(path)
    report = await Replayer(weather()).replay(path)
    # Both runs end in an error, so their steps alone look the same.
    assert report.result.stop_reason is StopReason.ERROR
    assert [s.as_dict() for s in report.new] == [s.as_dict() for s in report.original]
    assert report.diverged
    first = report.first
    assert (first.cls, first.step, first.agent) == ("extra_step", 2, "weather")
    assert first.describe() == (
        "step 2 (weather) extra_step: the recording has no answer for model call #2"
    )
    rendered = report.render()
    assert "first divergence — step 2 (weather) extra_step" in rendered
    assert rendered.endswith("verdict: DIVERGED")


def test_the_cli_replays_a_recorded_failure_unchanged_and_a_missing_answer_as_diverged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "failed.yaml"
    asyncio.run(record_failing(path, http_500()))
    db = str(tmp_path / "traces.duckdb")
    assert main(["replay", str(path), "--agent", AGENT_REF, "--db", db]) == 0, (
        capsys.readouterr().out
    )
    out = capsys.readouterr().out
    assert "behaviour unchanged" in out and "stop reason error" in out
    assert f"run error: {MESSAGE}" in out

    old = tmp_path / "old.yaml"
    asyncio.run(old_style_cassette(old))
    assert main(["replay", str(old), "--agent", AGENT_REF, "--db", db, "--json"]) == 1
    report = orjson.loads(capsys.readouterr().out)
    assert report["diverged"] and report["first"]["class"] == "extra_step"
    assert report["first"]["label"] == "the recording has no answer for model call #2"


# -- the whole path: the real openai SDK against a real OpenAI-compatible server -------------


def live_model(server: OpenAICompatibleServer, attempts: int = 2) -> OpenAIModel:
    retry = RetryPolicy(max_attempts=attempts, initial_backoff_s=0.0, jitter=0.0)
    return OpenAIModel("test-model", base_url=server.base_url, api_key=KEY, retry=retry)


async def record_live(server: OpenAICompatibleServer, path: Path, attempts: int = 2) -> Any:
    model = live_model(server, attempts)
    try:
        result, _ = await record_session(
            weather(), QUESTION, model=model, path=path, agent_ref=AGENT_REF
        )
    finally:
        await model.aclose()
    return result


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_a_live_http_500_after_retries_replays_through_the_cli(
    tmp_path: Path, suffix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    fault = HTTPFault(500, "llama.cpp: slot 0 crashed")
    path = tmp_path / f"live{suffix}"
    with OpenAICompatibleServer([ToolCall("get_weather", {"city": "Paris"}), fault, fault]) as srv:
        result = asyncio.run(record_live(srv, path))
        assert len(srv.requests) == 3  # one answer, then the failed call and its retry
    assert result.stop_reason is StopReason.ERROR
    assert [e.kind for e in result.events].count("tool_finished") == 1
    message = result.error.message
    assert "HTTP 500" in message and "slot 0 crashed" in message

    cassette = Cassette.load(path)
    assert [i.failure is None for i in cassette.interactions] == [True, False]
    failed = cassette.interactions[1]
    assert failed.failure == Failure("ModelError", message, attempts=2, http_response=True)
    assert failed.status == 500
    assert orjson.loads(failed.response_body)["error"]["message"] == "llama.cpp: slot 0 crashed"

    capsys.readouterr()
    db = str(tmp_path / "traces.duckdb")
    code = main(["replay", str(path), "--agent", AGENT_REF, "--db", db, "--json"])
    report = orjson.loads(capsys.readouterr().out)
    assert code == 0, report
    assert not report["diverged"] and report["stop_reason"] == "error"
    assert report["errors"] == [" ".join(message.split())]


def test_a_secret_echoed_by_the_server_never_reaches_the_cassette(tmp_path: Path) -> None:
    fault = HTTPFault(500, f"bad key {KEY}; Authorization: Bearer {KEY}")
    path = tmp_path / "echo.yaml"
    with OpenAICompatibleServer([fault]) as srv:
        result = asyncio.run(record_live(srv, path, attempts=1))
    assert result.stop_reason is StopReason.ERROR and KEY in result.error.message
    failed = Cassette.load(path).interactions[0]
    assert failed.status == 500 and "bad key" in failed.response_body
    text = path.read_text()
    assert KEY not in text and "[REDACTED]" in text


SUITE = """
name: failing
agent: agent.py:agent
model: {name: test-model}
cassettes: cassettes
scorers:
  - stop_reason: error
"""


def respond_then_fail(request: dict) -> object:
    """The model answers with a tool call, then fails on every attempt of the next call."""
    if request["messages"][-1]["role"] == "tool":
        return HTTPFault(500, "llama.cpp: slot 0 crashed", headers={"retry-after": "0"})
    return ToolCall("get_weather", {"city": "Paris"})


def failing_suite(tmp_path: Path) -> Path:
    folder = tmp_path / "suites" / "failing"
    (folder / "cases").mkdir(parents=True)
    (folder / "agent.py").write_text(AGENT)
    (folder / "suite.yaml").write_text(SUITE)
    (folder / "cases" / "cases.yaml").write_text(
        textwrap.dedent(f"""
        - id: paris
          input: {QUESTION}
        """)
    )
    return folder


def test_a_suite_recording_an_outage_is_an_infrastructure_error_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = failing_suite(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    with OpenAICompatibleServer(responder=respond_then_fail) as server:
        live = main(
            [
                *("run", str(folder), "--live", "--record-mode", "all"),
                *("--base-url", server.base_url, "--model", "test-model"),
                *("--no-report", "--db", str(tmp_path / "live.duckdb")),
            ]
        )
    out = capsys.readouterr().out
    assert live == 3, out
    assert "the live model failed" in out and "HTTP 500" in out
    assert not (folder / "cassettes" / "paris.yaml").exists()


def test_a_suite_replays_a_recorded_failure_offline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = failing_suite(tmp_path)
    agent = load_object(f"{folder / 'agent.py'}:agent")

    async def record(server: OpenAICompatibleServer) -> Cassette:
        model = live_model(server)
        try:
            _, recorded = await record_session(
                agent,
                QUESTION,
                model=model,
                path=folder / "cassettes" / "paris.yaml",
                agent_ref="agent.py:agent",
            )
        finally:
            await model.aclose()
        return recorded

    with OpenAICompatibleServer(responder=respond_then_fail) as server:
        cassette = asyncio.run(record(server))
    assert [i.failure is None for i in cassette.interactions] == [True, False]
    assert cassette.info["stop_reason"] == "error"

    def offline(db: str) -> tuple[int, str]:
        capsys.readouterr()
        code = main(["run", str(folder), "--no-report", "--db", str(tmp_path / db)])
        return code, capsys.readouterr().out

    code, out = offline("replay.duckdb")
    assert code == 0, out
    assert "pass rate 100.0%" in out

    # The same session recorded without its failed call: the replay runs out of answers,
    # ends in an error as the recording did, and still must not pass as unchanged.
    cassette.interactions = cassette.interactions[:1]
    cassette.save()
    code, out = offline("old.duckdb")
    assert code == 1, out
    assert "the recording has no answer for model call #2" in out


# -- a stored run that ended in a model error: every reader gives the failure back ---------


def test_a_stored_run_that_ended_in_a_model_error_replays_unchanged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "traces.duckdb"
    store = TraceStore(db)
    fault = HTTPFault(500, "llama.cpp: slot 0 crashed")
    with OpenAICompatibleServer([ToolCall("get_weather", {"city": "Paris"}), fault, fault]) as srv:

        async def run() -> Any:
            model = live_model(srv)
            try:
                return await Runner.run(weather(), QUESTION, model=model, store=store)
            finally:
                await model.aclose()

        result = asyncio.run(run())
    store.flush()
    assert result.stop_reason is StopReason.ERROR

    # The store keeps the failed call's request; its cassette fails there, with the message.
    cassette = cassette_from_store(store, result.run_id)
    assert [i.failure is None for i in cassette.interactions] == [True, False]
    failed = cassette.interactions[1].failure
    assert failed is not None and failed.message == result.error.message
    assert failed.type == "ModelError" and not failed.http_response  # the store has no status

    # Through the CLI: the same stop reason and message, so unchanged (it said DIVERGED before:
    # the store's cassette lacked the call, and replay ran out of recorded answers).
    capsys.readouterr()
    code = main(["replay", result.run_id, "--agent", AGENT_REF, "--db", str(db), "--json"])
    report = orjson.loads(capsys.readouterr().out)
    assert code == 0, report
    assert report["stop_reason"] == "error" and not report["diverged"]

    # Saved and stored again as a run of its own: it ends in the same error at the same step.
    path = cassette.save(tmp_path / "stored.yaml")
    again = store_cassette(Cassette.load(path), store)
    store.flush()
    (row,) = store.sql(f"SELECT stop_reason, error FROM runs WHERE run_id = '{again}'").rows
    assert row[0] == "error"
    error = orjson.loads(row[1])
    assert error["type"] == "ModelError" and error["message"] == result.error.message
    assert error["step"] == 2
