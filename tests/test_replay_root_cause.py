"""`agentbench replay` names the root cause first: the changed tool result or request, in the
turn it happened in, with its downstream effects after it; and a multi-turn cassette that does
not carry its turn count replays turn by turn instead of crashing.

Every CLI test works on a temporary copy of the customer-service golden suite and its
two-turn cassette, and runs `agentbench` as a fresh process, so the agent code imported is the
copy's (changed) code and never this checkout's.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentbench.replay.diff import CAUSE_ORDER, Divergence, align, by_cause, with_request_drift
from agentbench.replay.trajectory import Step

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

ROOT = Path(__file__).resolve().parent.parent
CASSETTE = Path("replays/customer_service/refund-follow-up.yaml")
AGENT = Path("golden/customer_service/agent.py")
# Turn 1 checks order A17; its total now reads 45.0 where the recording has 42.5.
CHANGED_TOTAL = ('"A17": {"total": 42.5', '"A17": {"total": 45.0')


@dataclass
class Ran:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A copy of the golden suites and the customer-service cassettes."""
    copy = tmp_path / "repo"
    shutil.copytree(ROOT / "golden", copy / "golden", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "replays" / "customer_service", copy / "replays" / "customer_service")
    return copy


def agentbench(checkout: Path, *args: str) -> Ran:
    environment = {k: v for k, v in os.environ.items() if k != "AGENTBENCH_DB"}
    environment["AGENTBENCH_DB"] = str(checkout / "traces.duckdb")
    done = subprocess.run(
        [sys.executable, "-m", "agentbench", *args],
        cwd=checkout,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return Ran(done.returncode, done.stdout, done.stderr)


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, f"{path}: the edit no longer applies: {old!r}"
    path.write_text(text.replace(old, new))


# -- the crash: a multi-turn cassette without its turn count ---------------------------------


def test_a_multi_turn_cassette_without_its_turn_count_replays_both_turns(checkout: Path) -> None:
    # A cassette written by hand or by an older agentbench: `input` is the list of the user's
    # turns, and no `turns: 2` says so. It was sent to the runner as one turn's "messages"
    # and crashed with AttributeError: 'str' object has no attribute 'pop'.
    edit(checkout / CASSETTE, "    turns: 2\n", "")
    ran = agentbench(checkout, "replay", str(CASSETTE), "--json")
    assert ran.code == 0, ran.err + ran.out
    report = ran.json()
    assert report["turns"] == 2 and report["errors"] == [] and not report["diverged"]
    assert "pop" not in ran.err


def test_a_turn_count_that_disagrees_with_the_input_is_a_usage_error(checkout: Path) -> None:
    edit(checkout / CASSETTE, "    turns: 2\n", "    turns: 3\n")
    ran = agentbench(checkout, "replay", str(CASSETTE))
    assert ran.code == 3, ran.err + ran.out
    assert f"{CASSETTE}: metadata.agentbench.turns is 3 but input holds 2 user turn(s)" in ran.err
    assert "Traceback" not in ran.err


def test_a_turn_that_is_not_chat_messages_is_named(checkout: Path) -> None:
    edit(
        checkout / CASSETTE,
        "    - When will I get the money?\n",
        "    - - When will I get the money?\n",
    )
    ran = agentbench(checkout, "replay", str(CASSETTE))
    assert ran.code == 3, ran.err + ran.out
    assert f"{CASSETTE}: metadata.agentbench.input[1][0]: expected a chat message" in ran.err


# -- the root cause first, in its turn -------------------------------------------------------


@pytest.mark.parametrize("mode", ["lenient", "strict"])
def test_a_turn_one_tool_result_is_the_cause_and_its_drift_downstream(
    checkout: Path, mode: str
) -> None:
    edit(checkout / AGENT, *CHANGED_TOTAL)
    strict = ["--strict"] if mode == "strict" else []
    ran = agentbench(checkout, "replay", str(CASSETTE), "--json", *strict)
    assert ran.code == 1, ran.err + ran.out
    report = ran.json()
    first = report["first"]
    assert (first["class"], first["agent"], first["step"], first["turn"]) == (
        "tool_result_changed",
        "refunds",
        1,
        1,
    )
    assert first["new"]["result"]["total"] == 45.0 and first["old"]["result"]["total"] == 42.5
    assert report["divergences"][0] == first
    # The next request carried the changed result: it is named right after its cause, in
    # turn 1 (model call #4, the refund specialist's second call), not in turn 2.
    drift = report["divergences"][1]
    assert (drift["class"], drift["label"], drift["turn"], drift["step"]) == (
        "request_drift",
        "model call #4",
        1,
        2,
    )
    assert any("45.0" in json.dumps(c["new"]) for c in drift["changes"])
    assert report["downstream"] == len(report["divergences"]) - 1 >= 1
    positions = [d["position"] for d in report["divergences"]]
    assert positions == sorted(positions)

    # The answers after the divergence were recorded for other requests, and the report says so.
    assert report["counterfactual"] == (
        "diverged at step 1 (refunds); replay stopped at model call #4 (--strict)"
        if strict
        else "diverged at step 1 (refunds); steps after 1 replayed from a recording that no "
        "longer applies"
    )
    text = agentbench(checkout, "replay", str(CASSETTE), *strict)
    assert text.code == 1
    lines = text.out.splitlines()
    assert f"  {report['counterfactual']}" in lines
    assert (
        lines[2]
        == "  first divergence — step 1 (refunds) tool_result_changed: tool call order_status"
    )
    assert "    the root cause, in turn 1 of 2" in lines
    assert any(
        line.startswith("    turn 1: step 2 (refunds) request_drift: model call #4")
        for line in lines
    )


def test_strict_replay_names_the_drifted_call_before_what_it_never_answered(
    checkout: Path,
) -> None:
    edit(checkout / AGENT, *CHANGED_TOTAL)
    report = agentbench(checkout, "replay", str(CASSETTE), "--json", "--strict").json()
    classes = [(d["class"], d["turn"], d["label"]) for d in report["divergences"]]
    # Strict replay stops at the drifted call: the refund it would have issued is missing,
    # downstream of the drift; turn 2 then starts from what turn 1 left.
    drift = classes.index(("request_drift", 1, "model call #4"))
    missing = classes.index(("missing_step", 1, "tool call issue_refund"))
    assert drift < missing
    assert {turn for _, turn, _ in classes[missing:]} == {1, 2}
    assert all(turn == 1 for _, turn, _ in classes[: missing + 1])


def test_a_changed_prompt_alone_stays_lenient_and_is_the_cause_when_strict(
    checkout: Path,
) -> None:
    edit(checkout / AGENT, "Explain any refusal.", "Explain any refusal briefly.")
    lenient = agentbench(checkout, "replay", str(CASSETTE), "--json")
    assert lenient.code == 0, lenient.err + lenient.out  # drift alone is reported, not counted
    assert lenient.json()["divergences"] == [] and lenient.json()["drifts"]
    # One verdict: beside "unchanged", the drift is told without the word "diverged".
    assert lenient.json()["counterfactual"] == (
        "request drift at step 1 (refunds) (lenient: not counted); its model call and the "
        "steps after it replayed answers recorded for other requests"
    )
    strict = agentbench(checkout, "replay", str(CASSETTE), "--json", "--strict")
    assert strict.code == 1
    first = strict.json()["first"]
    assert (first["class"], first["agent"], first["turn"]) == ("request_drift", "refunds", 1)


# -- the order itself: cause before consequence ----------------------------------------------


def step(kind: str, number: int, *signature: Any, **detail: Any) -> Step:
    return Step(kind, "agent", number, (kind, "agent", *signature), detail)


def drift_at(position: int, number: int) -> Divergence:
    return Divergence("request_drift", position, "agent", number, f"model call #{number}")


def test_a_missing_warning_wins_the_tie_with_the_request_it_changed() -> None:
    # The recording warned about a repeated call before model call 2; the new run did not,
    # so call 2's request drifted. Both sit at call 2's position with step 2: the missing
    # warning is the cause.
    original = [
        step("model_call", 1, "run"),
        step("tool_call", 1, "search", arguments={}, result_kind="ok", result=1),
        step("guard", 2, "repeated_call", "warn"),
        step("model_call", 2, "run"),
    ]
    new = [original[0], original[1], original[3]]
    found = with_request_drift(align(original, new), [drift_at(2, 2)])
    assert [(d.cls, d.position) for d in found] == [("missing_step", 2), ("request_drift", 2)]


def test_a_drifted_call_comes_before_the_steps_it_never_answered() -> None:
    original = [
        step("model_call", 1, "run"),
        step("model_call", 2, "run"),
        step("tool_call", 2, "refund", arguments={}, result_kind="ok", result=1),
        step("run_end", 2, stop_reason="completed", output="done"),
    ]
    new = [original[0], step("run_end", 1, stop_reason="error", output=None)]
    found = with_request_drift(align(original, new), [drift_at(1, 2)])
    order = [(d.cls, d.label) for d in found]
    assert (
        order.index(("request_drift", "model call #2"))
        < order.index(("missing_step", "model call"))
        < order.index(("missing_step", "tool call refund"))
    )


def test_by_cause_is_one_order_whatever_order_it_is_given() -> None:
    made = [
        Divergence("output_changed", 3, "agent", 2, "run end"),
        drift_at(1, 2),
        Divergence("missing_step", 1, "agent", 2, "guard", old={"signature": ["guard"]}),
        Divergence("tool_result_changed", 0, "agent", 1, "tool call search"),
    ]
    expected = ["tool_result_changed", "missing_step", "request_drift", "output_changed"]
    assert [d.cls for d in by_cause(made)] == expected
    assert [d.cls for d in by_cause(made[::-1])] == expected
    assert CAUSE_ORDER.index("missing_step") < CAUSE_ORDER.index("request_drift")


def test_a_run_of_repeated_steps_diverges_where_it_stopped_repeating() -> None:
    """One more identical search before the brake: difflib alone matches the block that holds
    the run's end and calls the first steps changed; the shared beginning stays aligned."""

    def searching(calls: int) -> list[Step]:
        steps = []
        for number in range(1, calls + 1):
            steps.append(step("model_call", number, "run"))
            steps.append(step("tool_call", number, "search", arguments={"q": "x"}, result=1))
        steps.append(step("guard", calls + 1, "max_iterations", "stop"))
        steps.append(step("run_end", calls + 1, stop_reason="max_iterations", output=None))
        return steps

    found = align(searching(4), searching(5))
    first = found[0]
    assert (first.cls, first.position, first.label) == ("extra_step", 8, "model call")
    assert {d.position for d in found if d.cls == "extra_step"} == {8, 9}


def test_a_step_that_moved_is_one_missing_and_one_extra_step() -> None:
    """Memory summarizes one step later: difflib alone matches the two summaries and calls the
    call and tool around them extra and missing (four steps); the fewer-unmatched alignment
    names the summary missing where it was and extra where it is now."""

    def session(summary_at: int) -> list[Step]:
        steps = []
        for number in range(1, 7):
            if number == summary_at:
                steps.append(step("memory", number, "summarized", reason="r", messages=4))
            steps.append(step("model_call", number, "run"))
            if number < 6:
                steps.append(step("tool_call", number, "weather", arguments={}, result=number))
        steps.append(step("run_end", 6, stop_reason="completed", output="warm"))
        return steps

    found = align(session(5), session(6))
    unmatched = [(d.cls, d.step, d.label) for d in found if d.cls.endswith("_step")]
    assert unmatched == [
        ("missing_step", 5, "memory summarized"),
        ("extra_step", 6, "memory summarized"),
    ]
    assert found[0].cls == "missing_step"
