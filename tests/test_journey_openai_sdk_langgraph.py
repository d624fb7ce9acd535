"""The user's path with an agent written on a real framework, through the real CLI: the bare
openai SDK (golden/openai_sdk) and LangGraph (golden/langgraph_agent), boundary targets whose
model calls are recorded and replayed at the model-API boundary.

Each journey works on a copy of the shipped suite and its cassettes, as a user's repository:
unchanged code passes offline; a changed tool result fails the gate naming the step and the
field; a reworded system prompt is request drift at `messages[0].content`; a renamed tool
argument is request drift at the tool's path in `tools`; `--live-from-divergence` continues
the case live on the bundled server answering as the suite's reference policy; `bisect` names
the commit that broke a case. A framework that is not installed skips its journeys.
"""

from __future__ import annotations

import importlib
import importlib.util
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest

from agentbench.testing import OpenAICompatibleServer
from tests.framework_journeys import reference_policy
from tests.test_journeys import ROOT, Result, _generated, agentbench, git

pytestmark = pytest.mark.slow  # journeys through the real CLI, seconds each

Edit = tuple[str, str]  # (old, new) in the suite's agent.py


@dataclass(frozen=True)
class Framework:
    suite: str
    requires: tuple[str, ...]  # modules the suite's agent imports
    case: str  # the case the tool-result, live and bisect journeys follow
    tool_change: Edit  # a tool's result changed so that `case` fails
    shown_to: frozenset[str]  # every case whose model is shown that result
    changed_field: str  # how the divergence names the changed field of that result
    harmless_change: Edit  # a tool's result changed that `case` still passes on, live
    shown_live: str  # what the live continuation says about the harmless change
    prompt_change: Edit
    argument_change: tuple[Edit, ...]
    argument_path: str  # where in the request the renamed argument shows


FRAMEWORKS = [
    Framework(
        suite="openai_sdk",
        requires=("openai",),
        case="cheapest-flight",
        tool_change=('"price_eur": 64}', '"price_eur": 66}'),
        shown_to=frozenset({"cheapest-flight"}),
        changed_field="result.flights[0].price_eur: 64 → 66",
        harmless_change=('"departs": "18:30"', '"departs": "18:45"'),
        shown_live="leaving at 18:45",
        prompt_change=("never invent a flight", "never make up a flight"),
        argument_change=(
            ("origin: str, destination: str, date: str", "origin: str, to_airport: str, date: str"),
            ("(origin.upper(), destination.upper())", "(origin.upper(), to_airport.upper())"),
            ("{origin} to {destination} on", "{origin} to {to_airport} on"),
            ('"destination": {"type"', '"to_airport": {"type"'),
            ('["origin", "destination", "date"]', '["origin", "to_airport", "date"]'),
        ),
        argument_path="tools[0].function.parameters.properties.destination",
    ),
    Framework(
        suite="langgraph_agent",
        requires=("langgraph", "langchain_openai"),
        case="stock-one-part",
        tool_change=('"bin": "A2-14"', '"bin": "A2-16"'),
        shown_to=frozenset({"stock-one-part", "stock-two-parts"}),
        changed_field="result.bin: 'A2-14' → 'A2-16'",
        harmless_change=("M8 hex bolt, box of 100", "M8 hex bolt, box of 50"),
        shown_live="(M8 hex bolt, box of 50)",
        prompt_change=("Check stock before you promise", "Always check stock before you promise"),
        argument_change=(
            ("quantity: int, order_id: str)", "quantity: int, order_ref: str)"),
            ('f"RS-{order_id}-', 'f"RS-{order_ref}-'),
        ),
        argument_path="tools[1].function.parameters.properties.order_id",
    ),
]


@pytest.fixture(params=FRAMEWORKS, ids=[f.suite for f in FRAMEWORKS])
def framework(request: pytest.FixtureRequest) -> Framework:
    chosen: Framework = request.param
    missing = [m for m in chosen.requires if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(
            f"{chosen.suite} needs {', '.join(missing)} (pip install 'agentbench[frameworks]')"
        )
    return chosen


@pytest.fixture
def checkout(tmp_path: Path, framework: Framework) -> Path:
    """A copy of the framework's suite and its cassettes, as a user's repository."""
    root = tmp_path / "repo"
    suite = framework.suite
    shutil.copytree(ROOT / "golden" / suite, root / "golden" / suite, ignore=_generated)
    for name in ("__init__.py", "_reference.py"):
        shutil.copy(ROOT / "golden" / name, root / "golden" / name)
    shutil.copytree(ROOT / "replays" / suite, root / "replays" / suite)
    shutil.copytree(ROOT / "schema", root / "schema")
    (root / ".gitignore").write_text(".agentbench/\nreports/\n__pycache__/\n*.duckdb*\n")
    return root


def change(checkout: Path, framework: Framework, *edits: Edit) -> None:
    agent = checkout / "golden" / framework.suite / "agent.py"
    text = agent.read_text()
    for old, new in edits:
        assert text.count(old) == 1, f"{agent}: the journey's edit no longer applies: {old!r}"
        text = text.replace(old, new)
    agent.write_text(text)


def run(checkout: Path, framework: Framework, *args: str) -> tuple[Result, dict[str, Any]]:
    """`agentbench run` of the suite with --json; the result of each case by its id."""
    ran = agentbench(checkout, "run", f"golden/{framework.suite}", "--no-report", "--json", *args)
    assert "Traceback" not in ran.err + ran.out, ran.err
    return ran, {r["case_id"]: r for r in ran.json()["results"]}


def failing(result: dict[str, Any]) -> dict[str, str]:
    return {s["name"]: s["reason"] for s in result["scores"] if not s["passed"]}


def test_unchanged_code_passes_offline_without_drift(checkout: Path, framework: Framework) -> None:
    ran, results = run(checkout, framework, "--strict")
    assert ran.code == 0, ran.out + ran.err
    assert len(results) >= 5
    assert {r["status"] for r in results.values()} == {"passed"}, {
        case: failing(r) for case, r in results.items()
    }
    assert all(not r["drifts"] and r["diverged_at"] is None for r in results.values())


def test_a_changed_tool_result_fails_the_gate_naming_the_step_and_field(
    checkout: Path, framework: Framework
) -> None:
    change(checkout, framework, framework.tool_change)
    ran, results = run(checkout, framework)
    assert ran.code == 1, ran.out + ran.err
    result = results[framework.case]
    assert result["status"] == "failed"
    diverged = result["diverged_at"]
    assert diverged["class"] == "tool_result_changed" and diverged["step"] == 1
    assert framework.changed_field in diverged["cause"]
    # Only the cases whose model was shown the changed result fail.
    assert {c for c, r in results.items() if r["status"] != "passed"} == framework.shown_to


def test_a_reworded_system_prompt_is_request_drift_at_the_system_message(
    checkout: Path, framework: Framework
) -> None:
    change(checkout, framework, framework.prompt_change)
    ran, results = run(checkout, framework)
    assert ran.code == 1, ran.out + ran.err
    for case, result in results.items():
        diverged = result["diverged_at"]
        assert diverged is not None and diverged["class"] == "request_drift", case
        assert (diverged["call"], diverged["step"]) == (1, 1), case
        assert [c["path"] for c in result["drifts"][0]["changes"]] == ["messages[0].content"]
        old, new = framework.prompt_change
        (changed,) = result["drifts"][0]["changes"]
        assert old in changed["old"] and new in changed["new"]


def test_a_renamed_tool_argument_is_request_drift_naming_the_tools_path(
    checkout: Path, framework: Framework
) -> None:
    change(checkout, framework, *framework.argument_change)
    ran, results = run(checkout, framework)
    assert ran.code == 1, ran.out + ran.err
    for case, result in results.items():
        assert result["diverged_at"]["class"] == "request_drift", case
        paths = [c["path"] for c in result["drifts"][0]["changes"]]
        assert framework.argument_path in paths, (case, paths)
        assert all(p.startswith("tools[") for p in paths), (case, paths)


def test_live_from_divergence_continues_the_case_live(checkout: Path, framework: Framework) -> None:
    change(checkout, framework, framework.harmless_change)
    cassette = checkout / "replays" / framework.suite / f"{framework.case}.yaml"
    recorded = cassette.read_bytes()
    reference = reference_policy(framework.suite)
    with OpenAICompatibleServer(responder=reference.respond) as server:
        ran, results = run(
            checkout,
            framework,
            *("--filter", framework.case, "--live-from-divergence", "--base-url", server.base_url),
        )
    assert ran.code == 0, ran.out + ran.err
    result = results[framework.case]
    assert result["status"] == "passed", failing(result)
    diverged = result["diverged_at"]
    assert diverged["class"] == "tool_result_changed" and diverged["live_from"] == 2
    # Call #1 was replayed; only the call that carried the changed result went to the model.
    (request,) = [r.body for r in server.requests]
    assert request["messages"][-1]["role"] == "tool"
    assert framework.harmless_change[1] in request["messages"][-1]["content"]
    # The stored run is the live continuation, which saw the new value.
    with duckdb.connect(ran.json()["store"], read_only=True) as store:
        (output,) = store.execute(
            "SELECT output FROM runs WHERE run_id = ?", [result["run_id"]]
        ).fetchone()
    assert framework.shown_live in output
    assert cassette.read_bytes() == recorded  # a continuation is not a recording


def test_bisect_names_the_commit_that_changed_a_tool_result(
    checkout: Path, framework: Framework
) -> None:
    git(checkout, "init", "-q", "-b", "main")

    def commit(message: str) -> str:
        git(checkout, "add", "-A")
        git(checkout, "commit", "-qm", message)
        return (checkout / ".git" / "refs" / "heads" / "main").read_text().strip()

    # A commit before the change and one after it: bisect must pick the one between (each
    # commit is a real `agentbench run` process, a framework's import included, so few).
    shas = [commit(f"{framework.suite} suite")]
    change(checkout, framework, framework.tool_change)
    shas.append(commit("a tool's data changed"))
    (checkout / "NOTES.md").write_text("notes\n")
    shas.append(commit("notes"))

    found = agentbench(
        checkout,
        *("bisect", framework.case, "--good", shas[0], "--bad", "HEAD"),
        *("--suite", f"golden/{framework.suite}"),
    )
    assert found.code == 0, found.out + found.err
    assert f"  {shas[1]}  a tool's data changed" in found.out
    assert f"compared with the commit before it, {shas[0][:12]}: newly_failing" in found.out
    assert "tool_result_changed" in found.out and framework.changed_field in found.out
