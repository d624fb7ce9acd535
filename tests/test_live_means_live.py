"""`--live` means live: every model call of every case goes to the endpoint, a cassette is
written only as `--record-mode` says, a failed live call never becomes a recording, a live run
that ran out of its time budget replays as the same timeout, and live calls carry a max_tokens.

Through the real CLI, on a small suite of this test's own recorded from the bundled
OpenAI-compatible server (real HTTP, the openai SDK as the client).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from agentbench.replay.cassette import Cassette
from agentbench.testing import Delay, HTTPFault, OpenAICompatibleServer
from tests.test_journeys import Result, agentbench
from tests.weather_suite import AGENT, respond

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

PACKAGE = "liveweather"
SUITE = f"""
name: mini
agent: {PACKAGE}.agent:agent
model: {{name: mini-model}}
cassettes: cassettes
scorers:
  - stop_reason: completed
"""
CASES = """
- id: paris
  input: Weather in Paris?
  expect:
    - output_contains: "21 degrees"
- id: oslo
  input: Weather in Oslo?
  expect:
    - output_contains: "4 degrees"
"""
CALLS_PER_CASE = 2  # get_weather, then the answer
FAILING = HTTPFault(503, "upstream overloaded", headers={"retry-after": "0"})


def _forget_package() -> None:
    for name in [m for m in sys.modules if m == PACKAGE or m.startswith(f"{PACKAGE}.")]:
        del sys.modules[name]


@pytest.fixture(autouse=True)
def _fresh_package() -> Any:
    _forget_package()
    yield
    _forget_package()


def cli(repo: Path, *args: str) -> Result:
    _forget_package()
    ran = agentbench(repo, *args)
    assert "Traceback" not in ran.err, ran.err
    return ran


def make_repo(root: Path, suite: str = SUITE, cases: str = CASES, agent: str = AGENT) -> Path:
    (root / PACKAGE).mkdir(parents=True)
    (root / PACKAGE / "__init__.py").write_text("")
    (root / PACKAGE / "agent.py").write_text(agent)
    folder = root / "suites" / "mini"
    (folder / "cases").mkdir(parents=True)
    (folder / "suite.yaml").write_text(suite)
    (folder / "cases" / "cases.yaml").write_text(cases)
    return root


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The suite with both cases recorded (`--live --record-mode all`), once for the module."""
    _forget_package()
    root = make_repo(tmp_path_factory.mktemp("recorded") / "repo")
    with OpenAICompatibleServer(responder=respond) as server:
        ran = live(root, server, "--record-mode", "all")
    assert ran.code == 0, ran.out + ran.err
    return root


@pytest.fixture
def repo(recorded: Path, tmp_path: Path) -> Path:
    """A copy of the recorded suite for one test (its store and cassettes its own)."""
    return Path(shutil.copytree(recorded, tmp_path / "repo"))


def live(repo: Path, server: OpenAICompatibleServer, *args: str) -> Result:
    return cli(
        repo,
        *("run", "suites/mini", "--live", "--base-url", server.base_url, "--no-report"),
        *args,
    )


def cassettes(repo: Path) -> dict[str, bytes]:
    folder = repo / "suites" / "mini" / "cassettes"
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.yaml"))}


def test_live_calls_the_model_for_every_case_and_writes_nothing_by_default(repo: Path) -> None:
    before = cassettes(repo)
    with OpenAICompatibleServer(responder=respond) as server:
        ran = live(repo, server, "--json")
    assert ran.code == 0, ran.out + ran.err
    assert len(server.requests) == 2 * CALLS_PER_CASE  # no case answered from its cassette
    assert cassettes(repo) == before


def test_live_never_passes_from_a_cassette_when_the_endpoint_is_down(repo: Path) -> None:
    before = cassettes(repo)
    with OpenAICompatibleServer([FAILING] * 8) as server:
        ran = live(repo, server, "--json")
    assert ran.code == 3, ran.out + ran.err
    outcomes = {r["case_id"]: r for r in ran.json()["results"]}
    assert {r["status"] for r in outcomes.values()} == {"error"}
    assert "the live model failed" in outcomes["paris"]["error"]
    assert "HTTP 503" in outcomes["paris"]["error"]
    assert "was left as it was" in outcomes["paris"]["error"]
    assert cassettes(repo) == before


def test_nothing_listening_is_an_infrastructure_error_not_a_pass(repo: Path) -> None:
    before = cassettes(repo)
    ran = cli(
        repo,
        *("run", "suites/mini", "--filter", "paris", "--live", "--no-report"),
        *("--base-url", "http://127.0.0.1:9/v1", "--model", "gpt-4o-mini"),
    )
    assert ran.code == 3, ran.out + ran.err
    assert "connection failed" in ran.out + ran.err
    assert cassettes(repo) == before


def test_an_outage_while_recording_leaves_every_cassette_as_it_was(repo: Path) -> None:
    before = cassettes(repo)
    # The first call of each case is answered, the second fails for good: half a session.
    script = [respond, *[FAILING] * 4, respond, *[FAILING] * 4]
    with OpenAICompatibleServer(script, responder=respond) as server:
        ran = live(repo, server, "--record-mode", "all", "--concurrency", "1")
    assert ran.code == 3, ran.out + ran.err
    assert cassettes(repo) == before
    offline = cli(repo, "run", "suites/mini", "--no-report")
    assert offline.code == 0, offline.out + offline.err  # still the good recording


def test_record_mode_once_writes_only_the_missing_cassette_and_calls_every_case(
    repo: Path,
) -> None:
    folder = repo / "suites" / "mini" / "cassettes"
    (folder / "oslo.yaml").unlink()
    kept = (folder / "paris.yaml").read_bytes()
    with OpenAICompatibleServer(responder=respond) as server:
        ran = live(repo, server, "--record-mode", "once")
    assert ran.code == 0, ran.out + ran.err
    assert len(server.requests) == 2 * CALLS_PER_CASE
    assert (folder / "paris.yaml").read_bytes() == kept
    assert Cassette.load(folder / "oslo.yaml").interactions


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--record-mode", "all"), "--record-mode all records every case anew"),
        (("--live", "--record-mode", "new_episodes"), "drop --live for new_episodes"),
    ],
)
def test_record_modes_that_contradict_live_are_usage_errors(
    repo: Path, args: tuple[str, ...], message: str
) -> None:
    ran = cli(repo, "run", "suites/mini", "--no-report", "--base-url", "http://x", *args)
    assert ran.code == 2
    assert message in ran.err


def test_live_without_an_endpoint_is_a_usage_error_before_anything_runs(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    ran = cli(repo, "run", "suites/mini", "--live", "--no-report")
    assert ran.code == 2
    assert "--live calls a live model for every case; suite 'mini' has no endpoint" in ran.err


def test_live_calls_carry_a_max_tokens_the_recording_does_not_keep(repo: Path) -> None:
    with OpenAICompatibleServer(responder=respond) as server:
        ran = live(repo, server, "--record-mode", "all", "--filter", "paris")
    assert ran.code == 0, ran.out + ran.err
    assert {r.body.get("max_tokens") for r in server.requests} == {4096}
    recorded = Cassette.load(repo / "suites" / "mini" / "cassettes" / "paris.yaml")
    assert all("max_tokens" not in r for r in recorded.requests())
    assert recorded.info["live_max_tokens"] == 4096
    offline = cli(repo, "run", "suites/mini", "--no-report")
    assert offline.code == 0, offline.out + offline.err  # replays without drift


@pytest.mark.parametrize(("setting", "sent"), [("max_tokens: 2", 2), ("max_tokens: null", None)])
def test_the_suite_sets_the_live_max_tokens(tmp_path: Path, setting: str, sent: Any) -> None:
    suite = SUITE.replace("model: {name: mini-model}", f"model: {{name: mini-model, {setting}}}")
    repo = make_repo(tmp_path / "repo", suite=suite)
    with OpenAICompatibleServer(responder=respond) as server:
        ran = live(repo, server, "--filter", "paris", "--json")
    assert {r.body.get("max_tokens") for r in server.requests} == {sent}
    answer = ran.json()["results"][0]
    if sent == 2:  # "Paris: 21 degrees." cut at two words, as a server does
        assert answer["status"] == "failed", answer
    else:
        assert answer["status"] == "passed", answer


def test_a_model_that_refuses_max_tokens_gets_max_completion_tokens(repo: Path) -> None:
    with OpenAICompatibleServer(responder=respond, quirks=["openai_reasoning"]) as server:
        ran = live(repo, server, "--filter", "paris")
    assert ran.code == 0, ran.out + ran.err
    sent = [sorted(k for k in r.body if k.startswith("max_")) for r in server.requests]
    # Refused once, then the cap under the name the model takes, for every later call too.
    assert sent == [["max_tokens"], ["max_completion_tokens"], ["max_completion_tokens"]]


SLOW_AGENT = AGENT.replace(
    'agent = Agent(name="weather", instructions="Answer briefly.", tools=[get_weather])',
    "from agentbench import Limits\n"
    'agent = Agent(name="weather", instructions="Answer briefly.", tools=[get_weather], '
    "limits=Limits(timeout_s=0.5))",
)
TIMEOUT_CASES = """
- id: paris
  input: Weather in Paris?
  expect:
    - stop_reason: timeout
"""


def test_a_live_run_that_ran_out_of_time_replays_with_the_same_stop_reason(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "repo", cases=TIMEOUT_CASES, agent=SLOW_AGENT)
    # The tool call is answered at once; the answer after it takes longer than the budget.
    with OpenAICompatibleServer([respond, Delay(3.0, "too late")]) as server:
        ran = live(repo, server, "--record-mode", "all", "--json")
    assert ran.code == 0, ran.out + ran.err
    recorded = Cassette.load(repo / "suites" / "mini" / "cassettes" / "paris.yaml")
    # After the tool call (or, on a machine slow enough, before even that was answered).
    answered = len(recorded.interactions)
    assert answered in (0, 1)
    assert recorded.info["budget_stops"] == [
        {"after_calls": answered, "stop_reason": "timeout", "agent": "weather"}
    ]
    replayed = cli(repo, "run", "suites/mini", "--no-report", "--json")
    assert replayed.code == 0, replayed.out + replayed.err
    result = replayed.json()["results"][0]
    assert result["status"] == "passed", result
    assert not result["divergences"], result["divergences"]
    assert orjson.dumps(result).find(b"no recorded interaction") == -1


def test_record_mode_once_without_live_replays_what_is_recorded_and_records_the_rest(
    repo: Path,
) -> None:
    folder = repo / "suites" / "mini" / "cassettes"
    (folder / "oslo.yaml").unlink()
    kept = (folder / "paris.yaml").read_bytes()
    with OpenAICompatibleServer(responder=respond) as server:
        ran = cli(
            repo,
            *("run", "suites/mini", "--record-mode", "once", "--no-report"),
            *("--base-url", server.base_url),
        )
    assert ran.code == 0, ran.out + ran.err
    assert len(server.requests) == CALLS_PER_CASE  # only oslo's, which had no cassette
    assert (folder / "paris.yaml").read_bytes() == kept
    assert len(Cassette.load(folder / "oslo.yaml").interactions) == CALLS_PER_CASE


def test_record_mode_new_episodes_records_the_calls_beyond_a_recording(repo: Path) -> None:
    path = repo / "suites" / "mini" / "cassettes" / "paris.yaml"
    cut = Cassette.load(path)
    cut.interactions = cut.interactions[:1]  # the tool call only: the answer is not recorded
    cut.save(path)
    with OpenAICompatibleServer(responder=respond) as server:
        ran = cli(
            repo,
            *("run", "suites/mini", "--filter", "paris", "--record-mode", "new_episodes"),
            *("--no-report", "--base-url", server.base_url),
        )
    assert ran.code == 0, ran.out + ran.err
    assert len(server.requests) == 1  # the call beyond the recording
    assert len(Cassette.load(path).interactions) == CALLS_PER_CASE


@pytest.mark.parametrize("mode", ["once", "new_episodes"])
def test_a_record_mode_that_records_without_an_endpoint_is_a_usage_error(
    repo: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    ran = cli(repo, "run", "suites/mini", "--record-mode", mode, "--no-report")
    assert ran.code == 2
    assert f"--record-mode {mode} records" in ran.err and "has no endpoint" in ran.err


TOOL_CUT_AGENT = '''
import os
import time

from agentbench import Agent, Limits, tool


@tool(effect="write", timeout_s=30)
def get_weather(city: str) -> dict:
    """Current temperature (a slow service; every call is logged).

    Args:
        city: City name.
    """
    with open(os.environ["WEATHER_CALLS"], "a") as calls:
        calls.write(city + "\\n")
    time.sleep(3)
    return {"city": city, "celsius": 21}


agent = Agent(name="weather", instructions="Answer briefly.", tools=[get_weather],
              limits=Limits(timeout_s=0.5))
'''


def test_a_live_run_cut_short_in_a_tool_call_replays_without_running_that_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = tmp_path / "calls.txt"
    monkeypatch.setenv("WEATHER_CALLS", str(calls))
    repo = make_repo(tmp_path / "repo", cases=TIMEOUT_CASES, agent=TOOL_CUT_AGENT)
    with OpenAICompatibleServer(responder=respond) as server:
        ran = live(repo, server, "--record-mode", "all")
    assert ran.code == 0, ran.out + ran.err  # the case expects the timeout
    recorded = Cassette.load(repo / "suites" / "mini" / "cassettes" / "paris.yaml")
    assert recorded.info["budget_stops"] == [
        {"after_calls": 1, "stop_reason": "timeout", "agent": "weather", "after_tools": 0}
    ]
    assert calls.read_text().split() == ["Paris"]
    replayed = cli(repo, "run", "suites/mini", "--no-report", "--json")
    assert replayed.code == 0, replayed.out + replayed.err
    result = replayed.json()["results"][0]
    assert result["status"] == "passed", result
    assert not result["divergences"], result["divergences"]
    assert calls.read_text().split() == ["Paris"]  # the call the live run cut was not run again
