"""A RunResult's repr names the run, not every event of it (asyncio.run builds this repr)."""

from __future__ import annotations

from agentbench import Agent, Runner, ScriptedModel, ToolCall, tool


@tool(effect="read_only")
def ping(n: int) -> int:
    """Ping."""
    return n


def test_the_repr_of_a_run_result_leaves_its_events_out() -> None:
    model = ScriptedModel([ToolCall("ping", {"n": i}) for i in range(3)] + ["done"])
    result = Runner.run_sync(Agent(name="a", instructions="Ping.", tools=[ping]), "go", model=model)
    text = repr(result)
    assert result.run_id in text and "stop_reason=" in text
    assert len(result.events) > 8
    assert "model_request" not in text and "ModelRequest" not in text
