"""Replay of whole sessions: several user turns, the harness's cassette metadata, and how the
first divergence is chosen (the earliest step; a rejected recorded call as changed arguments)."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path

import orjson
import pytest

from agentbench import Agent, RunContext, ScriptedModel, StopReason, ToolCall, tool
from agentbench.cli import main
from agentbench.evals.running.case_runner import run_case
from agentbench.evals.running.case_trial import CasePlan
from agentbench.loading import load_object
from agentbench.replay.cassette import Cassette, RecordMode
from agentbench.replay.diff import align
from agentbench.replay.replayer import Replayer
from agentbench.replay.session import record_session
from agentbench.replay.tool_policy import ToolPolicies
from agentbench.replay.trajectory import Step, trajectory

ROOT = Path(__file__).resolve().parent.parent

# A two-turn agent whose second request depends on both the dialogue and the context the
# first turn left: if replay did not continue them as the harness does, the requests drift.
CHAT_AGENT = '''
from agentbench import Agent, RunContext, tool

ORDERS = {"A17": "delivered"}


@tool(effect="read_only")
def order_status(ctx: RunContext, order_id: str) -> dict:
    """The status of an order.

    Args:
        order_id: The order id.
    """
    ctx.set("order_id", order_id)
    return {"order_id": order_id, "status": ORDERS.get(order_id, "unknown")}


chat = Agent(
    name="chat",
    instructions="Help with orders.{% if 'chat.order_id' in context %} Current order: "
    "{{ context['chat.order_id'] }}.{% endif %}",
    tools=[order_status],
)
'''
TURNS = ["Where is order A17?", "And when was it delivered?"]
SCRIPT = [
    ToolCall("order_status", {"order_id": "A17"}),
    "Order A17 was delivered.",
    ToolCall("order_status", {"order_id": "A17"}),
    "It was delivered yesterday.",
]


@pytest.fixture
def suite_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "repo" / "suites" / "chat"
    folder.mkdir(parents=True)
    (folder / "agent.py").write_text(CHAT_AGENT)
    (folder / "suite.yaml").write_text(
        "agent: agent.py:chat\ncases:\n  - id: follow-up\n    inputs: [a, b]\n"
    )
    return folder


async def record_two_turns(suite: Path) -> Path:
    """Record the two-turn case through the harness's own case runner, as `--live` does."""
    cassette = suite.parent.parent / "replays" / "chat" / "follow-up.yaml"
    plan = CasePlan(
        suite="chat",
        case_id="follow-up",
        agent=load_object(f"{suite / 'agent.py'}:chat"),
        turns=list(TURNS),
        context=None,
        cassette=cassette,
        record_mode=RecordMode.ALL,
        tools=ToolPolicies(),
        live=lambda: ScriptedModel(list(SCRIPT)),
        agent_ref="agent.py:chat",
        suite_dir=suite,
    )
    outcome = await run_case(plan)
    assert outcome.recorded_to == cassette
    return cassette


async def test_harness_cassettes_name_their_agent_and_suite_folder(suite_folder: Path) -> None:
    info = Cassette.load(await record_two_turns(suite_folder)).info
    assert info["agent"] == "agent.py:chat"
    assert info["suite_dir"] == "../../suites/chat"  # relative to the cassette, posix
    assert (info["suite"], info["case"], info["turns"]) == ("chat", "follow-up", 2)
    assert info["input"] == TURNS


async def test_a_multi_turn_cassette_replays_turn_by_turn_unchanged(suite_folder: Path) -> None:
    path = await record_two_turns(suite_folder)
    report = await Replayer().replay(path)  # no agent given: the cassette names it
    assert not report.diverged, report.render()
    assert report.drifts == []  # dialogue and context continued exactly as recorded
    assert len(report.turns) == 2
    assert len(report.new) == len(report.original)
    assert report.result.output == "It was delivered yesterday."
    assert report.as_dict()["turns"] == 2


async def test_a_multi_turn_replay_names_a_change_in_the_second_turn(suite_folder: Path) -> None:
    path = await record_two_turns(suite_folder)

    @tool(effect="read_only", name="order_status")
    def lost(ctx: RunContext, order_id: str) -> dict:
        """The status of an order.

        Args:
            order_id: The order id.
        """
        ctx.set("order_id", order_id)
        return {"order_id": order_id, "status": "lost"}

    base = load_object(f"{suite_folder / 'agent.py'}:chat")
    changed = Agent(name="chat", instructions=base.instructions, tools=[lost])
    report = await Replayer(changed).replay(path)
    first = report.first
    assert first is not None and first.cls == "tool_result_changed"
    assert first.new["result"]["status"] == "lost"
    # Both turns' calls changed: the first in turn 1, the second in turn 2.
    changed_calls = [d for d in report.divergences if d.cls == "tool_result_changed"]
    assert len(changed_calls) == 2
    assert changed_calls[1].position >= len(trajectory(report.turns[0].all_events))


def test_the_cli_replays_a_multi_turn_cassette_without_agent(
    suite_folder: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    path = asyncio.run(record_two_turns(suite_folder))
    monkeypatch.chdir(tmp_path)  # not the repository: the cassette finds its suite itself
    code = main(["replay", str(path), "--db", str(tmp_path / "t.duckdb")])
    out = capsys.readouterr().out
    assert code == 0, out
    # 9 steps, and the second turn's start: the session context the first turn left
    assert "behaviour unchanged" in out and "original: 10 steps; new: 10 steps" in out


def test_the_cli_applies_the_suite_tool_policies_unless_told_otherwise(
    suite_folder: Path, tmp_path: Path, capsys
) -> None:
    path = asyncio.run(record_two_turns(suite_folder))
    (suite_folder / "suite.yaml").write_text(
        "agent: agent.py:chat\ntools: {default: recorded}\n"
        "cases:\n  - id: follow-up\n    inputs: [a, b]\n"
    )
    agent_file = suite_folder / "agent.py"
    agent_file.write_text(agent_file.read_text().replace('"delivered"', '"lost"'))
    db = str(tmp_path / "t.duckdb")
    assert main(["replay", str(path), "--db", db]) == 0, capsys.readouterr().out  # recorded
    capsys.readouterr()
    assert main(["replay", str(path), "--db", db, "--tools", "live"]) == 1
    assert "tool_result_changed" in capsys.readouterr().out


def steps(*specs: tuple) -> list[Step]:
    """Steps from (kind, step, extra signature, detail) tuples, all of agent `a`."""
    return [
        Step(kind, "a", number, (kind, "a", *rest), detail) for kind, number, rest, detail in specs
    ]


def test_the_earliest_step_is_the_first_divergence() -> None:
    # A lowered max_iterations: the recording went on to step 3, the new run stops at step 1.
    original = steps(
        ("model_call", 1, ("agent",), {}),
        ("tool_call", 1, ("search",), {"arguments": {}}),
        ("model_call", 2, ("agent",), {}),
        ("tool_call", 2, ("search",), {"arguments": {}}),
        ("model_call", 3, ("agent",), {}),
        ("run_end", 3, (), {"stop_reason": "completed", "output": "done"}),
    )
    new = steps(
        ("model_call", 1, ("agent",), {}),
        ("tool_call", 1, ("search",), {"arguments": {}}),
        ("guard", 1, ("max_iterations", "stop"), {}),
        ("run_end", 1, (), {"stop_reason": "max_iterations", "output": None}),
    )
    found = [(d.cls, d.step) for d in align(original, new)]
    assert found == [
        ("extra_step", 1),
        ("missing_step", 2),
        ("stop_reason_changed", 1),
        ("missing_step", 2),
        ("missing_step", 3),
    ]


async def test_a_lowered_iteration_limit_diverges_first_at_its_guard() -> None:
    brakes = load_object("golden.brakes.agent:brakes_agent", search_path=ROOT)
    capped = copy.copy(brakes)
    capped.limits = brakes.limits.model_copy(update={"max_iterations": 1})
    report = await Replayer(capped).replay(ROOT / "replays/brakes/broken-json-corrected.yaml")
    assert report.result.stop_reason is StopReason.MAX_ITERATIONS
    assert report.first.cls == "extra_step"
    assert report.first.label == "guard max_iterations (stop)"
    assert "first divergence — step 1 (brakes) extra_step: guard max_iterations" in (
        report.render()
    )


def test_a_rejected_recorded_call_pairs_as_changed_arguments() -> None:
    original = steps(
        ("model_call", 1, ("agent",), {}),
        ("tool_call", 1, ("order_status",), {"arguments": {"order_id": "A1"}}),
        ("model_call", 2, ("agent",), {}),
    )
    new = steps(
        ("model_call", 1, ("agent",), {}),
        ("tool_rejected", 1, ("order_status",), {"reason": "invalid_arguments", "arguments": "x"}),
        ("model_call", 2, ("agent",), {}),
    )
    (only,) = align(original, new)
    assert (only.cls, only.position, only.step) == ("tool_args_changed", 1, 1)
    assert only.old == {"order_id": "A1"}
    assert only.new == {"rejected": "invalid_arguments", "arguments": "x"}


async def test_a_renamed_tool_argument_is_tool_args_changed(tmp_path: Path) -> None:
    @tool(effect="read_only")
    def order_status(order_id: str) -> str:
        """Order status.

        Args:
            order_id: The order id.
        """
        return "delivered"

    @tool(effect="read_only", name="order_status")
    def order_status_renamed(id: str) -> str:
        """Order status.

        Args:
            id: The order id.
        """
        return "delivered"

    path = tmp_path / "orders.yaml"
    script = [ToolCall("order_status", {"order_id": "A1"}), "A1 was delivered."]
    agent = Agent(name="orders", instructions="Answer.", tools=[order_status])
    await record_session(agent, "Status of A1?", model=ScriptedModel(script), path=path)

    renamed = Agent(name="orders", instructions="Answer.", tools=[order_status_renamed])
    report = await Replayer(renamed).replay(path)
    # The changed schema in model call #1's request is the cause, named first; the recorded
    # call it now rejects is its downstream effect.
    classes = [d.cls for d in report.divergences]
    assert classes == ["request_drift", "tool_args_changed", "request_drift"], report.render()
    assert report.first.changes[0].path.startswith("tools[0].function.parameters")
    first = report.divergences[1]
    assert first.label == "tool call order_status (now rejected)"
    assert first.old == {"order_id": "A1"}
    assert first.new["rejected"] == "invalid_arguments"
    assert orjson.loads(first.new["arguments"]) == {"order_id": "A1"}


async def test_run_errors_print_one_line_per_reason(tmp_path: Path) -> None:
    @tool(effect="read_only")
    def lookup(key: str) -> str:
        """Look a key up.

        Args:
            key: The key.
        """
        return "value"

    path = tmp_path / "short.yaml"
    agent = Agent(name="keys", instructions="Answer.", tools=[lookup])
    script = [ToolCall("lookup", {"key": "k"}), "It is value."]
    await record_session(agent, "What is k?", model=ScriptedModel(script), path=path)
    cassette = Cassette.load(path)
    cassette.interactions = cassette.interactions[:1]  # call #2 is beyond the recording
    report = await Replayer(agent).replay(cassette)
    assert len(report.errors) == 2 and all("\n" not in reason for reason in report.errors)
    lines = report.render().splitlines()
    error_at = next(i for i, line in enumerate(lines) if line.startswith("  run error: "))
    assert "model call #2 has no recorded interaction" in lines[error_at]
    assert lines[error_at + 1].startswith("    nearest: #1 ")
    assert lines[error_at + 2].startswith("verdict:")
    assert report.as_dict()["errors"] == report.errors
