"""Fallback backends: FallbackModel after a model's transient failure, fallback() for tools."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

import pytest

from agentbench import (
    Agent,
    BusinessFailure,
    ModelError,
    ModelSettings,
    ModelTimeoutError,
    OpenAIModel,
    ResultKind,
    RetryPolicy,
    Runner,
    ScriptedModel,
    ToolCall,
    UsageError,
    tool,
)
from agentbench.errors import ToolDefinitionError
from agentbench.evals.scorers import ScoreContext, build_scorer
from agentbench.replay.cassette import Cassette
from agentbench.replay.drift import fallback_drift
from agentbench.replay.models import ReplayModel
from agentbench.replay.session import record_session
from agentbench.runtime.fallback import FallbackModel, fallback, fallback_of, is_transient
from agentbench.runtime.tools import Effect
from agentbench.testing import OpenAICompatibleServer
from agentbench.testing.server import HTTPFault
from agentbench.trace.store import TraceStore


def overloaded() -> ModelError:
    return ModelError(
        "HTTP 503 from primary: overloaded (gave up after 4 attempts)", status_code=503, attempts=4
    )


def test_transient_errors_are_timeouts_lost_connections_and_retryable_statuses() -> None:
    assert is_transient(ModelTimeoutError("timed out", attempts=4))
    assert is_transient(ModelError("connection failed", status_code=None))
    assert is_transient(ModelError("rate limited", status_code=429))
    assert is_transient(overloaded())
    assert not is_transient(ModelError("bad request", status_code=400))
    assert not is_transient(ValueError("a bug"))


async def test_the_secondary_answers_and_the_response_says_why() -> None:
    primary = ScriptedModel([overloaded()], name="primary")
    secondary = ScriptedModel(["Paris is 21 °C."], name="secondary")
    model = FallbackModel([primary, secondary])
    assert model.name == "primary" and model.chain == ["primary", "secondary"]
    result = await Runner.run(Agent(name="weather"), "Weather in Paris?", model=model)
    assert result.output == "Paris is 21 °C."
    response = next(e for e in result.events if e.kind == "model_response")
    assert response.response.model == "secondary"
    assert response.fallback == {
        "answered_by": "secondary",
        "chain": ["primary", "secondary"],
        "failed": [
            {
                "model": "primary",
                "error": "ModelError",
                "message": "HTTP 503 from primary: overloaded (gave up after 4 attempts)",
                "status_code": 503,
                "attempts": 4,
            }
        ],
    }
    # The secondary is asked under its own name: a server serving one model refuses another's.
    assert secondary.requests[0]["model"] == "secondary"


async def test_the_first_model_answering_leaves_no_record() -> None:
    model = FallbackModel([ScriptedModel(["hi"], name="a"), ScriptedModel([], name="b")])
    result = await Runner.run(Agent(name="x"), "hello", model=model)
    assert next(e for e in result.events if e.kind == "model_response").fallback is None


async def test_a_request_the_primary_refuses_does_not_fall_back_unless_chosen() -> None:
    refused = ModelError("HTTP 400: context length exceeded", status_code=400)
    strict = FallbackModel([ScriptedModel([refused], name="a"), ScriptedModel(["b"], name="b")])
    with pytest.raises(ModelError, match="context length"):
        await strict.complete({"model": "a", "messages": []})
    chosen = FallbackModel(
        [ScriptedModel([refused], name="a"), ScriptedModel(["long answer"], name="b")], on=[400]
    )
    answer = await chosen.complete({"model": "a", "messages": []})
    assert answer.text == "long answer" and fallback_of(answer)["answered_by"] == "b"


async def test_every_model_failing_raises_the_last_error() -> None:
    model = FallbackModel(
        [
            ScriptedModel([overloaded()], name="a"),
            ScriptedModel([ModelTimeoutError("slow")], name="b"),
        ]
    )
    with pytest.raises(ModelTimeoutError, match="slow"):
        await model.complete({"model": "a", "messages": []})


async def test_text_already_streamed_is_never_answered_twice() -> None:
    class HalfStream:
        name = "streamer"

        async def complete(self, request, *, on_text_delta=None):  # type: ignore[no-untyped-def]
            on_text_delta("Par")
            raise ModelError("stream cut", status_code=None)

    seen: list[str] = []
    model = FallbackModel([HalfStream(), ScriptedModel(["never"], name="b")])
    with pytest.raises(ModelError, match="stream cut"):
        await model.complete(
            {"model": "x", "messages": [], "stream": True}, on_text_delta=seen.append
        )
    assert seen == ["Par"]


def test_a_fallback_model_needs_two_models_and_known_errors() -> None:
    with pytest.raises(UsageError, match="at least two"):
        FallbackModel([ScriptedModel([])])
    with pytest.raises(UsageError, match="status codes"):
        FallbackModel([ScriptedModel([]), ScriptedModel([])], on=["429"])  # type: ignore[list-item]


async def test_the_fallback_is_stored_and_replayed_from_the_cassette(tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "traces.duckdb")
    model = FallbackModel(
        [ScriptedModel([overloaded()], name="primary"), ScriptedModel(["hi"], name="backup")]
    )
    path = tmp_path / "session.yaml"
    result, _ = await record_session(Agent(name="x"), "hello", model=model, path=path)
    recorded = next(e for e in result.events if e.kind == "model_response").fallback
    assert recorded is not None and recorded["answered_by"] == "backup"

    replayed = await Runner.run(
        Agent(name="x"), "hello", model=ReplayModel(Cassette.load(path)), store=store
    )
    assert next(e for e in replayed.events if e.kind == "model_response").fallback == recorded
    row = store.sql(
        "SELECT model, response->'$.raw.agentbench_fallback.failed[0].status_code' AS status "
        f"FROM llm_calls WHERE run_id = '{replayed.run_id}'"
    )
    assert [tuple(r) for r in row.rows] == [("backup", "503")]
    store.close()
    # `traces show` says which model answered and why the one before it did not.
    from agentbench.cli import main

    shown = io.StringIO()
    with contextlib.redirect_stdout(shown):
        assert main(["traces", "show", replayed.run_id, "--db", str(store.path)]) == 0
    assert "(fell back: primary HTTP 503 → backup)" in shown.getvalue()


def test_a_different_fallback_path_is_drift() -> None:
    recorded = {
        "answered_by": "backup",
        "chain": ["primary", "backup"],
        "failed": [{"model": "primary", "error": "ModelError"}],
    }
    assert fallback_drift(recorded, recorded) == []
    assert fallback_drift(None, None) == []
    # Live again, the primary answered itself.
    [removed] = fallback_drift(recorded, None)
    assert (removed.path, removed.kind) == ("fallback", "removed")
    other = {
        **recorded,
        "answered_by": "third",
        "failed": [*recorded["failed"], {"model": "backup"}],
    }
    paths = [c.path for c in fallback_drift(recorded, other)]
    assert paths == ["fallback.answered_by", "fallback.failed"]
    # Replayed (the answer served): the chain the code now has must still lead to the answer.
    assert fallback_drift(recorded, ["primary", "backup", "third"]) == []
    [chain] = fallback_drift(recorded, ["primary", "other"])
    assert chain.describe() == ('fallback.chain: ["primary","backup"] → ["primary","other"]')
    assert fallback_drift(recorded, ["backup"])  # the primary is no longer tried first


# -- tools ----------------------------------------------------------------------------------------
@tool(effect="read_only", idempotent=True)
def rates_primary(currency: str) -> dict:
    """Exchange rate to EUR.

    Args:
        currency: ISO code.
    """
    raise ConnectionError("rates.example.com refused the connection")


@tool(effect="read_only", idempotent=True)
def rates_mirror(currency: str) -> dict:
    """Exchange rate to EUR, from the mirror."""
    if currency == "XTS":
        raise BusinessFailure("no rate for XTS")
    return {"currency": currency, "eur": 0.92}


@tool(effect="write")
def rates_cache(currency: str) -> dict:
    """The cached rate."""
    return {"currency": currency, "eur": 0.9, "cached": True}


async def test_a_tool_falls_back_on_a_system_error_and_records_the_path() -> None:
    rates = fallback(rates_primary, rates_mirror, name="rates")
    assert rates.name == "rates" and rates.parameters == rates_primary.parameters
    assert (rates.effect, rates.idempotent, rates.timeout_s) == (Effect.READ_ONLY, True, None)
    result = await rates.invoke({"currency": "USD"})
    assert result.kind is ResultKind.OK and result.data == {"currency": "USD", "eur": 0.92}
    assert result.error == (
        "fell back to rates_mirror after rates_primary: ConnectionError: rates.example.com "
        "refused the connection"
    )
    assert "fell back" not in result.observation()  # the model sees the answer only


async def test_a_business_failure_is_final() -> None:
    called = []

    @tool
    def refusing(currency: str) -> dict:
        """Refuses."""
        called.append("refusing")
        raise BusinessFailure("currency suspended")

    rates = fallback(refusing, rates_mirror)
    result = await rates.invoke({"currency": "USD"})
    assert result.kind is ResultKind.BUSINESS_FAILURE and result.error == "currency suspended"
    assert called == ["refusing"]
    after_error = await fallback(rates_primary, rates_mirror).invoke({"currency": "XTS"})
    assert after_error.kind is ResultKind.BUSINESS_FAILURE
    assert after_error.error.startswith("no rate for XTS (fell back to rates_mirror after")


async def test_every_backend_failing_is_one_system_error_naming_each() -> None:
    @tool
    def down(currency: str) -> dict:
        """Down."""
        raise TimeoutError("upstream")

    result = await fallback(rates_primary, down).invoke({"currency": "USD"})
    assert result.kind is ResultKind.SYSTEM_ERROR
    assert "rates_primary: ConnectionError" in result.error and "down: " in result.error


def test_the_combined_tool_declares_the_most_far_reaching_effect() -> None:
    assert fallback(rates_mirror, rates_cache).effect is Effect.WRITE
    assert not fallback(rates_mirror, rates_cache).idempotent
    with pytest.raises(ToolDefinitionError, match="at least two tools"):
        fallback(rates_mirror)


async def test_in_a_run_the_trace_keeps_each_calls_path(tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "traces.duckdb")
    agent = Agent(name="fx", tools=[fallback(rates_primary, rates_mirror, name="rates")])
    model = ScriptedModel([ToolCall("rates", {"currency": "USD"}), "0.92"])
    result = await Runner.run(agent, "USD?", model=model, store=store)
    rows = store.sql(
        f"SELECT tool, result_kind, error FROM tool_calls WHERE run_id = '{result.run_id}'"
    ).rows
    assert [(r[0], r[1]) for r in rows] == [("rates", "ok")]
    assert rows[0][2].startswith("fell back to rates_mirror after rates_primary")
    store.close()


@pytest.mark.server
async def test_a_streamed_fallback_over_http_is_kept_in_the_cassette(tmp_path: Path) -> None:
    down = OpenAICompatibleServer(responder=lambda _: HTTPFault(503, "down"))
    up = OpenAICompatibleServer(["streamed answer here"])
    path = tmp_path / "stream.yaml"
    agent = Agent(name="s", model_settings=ModelSettings(stream=True))
    deltas: list[str] = []
    with down, up:
        quick = RetryPolicy(max_attempts=1)
        model = FallbackModel(
            [
                OpenAIModel("a", base_url=down.base_url, api_key="k", retry=quick),
                OpenAIModel("b", base_url=up.base_url, api_key="k"),
            ]
        )
        result, _ = await record_session(
            agent,
            "hi",
            model=model,
            path=path,
            hooks=[lambda e: deltas.append(e.text) if e.kind == "text_delta" else None],
        )
        await model.aclose()
    live = next(e for e in result.events if e.kind == "model_response").fallback
    assert (
        live is not None and live["answered_by"] == "b" and live["failed"][0]["status_code"] == 503
    )
    assert "".join(deltas) == "streamed answer here"  # the backup's stream, once
    replayed = await Runner.run(agent, "hi", model=ReplayModel(Cassette.load(path)))
    assert next(e for e in replayed.events if e.kind == "model_response").fallback == live
    assert replayed.output == "streamed answer here"


async def test_replay_reports_a_changed_fallback_chain_as_drift(tmp_path: Path) -> None:
    from agentbench.replay.replayer import Replayer

    def chain(*names: str) -> FallbackModel:
        return FallbackModel([ScriptedModel([], name=name) for name in names])

    recorded_with = FallbackModel(
        [ScriptedModel([overloaded()], name="primary"), ScriptedModel(["hi"], name="backup")]
    )
    path = tmp_path / "session.yaml"
    await record_session(Agent(name="x"), "hello", model=recorded_with, path=path)

    async def changes(model: Any) -> list[str]:
        report = await Replayer().replay(path, agent=Agent(name="x", model=model))
        return [c.path for d in report.drifts for c in d.drift.changes]

    assert await changes(chain("primary", "backup")) == []  # the same chain: the same path
    # The backup is gone, or is no longer reached after the primary: the path drifted.
    assert await changes(chain("primary", "mirror")) == ["fallback.chain"]
    assert await changes(chain("backup", "primary")) == ["fallback.chain"]
    assert await changes(ScriptedModel([], name="backup")) == ["fallback.chain"]


# -- the `fallback` scorer: which backend answered, and why -----------------------------------
async def scored(params: dict[str, Any], result: Any) -> Any:
    ctx = ScoreContext.from_runs("case", "USD?", [result], duration_ms=1.0)
    return await build_scorer("fallback", params).score(ctx)


async def test_the_fallback_scorer_reads_a_models_path() -> None:
    model = FallbackModel(
        [ScriptedModel([overloaded()], name="primary"), ScriptedModel(["0.92"], name="backup")]
    )
    result = await Runner.run(Agent(name="fx"), "USD?", model=model)
    passed = await scored(
        {"answered_by": "backup", "failed": ["primary"], "because": ["HTTP 503", "4 attempts"]},
        result,
    )
    assert passed.passed, passed.reason
    assert passed.reason == "any of the model calls: answered by backup after primary failed"
    wrong = await scored({"answered_by": "primary", "because": "HTTP 429"}, result)
    assert not wrong.passed
    assert wrong.reason == (
        "any of the model calls: answered by backup after primary failed, not by primary; "
        'the failures do not mention "HTTP 429"'
    )
    plain = await Runner.run(Agent(name="fx"), "USD?", model=ScriptedModel(["0.92"], name="m"))
    assert (await scored({"answered_by": "m", "failed": [], "call": 1}, plain)).passed
    # The shorthand README's scorer table promises: `fallback: backup`.
    short = await build_scorer("fallback", "backup").score(
        ScoreContext.from_runs("case", "USD?", [result], duration_ms=1.0)
    )
    assert short.passed and short.reason == passed.reason
    missing = await scored({"answered_by": "m", "call": 2}, plain)
    assert missing.reason == "expected the 2nd of the model calls; there were 1"


async def test_the_fallback_scorer_reads_a_tools_path() -> None:
    rates = fallback(rates_primary, rates_mirror, name="rates")
    agent = Agent(name="fx", tools=[rates])
    script = [ToolCall("rates", {"currency": "USD"}), ToolCall("rates", {"currency": "XTS"}), "ok"]
    result = await Runner.run(agent, "USD?", model=ScriptedModel(script))
    first = {"tool": "rates", "answered_by": "rates_mirror", "failed": ["rates_primary"]}
    assert (await scored({**first, "because": "refused the connection", "call": 1}, result)).passed
    # A failure after a fallback keeps its path too: the mirror said no, after the primary.
    assert (await scored({**first, "call": 2}, result)).passed
    direct = fallback(rates_mirror, rates_primary, name="rates")
    result = await Runner.run(
        Agent(name="fx", tools=[direct]), "USD?", model=ScriptedModel([*script[:1], "ok"])
    )
    none = await scored({"tool": "rates", "answered_by": "rates_primary"}, result)
    assert not none.passed
    assert none.reason == (
        "any of the calls of rates: answered by its first backend (no fallback), not by "
        "rates_primary"
    )
