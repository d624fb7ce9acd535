"""The TypeScript parcel desk's journeys, through the real CLI on a copy of the suite.

golden/typescript_agent is a user's agent in TypeScript on the openai npm package, run as a
command (`node --import tsx agent.ts`, one process per turn) whose model calls are recorded
and replayed at the model-API boundary. Its baseline replays unchanged; a changed tool result
fails the gate naming the step and the field; a reworded system prompt is request drift at the
system message; a renamed tool argument is request drift at the tools; `--live-from-divergence`
continues a case live from the call that changed; `bisect` finds the commit that changed a
tool; the report, `diff`,
`replay` of a cassette and `promote` of a stored run work on it as on a Python agent. Without
`node`, or without the suite's node_modules (`npm ci`), the journeys are skipped, with why, and
`agentbench run` skips the suite with the reason and passes.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.framework_journeys import (
    first_divergences,
    gate_against_baseline,
    run_live_from_divergence,
)
from tests.test_journeys import ROOT, Result, agentbench, git

pytestmark = pytest.mark.slow  # journeys through the real CLI, seconds each

SUITE = "typescript_agent"
CASES = 6
SHIPPED = ROOT / "golden" / SUITE
if shutil.which("node") is None:
    pytest.skip("golden/typescript_agent needs node on PATH", allow_module_level=True)
if not (SHIPPED / "node_modules" / "openai").is_dir():
    pytest.skip(
        "golden/typescript_agent needs its packages: run "
        "`npm ci --prefix golden/typescript_agent --no-audit --no-fund`",
        allow_module_level=True,
    )

Edit = tuple[str, str]  # (old, new) in the suite's agent.ts
ETA = ('eta: "2026-07-14"', 'eta: "2026-07-15"')  # PX-1001's expected delivery date
PROMPT = ("never guess a status", "never make up a status")
# track_parcel(tracking_id) becomes track_parcel(parcel_id): its schema and its body.
RENAMED_ARGUMENT = (
    ("function trackParcel(args: { tracking_id: string })",
     "function trackParcel(args: { parcel_id: string })"),
    ("const id = args.tracking_id.toUpperCase();", "const id = args.parcel_id.toUpperCase();"),
    ('tracking_id: { type: "string", description: "Tracking number, e.g. PX-1001" }',
     'parcel_id: { type: "string", description: "Tracking number, e.g. PX-1001" }'),
    ('required: ["tracking_id"],', 'required: ["parcel_id"],'),
)  # fmt: skip


def checkout_of_the_suite(root: Path, *, packages: bool = True) -> Path:
    """A user's repository holding the shipped suite and its cassettes, committed; its
    node_modules (git-ignored, as in this repository) are this repository's, linked."""
    checkout = root / "repo"
    golden = checkout / "golden"
    shutil.copytree(
        SHIPPED, golden / SUITE, ignore=shutil.ignore_patterns("node_modules", "__pycache__")
    )
    for name in ("__init__.py", "_reference.py"):
        shutil.copy(ROOT / "golden" / name, golden / name)
    shutil.copytree(ROOT / "replays" / SUITE, checkout / "replays" / SUITE)
    (checkout / ".gitignore").write_text(".agentbench/\nreports/\n__pycache__/\n*.duckdb*\n")
    if packages:
        (golden / SUITE / "node_modules").symlink_to(SHIPPED / "node_modules")
    git(checkout, "init", "-q", "-b", "main")
    git(checkout, "add", "-A")
    git(checkout, "commit", "-qm", f"{SUITE} suite")
    return checkout


def change(checkout: Path, *edits: Edit) -> None:
    """Edit the suite's agent.ts as a user would; each edit must apply exactly once."""
    agent = checkout / "golden" / SUITE / "agent.ts"
    text = agent.read_text()
    for old, new in edits:
        assert text.count(old) == 1, f"{agent}: the journey's edit no longer applies: {old!r}"
        text = text.replace(old, new)
    agent.write_text(text)


def results(ran: Result) -> dict[str, dict[str, Any]]:
    return {r["case_id"]: r for r in ran.json()["results"]}


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A committed checkout whose store holds one baseline eval of the suite."""
    checkout = checkout_of_the_suite(tmp_path_factory.mktemp("typescript-agent"))
    first = agentbench(checkout, "run", f"golden/{SUITE}", "--no-report", "--json")
    assert first.code == 0, first.out + first.err
    assert len(first.json()["results"]) == CASES
    return checkout


@pytest.fixture
def checkout(baseline: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "repo"
    shutil.copytree(baseline, copy, symlinks=True)
    return copy


def test_unchanged_code_replays_unchanged(checkout: Path) -> None:
    ran = gate_against_baseline(checkout, SUITE, "--strict")
    assert ran.code == 0, ran.out + ran.err
    assert f"unchanged: {CASES} case(s)" in ran.out
    assert "first divergence" not in ran.out


def test_a_changed_tool_result_fails_the_gate_naming_the_step_and_field(checkout: Path) -> None:
    change(checkout, ETA)
    ran = gate_against_baseline(checkout, SUITE, "--filter", "track-parcel")
    assert ran.code == 1, ran.out + ran.err
    assert "typescript_agent/track-parcel (golden/typescript_agent/cases/parcels.yaml:2)" in ran.out
    (first,) = first_divergences(ran.out)
    assert (first.step, first.agent, first.kind) == (1, "parcel_desk", "tool_result_changed")
    assert first.what == "tool call track_parcel"
    assert first.details.strip() == "result.eta: '2026-07-14' → '2026-07-15'"
    assert "gate: FAILED" in ran.out + ran.err
    # Only the cases whose model was shown PX-1001's date fail.
    ran = gate_against_baseline(checkout, SUITE, "--json")
    failed = {case for case, r in results(ran).items() if r["status"] != "passed"}
    assert failed == {"track-parcel", "track-two-parcels"}


def test_a_reworded_system_prompt_is_request_drift_at_the_system_message(checkout: Path) -> None:
    change(checkout, PROMPT)
    ran = gate_against_baseline(checkout, SUITE, "--filter", "delivery-slots")
    assert ran.code == 1, ran.out + ran.err
    (first,) = first_divergences(ran.out)
    assert (first.step, first.kind, first.what) == (1, "request_drift", "model call #1")
    assert first.details.strip().startswith("messages[0].content: '")
    ran = gate_against_baseline(checkout, SUITE, "--json")  # every case: its first call
    for case, result in results(ran).items():
        diverged = result["diverged_at"]
        assert diverged["class"] == "request_drift", case
        assert (diverged["call"], diverged["step"]) == (1, 1), case
        (changed,) = result["drifts"][0]["changes"]
        assert changed["path"] == "messages[0].content", case
        assert PROMPT[0] in changed["old"] and PROMPT[1] in changed["new"]


def test_a_renamed_tool_argument_is_request_drift_at_the_tools(checkout: Path) -> None:
    change(checkout, *RENAMED_ARGUMENT)
    ran = gate_against_baseline(checkout, SUITE, "--filter", "track-parcel")
    assert ran.code == 1, ran.out + ran.err
    (first,) = first_divergences(ran.out)
    assert (first.step, first.kind, first.what) == (1, "request_drift", "model call #1")
    assert "tools[0].function.parameters.properties.tracking_id: removed" in first.details
    assert "tools[0].function.parameters.properties.parcel_id: added" in first.details


def test_live_from_divergence_continues_the_case_live(checkout: Path) -> None:
    # An evening slot more: the recording's answer no longer lists every slot.
    change(checkout, ('"4050-262": ["09:00-12:00", "14:00-17:00"]',
                      '"4050-262": ["09:00-12:00", "14:00-17:00", "18:00-21:00"]'))  # fmt: skip
    ran, requests = run_live_from_divergence(
        checkout, SUITE, "--filter", "delivery-slots", "--json"
    )
    assert ran.code == 0, ran.out + ran.err
    (result,) = ran.json()["results"]
    assert result["status"] == "passed"
    assert result["diverged_at"]["class"] == "tool_result_changed"
    assert result["diverged_at"]["live_from"] == 2
    # Call #1 was replayed; the live model answered the call that carried the new slots.
    (live,) = requests
    assert "18:00-21:00" in live.body["messages"][-1]["content"]


def test_report_and_diff_of_the_two_evals(checkout: Path) -> None:
    change(checkout, ETA)
    ran = gate_against_baseline(checkout, SUITE, "--summary-md", "summary.md")
    assert ran.code == 1, ran.out + ran.err
    summary = (checkout / "summary.md").read_text()
    assert "typescript_agent/track-parcel" in summary and "tool_result_changed" in summary
    evals = agentbench(checkout, "traces", "sql", "SELECT eval_id FROM evals ORDER BY started_at",
                       "--format", "json")  # fmt: skip
    baseline, current = [row["eval_id"] for row in evals.json()]
    report = agentbench(checkout, "report", current, "--report-dir", "reports")
    assert report.code == 0, report.out + report.err
    page = (checkout / "reports" / current / "index.html").read_text()
    assert "track-parcel" in page and "tool_result_changed" in page
    diff = agentbench(checkout, "diff", baseline, current, "--report-dir", "reports")
    assert diff.code == 1, diff.out + diff.err
    assert "first divergence — step 1 (parcel_desk) tool_result_changed" in diff.out


def test_replay_a_cassette_against_the_changed_agent(checkout: Path) -> None:
    cassette = f"replays/{SUITE}/track-parcel.yaml"
    unchanged = agentbench(checkout, "replay", cassette)
    assert unchanged.code == 0, unchanged.out + unchanged.err
    assert "behaviour unchanged: every step matches the recording" in unchanged.out
    change(checkout, ETA)
    replayed = agentbench(checkout, "replay", cassette)
    assert replayed.code == 1, replayed.out + replayed.err
    assert (
        "first divergence — step 1 (parcel_desk) tool_result_changed: tool call track_parcel\n"
        "    result.eta: '2026-07-14' → '2026-07-15'"
    ) in replayed.out
    # The two-turn case: each turn is the program run again, handed the conversation.
    turns = agentbench(checkout, "replay", f"replays/{SUITE}/track-then-reschedule.yaml")
    assert turns.code == 0, turns.out + turns.err


def test_promote_a_stored_run_into_a_case_that_passes(checkout: Path) -> None:
    runs = agentbench(checkout, "traces", "sql",
                      "SELECT r.run_id FROM runs r JOIN results s ON r.run_id = s.run_id "
                      "WHERE s.case_id = 'delivery-slots'", "--format", "json")  # fmt: skip
    run = runs.json()[0]["run_id"]
    folder = f"golden/{SUITE}"
    promoted = agentbench(checkout, "promote", run, "--suite", folder, "--id", "slots-again")
    assert promoted.code == 0, promoted.out + promoted.err
    case = (checkout / folder / "cases" / "promoted.yaml").read_text()
    assert "id: slots-again" in case and "delivery_slots" in case
    ran = agentbench(checkout, "run", folder, "--no-report", "--filter", "slots-again")
    assert ran.code == 0, ran.out + ran.err
    change(checkout, ('"4050-262": ["09:00-12:00", "14:00-17:00"]', '"4050-262": ["09:00-12:00"]'))
    ran = agentbench(checkout, "run", folder, "--no-report", "--filter", "slots-again")
    assert ran.code == 1, ran.out + ran.err
    assert "step 1 (parcel_desk) tool_result_changed: tool call delivery_slots" in ran.out


def test_bisect_finds_the_commit_that_changed_a_tool_result(checkout: Path) -> None:
    # Each commit runs in a git worktree, which has no node_modules (git-ignored): bisect
    # links the suite's `requires: file:` entries from the checkout.
    def commit(message: str) -> str:
        git(checkout, "add", "-A")
        git(checkout, "commit", "-qm", message)
        return (checkout / ".git" / "refs" / "heads" / "main").read_text().strip()

    good = (checkout / ".git" / "refs" / "heads" / "main").read_text().strip()
    change(checkout, ETA)
    changed = commit("a later delivery date")
    (checkout / "NOTES.md").write_text("notes\n")
    commit("notes")
    found = agentbench(
        checkout, "bisect", "track-parcel", "--good", good, "--bad", "HEAD",
        "--suite", f"golden/{SUITE}",
    )  # fmt: skip
    assert found.code == 0, found.out + found.err
    assert f"  {changed}  a later delivery date" in found.out
    assert "first divergence — step 1 (parcel_desk) tool_result_changed" in found.out
    assert (checkout / "golden" / SUITE / "node_modules" / "openai").is_dir()  # left as it was


def test_without_node_modules_the_suite_is_skipped_with_the_reason(tmp_path: Path) -> None:
    checkout = checkout_of_the_suite(tmp_path, packages=False)
    ran = agentbench(checkout, "run", "golden/", "--no-report", "--json")
    assert ran.code == 0, ran.out + ran.err
    every = ran.json()["results"]
    assert len(every) == CASES and {r["status"] for r in every} == {"skipped"}
    assert every[0]["error"] == (
        "suite 'typescript_agent' needs node_modules/openai, node_modules/tsx: run `npm ci` "
        "in golden/typescript_agent"
    )
