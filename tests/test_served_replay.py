"""Served replay: a cassette's answers through the real openai client and the bundled server.

Each test records a session through `OpenAIModel` against the bundled server, then replays it
with `ServedReplayModel` and the faults or quirks under test, and checks what the client did
(attempts, requests the server received, a fallback's record) and that the run is the recorded
one. Nothing here sleeps: the agents' retry policy does not wait.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import orjson
import pytest

from agentbench import Agent, ModelSettings, OpenAIModel, Runner, ScriptedModel, ToolCall, tool
from agentbench.cli import main
from agentbench.errors import UsageError
from agentbench.evals.suites.case_models import Case
from agentbench.evals.suites.suite_models import Suite
from agentbench.replay.cassette import Cassette
from agentbench.replay.faults import Fault, Serve, Served
from agentbench.replay.models import RequestDriftError
from agentbench.replay.served import SERVED_API_KEY, ServedReplayModel, live_client
from agentbench.replay.session import record_session
from agentbench.replay.trajectory import trajectory
from agentbench.runtime.fallback import FallbackModel, fallback_of
from agentbench.testing import HTTPFault, OpenAICompatibleServer
from tests.retry_support import NoWaitRetryPolicy

pytestmark = [pytest.mark.server, pytest.mark.slow]

NO_WAIT = NoWaitRetryPolicy()
LOCAL = "http://127.0.0.1:9/v1"  # where the agent's models point; the replay re-points them
SCRIPT = [ToolCall("rate", {"currency": "USD"}), "1 EUR = 1.08 USD."]


@tool(effect="read_only")
def rate(currency: str) -> str:
    """The euro rate of a currency.

    Args:
        currency: ISO code.
    """
    return f"{currency}: 1.08"


def desk(model: Any = None, *, stream: bool = True, instructions: str = "Quote rates.") -> Agent:
    settings = ModelSettings(stream=stream, tool_choice="auto")
    return Agent(
        name="fx", instructions=instructions, tools=[rate], model=model, model_settings=settings
    )


def client(name: str = "m") -> OpenAIModel:
    return OpenAIModel(name, base_url=LOCAL, retry=NO_WAIT)


async def record(
    tmp_path: Path, agent: Agent, script: list[Any] | None = None, *, live_name: str = "m"
) -> Path:
    path = tmp_path / "case.yaml"
    with OpenAICompatibleServer(SCRIPT if script is None else script) as server:
        live = live_client(agent.model, OpenAIModel(live_name, base_url=server.base_url))
        await record_session(agent, "USD?", model=live, path=path)
    return path


async def replay(path: Path, agent: Agent, served: Served, **options: Any) -> tuple[Any, Any]:
    model = ServedReplayModel(Cassette.load(path), served, agent_model=agent.model, **options)
    try:
        result = await Runner.run(agent, "USD?", model=model)
    finally:
        await model.aclose()
    return result, model


def attempts(result: Any) -> list[int]:
    return [e.response.attempts for e in result.events if e.kind == "model_response"]


def served(*faults: Fault, quirks: tuple[str, ...] = ()) -> Served:
    return Served(quirks, faults)


async def test_the_recorded_answers_come_through_the_client_unchanged(tmp_path: Path) -> None:
    agent = desk(client())
    path = await record(tmp_path, agent)
    recorded = Cassette.load(path).info["trajectory"]
    result, model = await replay(path, agent, served())
    assert result.output == "1 EUR = 1.08 USD." and attempts(result) == [1, 1]
    assert [s.as_dict() for s in trajectory(result.events)] == recorded
    assert model.drifts == [] and len(model.received) == 2
    # The bundled server on 127.0.0.1, with a key of its own: never the user's.
    assert all(r.headers["authorization"] == f"Bearer {SERVED_API_KEY}" for r in model.received)
    assert all(r.body["stream"] is True for r in model.received)


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        (Fault(call=1, status=503), [2, 1]),
        (Fault(call=1, status=429, retry_after=0, times=3), [4, 1]),
        (Fault(call=2, status=502, times=2), [1, 3]),
        (Fault(status=500), [2, 2]),  # every call, once
    ],
)
async def test_an_http_fault_hits_the_attempts_it_names(
    tmp_path: Path, fault: Fault, expected: list[int]
) -> None:
    agent = desk(client())
    result, model = await replay(await record(tmp_path, agent), agent, served(fault))
    assert result.output == "1 EUR = 1.08 USD."
    assert attempts(result) == expected
    assert len(model.script.hits) == sum(expected) - len(expected)


async def test_a_retry_after_reaches_the_clients_retry_policy(tmp_path: Path) -> None:
    policy = NoWaitRetryPolicy()
    agent = desk(OpenAIModel("m", base_url=LOCAL, retry=policy))
    path = await record(tmp_path, agent)
    policy.asked.clear()
    fault = Fault(call=1, status=429, retry_after=7, times=2)
    result, _ = await replay(path, agent, served(fault))
    assert result.output == "1 EUR = 1.08 USD." and policy.asked == [1, 2]


async def test_a_stream_cut_mid_tool_call_is_asked_again_and_runs_the_tool_once(
    tmp_path: Path,
) -> None:
    agent = desk(client())
    cut = served(Fault(call=1, cut_after=1))
    result, _ = await replay(await record(tmp_path, agent), agent, cut)
    assert attempts(result) == [2, 1]
    finished = [e for e in result.events if e.kind == "tool_finished"]
    assert [(e.tool, e.arguments) for e in finished] == [("rate", {"currency": "USD"})]


async def test_faults_past_the_retries_fail_the_run(tmp_path: Path) -> None:
    agent = desk(client())
    fault = Fault(call=2, status=503, times="all")
    result, _ = await replay(await record(tmp_path, agent), agent, served(fault))
    assert result.stop_reason == "error" and result.error is not None
    assert "gave up after 4 attempts" in result.error.message


async def test_llama_cpp_quirks_go_through_the_clients_workarounds(tmp_path: Path) -> None:
    agent = desk(client())
    llama_cpp = served(quirks=("llama_cpp",))
    result, model = await replay(await record(tmp_path, agent), agent, llama_cpp)
    assert result.output == "1 EUR = 1.08 USD."
    # The streamed tool call came as an empty stream; the same request went again unstreamed.
    streamed = [bool(r.body.get("stream")) for r in model.received]
    assert streamed[:2] == [True, False]
    assert all(m.get("content") is not None for r in model.received for m in r.body["messages"])


async def test_a_fallback_model_falls_back_when_its_primary_is_down(tmp_path: Path) -> None:
    agent = desk(FallbackModel([client("primary"), client("backup")]))
    path = await record(tmp_path, agent, live_name="primary")
    down = Fault(model="primary", status=503, times="all")
    result, model = await replay(path, agent, served(down))
    assert result.output == "1 EUR = 1.08 USD."
    paths = [e.fallback for e in result.events if e.kind == "model_response"]
    assert [p["answered_by"] for p in paths] == ["backup", "backup"]
    assert [(f["model"], f["status_code"], f["attempts"]) for f in paths[0]["failed"]] == [
        ("primary", 503, 4)
    ]
    asked = [r.body["model"] for r in model.received]
    assert asked == ["primary"] * 4 + ["backup"] + ["primary"] * 4 + ["backup"]
    # The trajectory keeps the path (not the messages, which name a port): replay compares it.
    step = trajectory(result.events)[0]
    assert step.detail["fallback"] == {
        "answered_by": "backup",
        "failed": [{"model": "primary", "error": "ModelError", "status_code": 503, "attempts": 4}],
    }


async def test_drift_is_checked_as_in_replay_and_strict_stops_before_serving(
    tmp_path: Path,
) -> None:
    path = await record(tmp_path, desk(client()))
    changed = desk(client(), instructions="Quote euro rates.")
    result, model = await replay(path, changed, served())
    assert [d.index for d in model.drifts] == [0, 1] and result.output == "1 EUR = 1.08 USD."
    result, model = await replay(path, changed, served(), strict=True)
    assert result.error is not None and result.error.type == RequestDriftError.__name__
    assert model.received == []  # nothing was served for a request that drifted


def test_a_model_that_cannot_go_over_http_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    Cassette().save(path)
    with pytest.raises(UsageError, match="must be an OpenAIModel or a FallbackModel"):
        ServedReplayModel(Cassette.load(path), served(), agent_model=ScriptedModel([]))


def test_live_a_served_case_runs_the_agents_own_chain_at_the_endpoint() -> None:
    # The live model's name (--model, else the suite's model:) is the primary's, as it is the
    # model a live run of any suite calls; the backups keep their own.
    live = OpenAIModel("suite-model", base_url="http://127.0.0.1:1/v1", max_tokens=64)
    chain = live_client(FallbackModel([client("primary"), client("backup")]), live)
    assert isinstance(chain, FallbackModel) and chain.chain == ["suite-model", "backup"]
    assert chain.name == "suite-model"  # what the run's requests ask for
    assert {m.base_url for m in chain.models} == {"http://127.0.0.1:1/v1"}
    assert {m.max_tokens for m in chain.models} == {64}
    assert all(m.retry is NO_WAIT for m in chain.models)
    single = live_client(client("primary"), live)
    assert isinstance(single, OpenAIModel) and single.name == "suite-model"
    assert single.retry is NO_WAIT
    assert live_client(None, live) is live


async def test_faults_that_can_never_apply_are_refused_naming_each_and_why(
    tmp_path: Path,
) -> None:
    agent = desk(FallbackModel([client("primary"), client("backup")]))
    recording = Cassette.load(await record(tmp_path, agent, live_name="primary"))
    fine = Served((), (Fault(call=2, status=503), Fault(model="backup", status=503)))
    ServedReplayModel(recording, fine, agent_model=agent.model)  # two calls; backup is asked
    never = Served.of(
        Serve(faults=[Fault(call=3, status=503)]),
        Serve(faults=[Fault(call=1, status=503), Fault(model="primray", cut_after=1)]),
    )
    assert never is not None
    with pytest.raises(UsageError) as refused:
        ServedReplayModel(recording, never, agent_model=agent.model)
    assert str(refused.value) == (
        "the suite's serve.faults[0] {call: 3, status: 503} can never apply: the recording has "
        "2 model calls; the case's serve.faults[1] {model: primray, cut_after: 1} can never "
        "apply: no model call of the case asks for 'primray' (they ask for 'backup', 'primary')"
    )


def test_a_cases_serve_false_turns_its_suites_serving_off() -> None:
    suite = Suite.model_validate(
        {
            "name": "s",
            "agent": "a:b",
            "serve": {"quirks": ["llama_cpp"], "faults": [{"status": 503}]},
        }
    )
    off, plain, own = (
        Case.model_validate({"id": "c", "input": "USD?", **({} if key is None else {"serve": key})})
        for key in (False, None, {"faults": [{"call": 1, "cut_after": 0}]})
    )
    assert off.serve is False and Served.of(suite.serve, off.serve) is None
    assert Served.of(suite.serve, plain.serve) == Served(
        ("llama_cpp",), (Fault(status=503),), ("the suite's serve.faults[0]",)
    )
    both = Served.of(suite.serve, own.serve)
    assert both is not None and both.where == (
        "the suite's serve.faults[0]",
        "the case's serve.faults[0]",
    )
    off_suite = Suite.model_validate({"name": "s", "agent": "a:b", "serve": False})
    assert Served.of(off_suite.serve, plain.serve) is None
    served_case = Case.model_validate({"id": "c", "input": "USD?", "serve": True})
    assert Served.of(off_suite.serve, served_case.serve) == Served((), ())


# -- through `agentbench run` -----------------------------------------------------------------
AGENT = """
from agentbench import Agent, ModelSettings, OpenAIModel, tool
from agentbench.runtime.fallback import FallbackModel, fallback_of
from tests.retry_support import NoWaitRetryPolicy

@tool(effect="read_only")
def rate(currency: str) -> str:
    '''The euro rate of a currency.

    Args:
        currency: ISO code.
    '''
    return f"{currency}: 1.08"

def model(name):
    return OpenAIModel(name, base_url="http://127.0.0.1:9/v1", retry=NoWaitRetryPolicy())

agent = Agent(
    name="fx", tools=[rate], model=FallbackModel([model("primary"), model("backup")]),
    model_settings=ModelSettings(stream=True, tool_choice="auto"),
)
"""
SUITE = """
name: fx
agent: agent.py:agent
model: {name: primary}
cassettes: cassettes
serve: {quirks: [repeats_stream_names]}
scorers:
  - stop_reason: completed
"""
CASES = """
- id: calm
  input: USD?
  expect:
    - output_contains: "1 EUR = 1.08 USD."
- id: primary-down
  input: USD? (primary down)
  serve:
    faults: [{model: primary, status: 503, times: all}]
  expect:
    - output_contains: "1 EUR = 1.08 USD."
"""


def responder(request: dict[str, Any]) -> Any:
    question = next(m["content"] for m in request["messages"] if m["role"] == "user")
    if request["model"] == "primary" and "primary down" in question:
        return HTTPFault(503, "overloaded")
    if request["messages"][-1]["role"] == "tool":
        return "1 EUR = 1.08 USD."
    return ToolCall("rate", {"currency": "USD"})


@pytest.fixture
def suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "suites" / "fx"
    (folder / "cases").mkdir(parents=True)
    (folder / "agent.py").write_text(AGENT)
    (folder / "suite.yaml").write_text(SUITE)
    (folder / "cases" / "fx.yaml").write_text(CASES)
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parent.parent))
    return folder


def run(*args: str, db: Path) -> int:
    return main(["run", *args, "--no-report", "--db", str(db)])


def test_a_served_suite_records_its_chain_live_and_replays_it_served(
    suite: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    with OpenAICompatibleServer(responder=responder) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "unused")
        live = ["--live", "--record-mode", "all", "--base-url", server.base_url]
        assert run(str(suite), *live, db=tmp_path / "rec.duckdb") == 0
    recording = Cassette.load(suite / "cassettes" / "primary-down.yaml")
    first = fallback_of(recording.interactions[0].response())
    assert first is not None and first["answered_by"] == "backup"
    calm = Cassette.load(suite / "cassettes" / "calm.yaml")
    assert fallback_of(calm.interactions[0].response()) is None
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    capsys.readouterr()
    assert run(str(suite), "--json", db=tmp_path / "replay.duckdb") == 0
    results = orjson.loads(capsys.readouterr().out)["results"]
    assert {r["case_id"]: r["status"] for r in results} == {
        "calm": "passed",
        "primary-down": "passed",
    }
    # Without its faults the primary answers: the recorded fallback path is a divergence.
    cases = suite / "cases" / "fx.yaml"
    down_fault = "faults: [{model: primary, status: 503, times: all}]"
    cases.write_text(cases.read_text().replace(down_fault, "faults: []"))
    assert run(str(suite), "--json", db=tmp_path / "again.duckdb") == 0
    again = orjson.loads(capsys.readouterr().out)["results"]
    (down,) = [r for r in again if r["case_id"] == "primary-down"]
    first = down["divergences"][0]
    assert (first["class"], first["step"]) == ("response_changed", 1)
    assert first["old"]["fallback"]["answered_by"] == "backup" and "fallback" not in first["new"]
    # A fault for a model no call asks for (a typo) would test nothing: the case cannot run.
    cases.write_text(
        cases.read_text().replace("faults: []", "faults: [{model: other, status: 503}]")
    )
    assert run(str(suite), "--json", db=tmp_path / "typo.duckdb") == 3
    typo = orjson.loads(capsys.readouterr().out)["results"]
    (down,) = [r for r in typo if r["case_id"] == "primary-down"]
    assert down["status"] == "error"
    assert (
        "case 'primary-down': the case's serve.faults[0] {model: other, status: 503} can never "
        "apply: no model call of the case asks for 'other' (they ask for 'backup', 'primary')"
    ) in down["error"]


def test_live_model_names_a_served_suites_primary_and_its_backups_keep_theirs(
    suite: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    def answer(request: dict[str, Any]) -> Any:
        question = next(m["content"] for m in request["messages"] if m["role"] == "user")
        if request["model"] != "backup" and "primary down" in question:
            return HTTPFault(503, "overloaded")
        return responder({**request, "model": "backup"})

    with OpenAICompatibleServer(responder=answer) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "unused")
        live = ["--live", "--record-mode", "all", "--base-url", server.base_url]
        assert run(str(suite), *live, "--model", "renamed", db=tmp_path / "rec.duckdb") == 0
        asked = [(r.body["messages"][-1]["role"], r.body["model"]) for r in server.requests]
    assert {model for _, model in asked} == {"renamed", "backup"}
    recording = Cassette.load(suite / "cassettes" / "primary-down.yaml")
    path = fallback_of(recording.interactions[0].response())
    assert path is not None and path["failed"][0]["model"] == "renamed"
    # Replayed, the case's fault still names the agent's own primary, which no recorded call
    # asks for now: refused, saying so, rather than replayed without the fault.
    monkeypatch.delenv("OPENAI_API_KEY")
    capsys.readouterr()
    assert run(str(suite), "--json", db=tmp_path / "replay.duckdb") == 3
    results = orjson.loads(capsys.readouterr().out)["results"]
    statuses = {r["case_id"]: (r["status"], r["error"]) for r in results}
    assert statuses["calm"] == ("passed", None)
    assert statuses["primary-down"][0] == "error"
    assert "no model call of the case asks for 'primary'" in statuses["primary-down"][1]


def test_a_bad_fault_is_a_usage_error_naming_its_line(
    suite: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    cases = suite / "cases" / "fx.yaml"
    cases.write_text(cases.read_text().replace("status: 503, ", ""))
    assert run(str(suite), db=tmp_path / "bad.duckdb") == 2
    err = capsys.readouterr().err
    assert "fx.yaml:" in err and "give status (an HTTP error) or cut_after" in err
    suite_file = suite / "suite.yaml"
    suite_file.write_text(suite_file.read_text().replace("repeats_stream_names", "llama"))
    assert run(str(suite), db=tmp_path / "bad2.duckdb") == 2
    assert "unknown quirk 'llama'" in capsys.readouterr().err


def test_the_served_keys_are_in_the_schemas() -> None:
    root = Path(__file__).resolve().parent.parent / "schema"
    suite = orjson.loads((root / "suite.schema.json").read_text())
    case = orjson.loads((root / "case.schema.json").read_text())
    assert "serve" in suite["properties"]
    assert "serve" in textwrap.dedent(orjson.dumps(case).decode())
