"""`agentbench replay` with a suite's settings and a live model of its own (issue 16, point 4).

Through the real CLI on a small suite of this test's own, whose `model.settings` set
temperature and tool_choice, recorded with `agentbench run --live` from the bundled
OpenAI-compatible server (real HTTP, the openai SDK as the client). The replay applies the
suite's settings whatever gives the agent (`--agent`, `--suite`, the cassette), and goes live
at `--live-from N` against the endpoint `--base-url` / `--model` (or the suite's `model:`)
name, with no OPENAI_* variable set.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from agentbench.replay.cassette import Cassette
from agentbench.testing import OpenAICompatibleServer
from tests.test_journeys import Result, agentbench
from tests.weather_suite import AGENT, respond

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

PACKAGE = "replayweather"  # the agent's package, at the repository root
AGENT_REF = f"{PACKAGE}.agent:agent"
SUITE = f"""
name: mini
agent: {AGENT_REF}
model:
  name: mini-model
  settings: {{temperature: 0.2, tool_choice: auto}}
cassettes: cassettes
scorers:
  - stop_reason: completed
"""
CASES = """
- id: paris
  input: Weather in Paris?
  expect:
    - output_contains: "21 degrees"
"""
SETTINGS = {"temperature": 0.2, "tool_choice": "auto"}


def _forget_package() -> None:
    for name in [m for m in sys.modules if m == PACKAGE or m.startswith(f"{PACKAGE}.")]:
        del sys.modules[name]


@pytest.fixture(autouse=True)
def _fresh_package() -> Any:
    _forget_package()
    yield
    _forget_package()


def cli(repo: Path, *args: str) -> Result:
    """One command in `repo`, importing the agent's code as it is now (a fresh process would)."""
    _forget_package()
    ran = agentbench(repo, *args)
    assert "Traceback" not in ran.err, ran.err
    return ran


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with the suite, its case recorded live through the test server."""
    root = tmp_path / "repo"
    (root / PACKAGE).mkdir(parents=True)
    (root / PACKAGE / "__init__.py").write_text("")
    (root / PACKAGE / "agent.py").write_text(AGENT)
    suite = root / "suites" / "mini"
    (suite / "cases").mkdir(parents=True)
    (suite / "suite.yaml").write_text(SUITE)
    (suite / "cases" / "weather.yaml").write_text(CASES)
    with OpenAICompatibleServer(responder=respond) as server:
        ran = cli(
            root,
            *("run", "suites/mini", "--live", "--record-mode", "all", "--no-report"),
            *("--base-url", server.base_url),
        )
    assert ran.code == 0, ran.out + ran.err
    return root


def cassette_of(repo: Path) -> Path:
    return repo / "suites" / "mini" / "cassettes" / "paris.yaml"


def replayed(repo: Path, *args: str) -> tuple[Result, dict[str, Any]]:
    ran = cli(repo, "replay", *args, "--json")
    assert ran.out, ran.err
    return ran, orjson.loads(ran.out)


def drifted_fields(report: dict[str, Any]) -> set[str]:
    return {change["path"] for drift in report["drifts"] for change in drift["changes"]}


def test_the_recording_carries_the_suites_settings(repo: Path) -> None:
    cassette = Cassette.load(cassette_of(repo))
    assert cassette.info["suite_dir"]
    assert len(cassette.interactions) == 2  # get_weather, then the answer
    for request in cassette.requests():
        assert {k: request.get(k) for k in SETTINGS} == SETTINGS


def test_agent_given_replays_with_the_cassettes_suite_settings(repo: Path) -> None:
    cassette = str(cassette_of(repo))
    ran, report = replayed(repo, cassette, "--agent", AGENT_REF)
    assert ran.code == 0, ran.out + ran.err
    assert not report["diverged"] and report["drifts"] == []
    strict, report = replayed(repo, cassette, "--agent", AGENT_REF, "--strict")
    assert strict.code == 0 and not report["diverged"], strict.out


def test_suite_given_wins_over_the_cassettes_own(repo: Path) -> None:
    """A suite without settings, named with --suite, is the one applied: the recorded
    temperature and tool_choice are then what the current requests lack."""
    plain = repo / "suites" / "plain"
    plain.mkdir()
    (plain / "suite.yaml").write_text(f"name: plain\nagent: {AGENT_REF}\n")
    ran, report = replayed(repo, str(cassette_of(repo)), "--suite", "suites/plain")
    assert ran.code == 0, ran.err  # lenient: drift is reported, not counted
    assert drifted_fields(report) == {"temperature", "tool_choice"}
    strict, report = replayed(repo, str(cassette_of(repo)), "--suite", "suites/plain", "--strict")
    assert strict.code == 1 and report["first"]["class"] == "request_drift"


def test_suite_given_applies_its_settings_to_a_cassette_that_names_none(repo: Path) -> None:
    cassette = Cassette.load(cassette_of(repo))
    cassette.metadata["agentbench"].pop("suite_dir")
    bare = cassette.save(repo / "elsewhere" / "paris.yaml")
    # Without a suite the agent's own settings (none) are sent: the drift this test is about.
    _, report = replayed(repo, str(bare), "--agent", AGENT_REF)
    assert drifted_fields(report) == {"temperature", "tool_choice"}
    for agent in (("--agent", AGENT_REF), ()):  # the suite's agent when none is given
        ran, report = replayed(repo, str(bare), "--suite", "suites/mini", "--strict", *agent)
        assert ran.code == 0, ran.out + ran.err
        assert not report["diverged"] and report["drifts"] == []


def test_suite_given_replays_a_stored_run_without_an_agent(repo: Path) -> None:
    listed = cli(repo, "traces", "sql", "SELECT run_id FROM runs", "--format", "json")
    (row,) = listed.json()
    ran, report = replayed(repo, row["run_id"], "--suite", "suites/mini", "--strict")
    assert ran.code == 0, ran.out + ran.err
    assert not report["diverged"] and report["drifts"] == []


def test_the_suites_tool_policies_apply_with_an_agent_given_and_flags_win(repo: Path) -> None:
    suite = repo / "suites" / "mini" / "suite.yaml"
    suite.write_text(suite.read_text() + "tools:\n  overrides: {get_weather: recorded}\n")
    agent = repo / PACKAGE / "agent.py"
    agent.write_text(agent.read_text().replace('"Paris": 21', '"Paris": 25'))
    cassette = str(cassette_of(repo))
    ran, report = replayed(repo, cassette, "--agent", AGENT_REF)
    assert ran.code == 0 and not report["diverged"], ran.out  # the recorded result is served
    live, report = replayed(repo, cassette, "--agent", AGENT_REF, "--tool", "get_weather=live")
    assert live.code == 1 and report["first"]["class"] == "tool_result_changed", live.out


@pytest.fixture
def offline_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL", "AGENTBENCH_MODEL"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.usefixtures("offline_env")
def test_live_from_goes_to_the_endpoint_named_by_flags(repo: Path) -> None:
    recorded = Cassette.load(cassette_of(repo)).interactions
    with OpenAICompatibleServer(responder=respond) as server:
        ran, report = replayed(
            repo,
            *(str(cassette_of(repo)), "--agent", AGENT_REF, "--live-from", "2"),
            *("--base-url", server.base_url, "--model", "m"),
        )
    assert ran.code == 0, ran.out + ran.err
    assert not report["diverged"] and report["errors"] == []
    # Call #1 was served from the cassette; call #2 on went to the server, with the suite's
    # settings, through the openai SDK over HTTP.
    (received,) = server.requests
    assert received.path.endswith("/chat/completions")
    assert received.body["messages"] == recorded[1].request["messages"]
    assert received.body["model"] == "m"  # the live model's name, not the recorded one's
    assert {k: received.body.get(k) for k in SETTINGS} == SETTINGS
    assert received.headers.get("user-agent", "").startswith("AsyncOpenAI/Python")
    fork_path = cassette_of(repo).with_name("paris.fork.yaml")
    fork = Cassette.load(fork_path)
    assert fork.info["live_from"] == 2 and len(fork.interactions) == 2
    # The fork replays offline as it ran: no drift on the model name of its live calls.
    ran, report = replayed(repo, str(fork_path), "--agent", AGENT_REF, "--strict")
    assert ran.code == 0, ran.out + ran.err
    assert not report["diverged"] and not report.get("drifts"), report


@pytest.mark.usefixtures("offline_env")
def test_live_from_defaults_to_the_suites_model_and_flags_win(repo: Path) -> None:
    suite = repo / "suites" / "mini" / "suite.yaml"
    cassette = str(cassette_of(repo))
    with (
        OpenAICompatibleServer(responder=respond) as in_suite,
        OpenAICompatibleServer(responder=respond) as flagged,
    ):
        name = "  name: mini-model\n"
        text = suite.read_text().replace(name, f"{name}  base_url: {in_suite.base_url}\n")
        suite.write_text(text)
        ran, _ = replayed(repo, cassette, "--live-from", "2")
        assert ran.code == 0, ran.out + ran.err
        assert len(in_suite.requests) == 1 and not flagged.requests
        ran, _ = replayed(repo, cassette, "--live-from", "2", "--base-url", flagged.base_url)
        assert ran.code == 0, ran.out + ran.err
        assert len(in_suite.requests) == 1 and len(flagged.requests) == 1


@pytest.mark.usefixtures("offline_env")
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--live-from", "2"), "--live-from 2 calls a live model, and there is no endpoint for "
         "model 'mini-model' (pass --base-url URL"),
        (("--record-mode", "all", "--agent", AGENT_REF), "--record-mode all calls a live model"),
    ],
)  # fmt: skip
def test_a_live_model_without_an_endpoint_is_a_usage_error_before_anything_runs(
    repo: Path, args: tuple[str, ...], message: str
) -> None:
    ran = cli(repo, "replay", str(cassette_of(repo)), *args)
    assert ran.code == 2, ran.out + ran.err
    assert message in ran.err and "--base-url" in ran.err
    assert len(ran.err.strip().splitlines()) == 1, ran.err
    assert PACKAGE not in sys.modules  # the agent's code was never imported
    assert not cassette_of(repo).with_name("paris.fork.yaml").exists()


@pytest.mark.usefixtures("offline_env")
def test_a_live_model_without_a_name_is_a_usage_error(repo: Path) -> None:
    suite = repo / "suites" / "mini" / "suite.yaml"
    suite.write_text(suite.read_text().replace("  name: mini-model\n", ""))
    ran = cli(repo, "replay", str(cassette_of(repo)), "--live-from", "2", "--base-url", "x")
    assert ran.code == 2
    assert "--live-from 2 calls a live model, and there is no model name (pass --model" in ran.err
