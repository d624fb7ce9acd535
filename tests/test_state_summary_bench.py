"""benchmarks/state_summary.py measures what it says: the state block of a system message,
and a tool result changed by one value for the drift replay (the full run records every
runtime suite twice; it is a benchmark, not a test)."""

from __future__ import annotations

import sys
from pathlib import Path

from agentbench import Agent, Runner, ScriptedModel, ToolCall, tool

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from state_summary import changed, state_block, tool_change  # noqa: E402


@tool(effect="read_only", blocking=False)
def lookup(key: str) -> dict:
    """Look a key up."""
    return {"key": key, "value": 7}


def test_the_state_block_is_what_the_summary_adds_and_nothing_else() -> None:
    from pydantic import BaseModel

    class Out(BaseModel):
        value: int

    agent = Agent(
        name="a", instructions="Look up.", tools=[lookup], output_type=Out, state_summary=True
    )
    plain = Agent(name="a", instructions="Look up.", tools=[lookup], output_type=Out)
    script = [ToolCall("lookup", {"key": "k"}), '{"value": 7}']
    on, off = ScriptedModel(script), ScriptedModel(script)
    Runner.run_sync(agent, "go", model=on)
    Runner.run_sync(plain, "go", model=off)
    with_block = on.requests[-1]["messages"][0]["content"]
    block = state_block(with_block)
    assert block == '\n\n## State so far\n- lookup({"key": "k"}) → ok: {"key":"k","value":7}'
    assert with_block.replace(block, "") == off.requests[-1]["messages"][0]["content"]
    assert state_block(off.requests[-1]["messages"][0]["content"]) == ""


def test_a_changed_result_differs_in_its_first_value_only() -> None:
    assert changed({"a": [1, 2], "b": "x"}) == ({"a": [2, 2], "b": "x"}, True)
    assert changed({"ok": True}) == ({"ok": False}, True)
    assert changed("text") == ("text (changed)", True)
    assert changed({"a": None}) == ({"a": None}, False)


def test_the_drift_replay_changes_a_tool_the_case_called_not_a_handoff() -> None:
    cassette = ROOT / "replays" / "customer_service" / "refund-eligible.yaml"
    name, value = tool_change(cassette)
    assert name == "order_status"  # called once; dispatch_to_agent and transfer_to_* are not
    recorded = {"age_days": 12, "order_id": "A17", "ordered": "2026-06-18"}
    assert value == {**recorded, "age_days": 13, "status": "delivered", "total": 42.5}
