"""The OpenAI Agents SDK help desk suite's journeys, through the real CLI on a copy of the suite.

golden/openai_agents is a user's Agents SDK agent run unchanged as a boundary target, on the
SDK's default model (OpenAIResponsesModel: the Responses API) pointed at the loopback server.
Its baseline replays unchanged; a changed tool result fails the gate naming the step and the
field; reworded instructions — the help desk's, or the specialist's it hands off to — are
request drift at the system message of the call that sent them; a renamed tool argument is
request drift at the tools; `--live-from-divergence` continues a handed-off case with the live
model; `agentbench bisect` finds the commit that changed a tool.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.framework_journeys import (
    baseline_checkout,
    bisect_history,
    change,
    copy_of,
    first_divergences,
    framework_or_skip,
    gate_against_baseline,
    run_live_from_divergence,
)
from tests.test_journeys import agentbench

pytestmark = pytest.mark.slow  # journeys through the real CLI, seconds each

framework_or_skip("agents")

SUITE = "openai_agents"
CASES = 7
WIKI = ('"since": "2026-06-30 07:40"', '"since": "2026-06-30 07:45"')
# A session that started a minute later: the VPN still dropped twice, by idle timeout.
SESSION = ('"started": "09:20"', '"started": "09:21"')
# service_status(service) becomes service_status(name), its docstring and body too.
RENAMED_ARGUMENT = (
    ('def service_status(service: Literal["email", "vpn", "wiki"])',
     'def service_status(name: Literal["email", "vpn", "wiki"])'),
    ("        service: The service to check.", "        name: The service to check."),
    ('{"service": service, **SERVICES[service]}', '{"service": name, **SERVICES[name]}'),
)  # fmt: skip


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A committed checkout whose store holds one baseline eval of the suite."""
    return baseline_checkout(tmp_path_factory.mktemp("openai-agents"), SUITE, CASES)


@pytest.fixture
def checkout(baseline: Path, tmp_path: Path) -> Path:
    return copy_of(baseline, tmp_path)


def test_unchanged_code_replays_unchanged(checkout: Path) -> None:
    ran = gate_against_baseline(checkout, SUITE, "--strict")
    assert ran.code == 0, ran.out
    assert f"unchanged: {CASES} case(s)" in ran.out
    assert "first divergence" not in ran.out


def test_a_changed_tool_result_fails_the_gate_naming_the_step_and_field(checkout: Path) -> None:
    change(checkout, SUITE, WIKI)
    ran = gate_against_baseline(checkout, SUITE, "--filter", "wiki-status")
    assert ran.code == 1, ran.out
    assert "openai_agents/wiki-status (golden/openai_agents/cases/helpdesk.yaml:2)" in ran.out
    (first,) = first_divergences(ran.out)
    assert (first.step, first.agent, first.kind) == (1, "it_helpdesk", "tool_result_changed")
    assert first.what == "tool call service_status"
    # The SDK sends a dict result as Python's str() of it, not JSON: the field named is the
    # result, with the text that changed in it.
    assert first.details.strip().startswith("result")
    assert "07:40" in first.details and "07:45" in first.details


@pytest.mark.parametrize(
    ("old", "new", "step", "agent", "call"),
    [
        ("Check service status", "Look at the service status", 1, "it_helpdesk", 1),
        # The instructions of the agent the help desk hands off to: sent from the second call,
        # that agent's first step.
        ("found in two sentences.", "found briefly.", 1, "network_specialist", 2),
    ],
    ids=["help-desk", "handed-off-to"],
)  # fmt: skip
def test_reworded_instructions_are_request_drift_at_the_system_message(
    checkout: Path, old: str, new: str, step: int, agent: str, call: int
) -> None:
    change(checkout, SUITE, (old, new))
    ran = gate_against_baseline(checkout, SUITE, "--filter", "vpn-drops-handed-off")
    assert ran.code == 1, ran.out
    (first,) = first_divergences(ran.out)
    assert (first.step, first.agent, first.kind) == (step, agent, "request_drift")
    assert first.what == f"model call #{call}"
    assert first.details.strip().startswith("messages[0].content: '")
    assert new[:12] in first.details


def test_a_renamed_tool_argument_is_request_drift_at_the_tools(checkout: Path) -> None:
    change(checkout, SUITE, *RENAMED_ARGUMENT)
    ran = gate_against_baseline(checkout, SUITE, "--filter", "wiki-status")
    assert ran.code == 1, ran.out
    (first,) = first_divergences(ran.out)
    assert (first.step, first.kind, first.what) == (1, "request_drift", "model call #1")
    assert "tools[0].function.parameters.properties.service: removed" in first.details
    assert "tools[0].function.parameters.properties.name: added" in first.details


def test_live_from_divergence_continues_a_handed_off_case_live(checkout: Path) -> None:
    change(checkout, SUITE, SESSION)
    case = ("--filter", "vpn-drops-handed-off")
    replayed = gate_against_baseline(checkout, SUITE, *case, "--json")
    assert replayed.code == 1, replayed.out  # the recording's last answer no longer applies
    (result,) = replayed.json()["results"]
    assert result["status"] == "failed" and result["diverged_at"]["live_from"] is None

    ran, requests = run_live_from_divergence(checkout, SUITE, *case)
    assert ran.code == 0, ran.out + ran.err
    assert "diverged at step 1 (network_specialist); continued live from model call #3" in ran.out
    # Calls 1 (the help desk's handoff) and 2 (the specialist's tool call) were replayed; the
    # live model answered the third, on the Responses API, shown the changed sessions.
    (live,) = requests
    assert live.path == "/v1/responses"
    assert "'started': '09:21'" in live.body["input"][-1]["output"]
    assert live.body["instructions"].startswith("You are Contoso's network specialist.")


def test_bisect_finds_the_commit_that_changed_a_tool(checkout: Path) -> None:
    shas = bisect_history(checkout, SUITE, WIKI)
    found = agentbench(
        checkout, "bisect", "wiki-status", "--good", shas[0], "--bad", "HEAD",
        "--suite", f"golden/{SUITE}",
    )  # fmt: skip
    assert found.code == 0, found.out + found.err
    assert f"  {shas[1]}  the changed tool" in found.out
    assert f"compared with the commit before it, {shas[0][:12]}: newly_failing" in found.out
    assert "first divergence — step 1 (it_helpdesk) tool_result_changed" in found.out
