"""Record a session through the real SDK, replay it against changed code, name the divergence."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agentbench import (
    Agent,
    BusinessFailure,
    MemoryPolicy,
    ModelSettings,
    OpenAIModel,
    RetryPolicy,
    ScriptedModel,
    StopReason,
    ToolCall,
    UsageError,
    tool,
)
from agentbench.replay.cassette import Cassette, CassetteError, RecordMode
from agentbench.replay.replayer import Replayer
from agentbench.replay.session import record_session
from agentbench.testing import OpenAICompatibleServer

pytestmark = pytest.mark.server

CANARY = "sk-canary-0123456789abcdefghijklmnop"
CITIES = {"Paris": 21, "Oslo": 4}
calls: list[str] = []


@tool(effect="read_only")
def get_weather(city: str) -> dict:
    """Current temperature.

    Args:
        city: City name.
    """
    calls.append(city)
    if city not in CITIES:
        raise BusinessFailure(f"no station in {city}")
    return {"city": city, "celsius": CITIES[city]}


@tool(effect="read_only")
def convert(celsius: float) -> float:
    """Celsius to Fahrenheit."""
    return round(celsius * 9 / 5 + 32, 1)


def weather_agent(**overrides) -> Agent:
    options = {
        "name": "weather",
        "instructions": "Answer weather questions briefly.",
        "tools": [get_weather, convert],
    }
    options.update(overrides)
    return Agent(**options)


SCRIPT = [
    ToolCall("get_weather", {"city": "Paris"}),
    ToolCall("get_weather", {"city": "Oslo"}),
    ToolCall("convert", {"celsius": 21}),
    "Paris is 21 °C (69.8 °F); Oslo is 4 °C.",
]


async def record(path: Path, agent: Agent | None = None, script=SCRIPT, **settings) -> Cassette:
    with OpenAICompatibleServer(list(script)) as server:
        async with OpenAIModel(
            "test-model",
            base_url=server.base_url,
            api_key=CANARY,
            retry=RetryPolicy(max_attempts=1),
        ) as model:
            _, cassette = await record_session(
                agent or weather_agent(**settings),
                "Weather in Paris and Oslo, in F too?",
                model=model,
                path=path,
            )
    return cassette


@pytest.fixture
async def cassette_path(tmp_path: Path) -> Path:
    path = tmp_path / "weather.yaml"
    await record(path)
    return path


async def test_recorded_cassette_is_vcrpy_format_without_secrets(cassette_path: Path) -> None:
    text = cassette_path.read_text()
    assert text.startswith("interactions:") and "version: 1" in text
    assert CANARY not in text
    cassette = Cassette.load(cassette_path)
    assert len(cassette.interactions) == 4
    assert (
        cassette.interactions[0].request["messages"][-1]["content"].startswith("Weather in Paris")
    )
    info = cassette.info
    assert info["stop_reason"] == "completed"
    assert [t["tool"] for t in info["tool_results"]] == ["get_weather", "get_weather", "convert"]
    # vcrpy itself reads it.
    from vcr.persisters.filesystem import FilesystemPersister
    from vcr.serializers import yamlserializer

    requests, responses, *_ = FilesystemPersister.load_cassette(cassette_path, yamlserializer)
    assert len(requests) == len(responses) == 4
    assert requests[0].method == "POST" and requests[0].uri.endswith("/v1/chat/completions")


async def test_unchanged_code_replays_without_divergence_a_hundred_times(
    cassette_path: Path,
) -> None:
    cassette = Cassette.load(cassette_path)
    replayer = Replayer(weather_agent())
    for _ in range(100):
        report = await replayer.replay(cassette)
        assert not report.diverged, report.render()
        assert report.drifts == []
        assert report.result.output == "Paris is 21 °C (69.8 °F); Oslo is 4 °C."
    assert "behaviour unchanged" in report.render()


async def test_changed_instructions_are_request_drift_at_step_1(cassette_path: Path) -> None:
    changed = weather_agent(instructions="Answer weather questions in one line.")
    lenient = await Replayer(changed).replay(cassette_path)
    assert not lenient.diverged
    assert lenient.drifts[0].call == 1 and lenient.drifts[0].step == 1
    assert lenient.drifts[0].drift.changes[0].path == "messages[0].content"
    # One verdict: a lenient replay that is "unchanged" never says "diverged" beside it.
    told = lenient.render()
    assert told.endswith("verdict: unchanged") and "diverged" not in told.lower(), told
    assert "request drift at step 1 (weather) (lenient: not counted)" in told
    assert "diverged" not in str(lenient.as_dict()["counterfactual"])

    strict = await Replayer(changed, strict=True).replay(cassette_path)
    assert strict.diverged
    first = strict.first
    assert (first.cls, first.step, first.agent) == ("request_drift", 1, "weather")
    assert first.changes[0].path == "messages[0].content"
    assert "request_drift" in strict.render() and "messages[0].content" in strict.render()


async def test_changed_tool_schema_names_the_field(cassette_path: Path) -> None:
    @tool(effect="read_only", name="convert")
    def convert_v2(celsius: float, precision: int) -> float:
        """Celsius to Fahrenheit."""
        return round(celsius * 9 / 5 + 32, precision)

    report = await Replayer(weather_agent(tools=[get_weather, convert_v2]), strict=True).replay(
        cassette_path
    )
    paths = [c.path for c in report.first.changes]
    assert "tools[1].function.parameters.properties.precision" in paths
    assert "tools[1].function.parameters.required[1]" in paths


async def test_changed_tool_behaviour_is_tool_result_changed_at_its_step(
    cassette_path: Path,
) -> None:
    @tool(effect="read_only", name="get_weather")
    def colder(city: str) -> dict:
        """Current temperature.

        Args:
            city: City name.
        """
        return {"city": city, "celsius": CITIES[city] - 10}

    report = await Replayer(weather_agent(tools=[colder, convert])).replay(cassette_path)
    first = report.first
    assert (first.cls, first.step, first.label) == (
        "tool_result_changed",
        1,
        "tool call get_weather",
    )
    assert first.old["result"] == {"celsius": 21, "city": "Paris"}
    assert first.new["result"] == {"celsius": 11, "city": "Paris"}
    classes = [d.cls for d in report.divergences]
    # The changed results, each followed by the drifted request that carried it downstream.
    assert [c for c in classes if c != "request_drift"] == ["tool_result_changed"] * 2
    assert classes[:2] == ["tool_result_changed", "request_drift"], report.render()


async def test_changed_memory_limits_show_which_messages_were_dropped(cassette_path: Path) -> None:
    agent = weather_agent(memory=MemoryPolicy(max_messages=4, keep_recent=1))
    report = await Replayer(agent).replay(cassette_path)
    assert any(d.cls == "extra_step" and d.label == "memory summarized" for d in report.divergences)
    drift = report.drifts[-1]
    kinds = {(c.path, c.kind) for c in drift.drift.changes}
    assert ("messages[1]", "removed") in kinds or any(k == "removed" for _, k in kinds)
    assert "removed" in report.render()


async def test_fifty_cassettes_replay_concurrently_in_isolation(tmp_path: Path) -> None:
    paths = []
    for index in range(50):
        city = "Paris" if index % 2 else "Oslo"
        path = tmp_path / f"c{index}.yaml"
        await record(path, script=[ToolCall("get_weather", {"city": city}), f"answer {index}"])
        paths.append(path)
    replayer = Replayer(weather_agent())
    reports = await asyncio.gather(*(replayer.replay(p) for p in paths))
    assert [r.result.output for r in reports] == [f"answer {i}" for i in range(50)]
    assert not any(r.diverged for r in reports)


async def test_tool_policies_recorded_stub_and_fault(cassette_path: Path) -> None:
    calls.clear()
    recorded = await Replayer(weather_agent(), tools={"get_weather": "recorded"}).replay(
        cassette_path
    )
    assert not recorded.diverged
    assert calls == [], "a recorded tool is not executed"

    stub = await Replayer(weather_agent(), tools={"convert": "stub:99.9"}).replay(cassette_path)
    assert stub.first.cls == "tool_result_changed"
    assert stub.first.new["result"] == 99.9

    fault = await Replayer(weather_agent(), tools={"get_weather": "fault:timeout"}).replay(
        cassette_path
    )
    assert fault.first.new["result_kind"] == "system_error"
    assert "timed out" in fault.first.new["result"] and "injected" in fault.first.new["result"]


async def test_a_timeout_fault_in_a_tool_without_a_timeout(cassette_path: Path) -> None:
    endless = tool(effect="read_only", name="get_weather", timeout_s=None)(get_weather.fn)
    fault = await Replayer(
        weather_agent(tools=[endless, convert]), tools={"get_weather": "fault:timeout"}
    ).replay(cassette_path)
    assert fault.first.new["result"] == "tool 'get_weather' timed out (injected fault)"


async def test_missing_interaction_names_the_run_step_and_nearest_requests(
    cassette_path: Path,
) -> None:
    @tool(effect="read_only", name="convert")
    def refuses(celsius: float) -> float:
        """Celsius to Fahrenheit."""
        raise BusinessFailure("conversion disabled", stop=False)

    short = Cassette.load(cassette_path)
    short.interactions = short.interactions[:2]
    report = await Replayer(weather_agent(tools=[get_weather, refuses])).replay(short)
    assert report.result.stop_reason is StopReason.ERROR
    message = report.result.error.message
    assert "model call #3 has no recorded interaction" in message
    assert "nearest: #2" in message
    assert report.result.error.step == 3


async def test_streamed_sessions_replay_as_streams(tmp_path: Path) -> None:
    path = tmp_path / "stream.yaml"
    await record(path, agent=weather_agent(model_settings=ModelSettings(stream=True)))
    cassette = Cassette.load(path)
    assert cassette.interactions[0].streamed
    report = await Replayer(weather_agent(model_settings=ModelSettings(stream=True))).replay(
        cassette
    )
    assert not report.diverged
    deltas = [e.text for e in report.result.events if e.kind == "text_delta"]
    assert "".join(deltas) == "Paris is 21 °C (69.8 °F); Oslo is 4 °C."


async def test_json_cassettes_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "weather.json"
    await record(path)
    assert path.read_text().lstrip().startswith("{")
    report = await Replayer(weather_agent()).replay(path)
    assert not report.diverged


async def test_fork_replays_before_n_and_goes_live_from_n(
    cassette_path: Path, tmp_path: Path
) -> None:
    live = ScriptedModel(["Live answer from the new branch."])
    replayer = Replayer(weather_agent(), live_model=live, live_from=3)
    report = await replayer.replay(cassette_path)
    assert report.result.output == "Live answer from the new branch."
    assert len(live.requests) == 1
    assert live.requests[0]["messages"][-1]["role"] == "tool"  # continues mid-session
    assert report.saved_to == cassette_path.with_name("weather.fork.yaml")
    branch = Cassette.load(report.saved_to)
    assert len(branch.interactions) == 3
    assert branch.info["live_from"] == 3


async def test_new_episodes_records_calls_beyond_the_recording(cassette_path: Path) -> None:
    short = Cassette.load(cassette_path)
    short.interactions = short.interactions[:3]
    short.save(cassette_path)
    live = ScriptedModel(["Fresh final answer."])
    report = await Replayer(weather_agent(), live_model=live, record_mode="new_episodes").replay(
        cassette_path
    )
    assert report.result.output == "Fresh final answer."
    assert len(Cassette.load(cassette_path).interactions) == 4
    none_mode = await Replayer(weather_agent(), record_mode=RecordMode.NONE).replay(cassette_path)
    assert none_mode.result.output == "Fresh final answer."


def test_record_modes_reject_typos() -> None:
    with pytest.raises(
        UsageError, match="'new_episode' is not a record mode; valid modes are: 'none', 'once'"
    ):
        RecordMode.parse("new_episode")


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("", "the file is empty"),
        ("interactions: [\n  - request: {", "is not valid YAML"),
        ("just: a mapping\n", "not a vcrpy cassette"),
        (
            "interactions:\n- request: {body: 'not json', headers: {}, method: POST, uri: x}\n"
            "  response: {body: {string: '{}'}, headers: {}, status: {code: 200, message: OK}}\n",
            "interaction 1: the request body is not JSON",
        ),
        (
            "interactions:\n"
            "- request: {body: '{\"messages\": []}', headers: {}, method: POST, uri: x}\n"
            "  response: {body: {string: '{\"choices\": []}'}, headers: {},\n"
            "             status: {code: 200, message: OK}}\n",
            "interaction 1: the response is not a chat completion",
        ),
    ],
)
def test_corrupt_cassettes_give_clear_errors(tmp_path: Path, content: str, fragment: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    with pytest.raises(CassetteError) as info:
        Cassette.load(path)
    assert str(path) in str(info.value)
    assert fragment in str(info.value)


async def test_truncated_cassette_is_a_clear_error(cassette_path: Path) -> None:
    text = cassette_path.read_text()
    cassette_path.write_text(text[: len(text) // 2])
    with pytest.raises(CassetteError, match=str(cassette_path)):
        Cassette.load(cassette_path)


def test_missing_cassette_file() -> None:
    with pytest.raises(CassetteError, match="no such cassette file"):
        Cassette.load("/nonexistent/x.yaml")
