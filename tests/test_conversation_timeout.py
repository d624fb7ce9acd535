"""`Runner.run(..., timeout_s=)`: one budget for the whole conversation, handoffs included."""

from __future__ import annotations

import asyncio
import time

import pytest

from agentbench import Agent, Runner, ToolCall, UsageError
from agentbench.runtime.models import FunctionModel


def _slow_after_handoff(request: dict) -> object:
    names = {t["function"]["name"] for t in request.get("tools", ())}
    if "transfer_to_specialist" in names:
        return ToolCall("transfer_to_specialist", {"reason": "specialist", "summary": "help"})
    return asyncio.sleep(30, result="too late")


def _desk() -> Agent:
    specialist = Agent(name="specialist", instructions="Answer.")
    return Agent(name="desk", instructions="Hand over.", handoffs=[specialist])


async def test_the_budget_spans_the_handoff_and_stops_with_timeout() -> None:
    started = time.monotonic()
    result = await Runner.run(
        _desk(), "help", model=FunctionModel(_slow_after_handoff), timeout_s=0.3
    )
    assert time.monotonic() - started < 5
    assert [run.agent for run in result.runs] == ["desk", "specialist"]
    assert result.stop_reason.value == "timeout"
    assert "ran out of its 0.3 s budget (the caller's timeout_s)" in result.error.message
    assert "'specialist'" in result.error.message


async def test_an_agents_own_shorter_limit_still_applies() -> None:
    agent = Agent(name="quick", instructions="x", limits={"timeout_s": 0.1})
    result = await Runner.run(
        agent, "hi", model=FunctionModel(lambda r: asyncio.sleep(30, "late")), timeout_s=60
    )
    assert result.stop_reason.value == "timeout"
    assert "agent 'quick' ran out of its 0.1 s budget" in result.error.message


async def test_a_budget_must_be_positive() -> None:
    with pytest.raises(UsageError, match="timeout_s must be positive"):
        await Runner.run(_desk(), "hi", model=FunctionModel(lambda r: "x"), timeout_s=0)
