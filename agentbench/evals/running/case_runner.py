"""Run one case of a suite once: an agentbench Agent through the runner, with its model and
tools replayed from the case's cassette (or live), or a boundary target through
`boundary_case`; `case_trial` plans the trial and settles what it leaves. Scoring is the
harness's.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from agentbench.boundary.target import CallableTarget
from agentbench.evals.running.boundary_case import run_boundary_case
from agentbench.evals.running.case_trial import CasePlan, CaseRun, model_for, settle
from agentbench.replay.mcp_snapshots import session_drifts
from agentbench.replay.models import RecordingModel, ReplayModel, budget_stop, tool_stops
from agentbench.replay.session import continue_conversation
from agentbench.replay.tool_policy import ReplayTools, ToolPolicy
from agentbench.runtime.run_state import RunResult
from agentbench.runtime.runner import Runner


def _history(previous: RunResult | None, turn: str | list[dict[str, Any]]) -> Any:
    # The same rule replay applies to a multi-turn cassette, so both see the same requests.
    return continue_conversation(previous, turn)


async def run_case(plan: CasePlan) -> CaseRun:
    """Run every turn of the case; never scores, never raises for the agent's own failures
    (a live model's infrastructure failure is not the agent's: LiveModelError)."""
    if isinstance(plan.agent, CallableTarget):  # the user's own function: served over HTTP
        return await run_boundary_case(plan)
    return await _run_agent_case(plan)


async def _run_agent_case(plan: CasePlan) -> CaseRun:
    """`run_case` for an agentbench Agent: the runner, with the model and tools replayed."""
    existed = plan.cassette.is_file()
    model, cassette = model_for(plan)
    recorded_tools = cassette.info.get("tool_results", ()) if cassette else ()
    requests = (i.request for i in cassette.interactions) if cassette else ()
    policies = plan.tools
    if isinstance(model, RecordingModel):
        # A fresh recording has no results to replay: the tools it records must really run.
        policies = dataclasses.replace(
            policies,
            default=ToolPolicy.LIVE
            if policies.default is ToolPolicy.RECORDED
            else policies.default,
            per_tool={
                name: ToolPolicy.LIVE if rule is ToolPolicy.RECORDED else rule
                for name, rule in policies.per_tool.items()
            },
        )
    stops = tool_stops(cassette.info) if cassette is not None else ()
    tools = ReplayTools(policies, recorded_tools, requests, stops)
    outcome = CaseRun()

    tool_calls = [0, 0]  # started, finished: where a clock stop falls among tool calls

    def note_budget_stop(event: Any) -> None:
        kind = event.kind
        if kind == "tool_started":
            tool_calls[0] += 1
        elif kind == "tool_finished":
            tool_calls[1] += 1
        elif kind == "run_finished":
            answered = getattr(model, "answered", 0)
            stop = budget_stop(answered, event, (tool_calls[0], tool_calls[1]))
            if stop is not None:
                outcome.budget_stops.append(stop)

    hooks = [*plan.hooks, note_budget_stop]
    started = time.perf_counter()
    context: Any = plan.context
    previous: RunResult | None = None
    try:
        for turn in plan.turns:
            result = await Runner.run(
                plan.agent,
                _history(previous, turn),
                model=model,
                context=context,
                hooks=hooks,
                tool_interceptor=tools,
                store=plan.store,
            )
            outcome.turns.append(result)
            previous, context = result, result.context
    finally:
        closer = getattr(model, "aclose", None)
        if closer is not None:  # a live model's connections belong to this event loop
            await closer()
    outcome.duration_ms = (time.perf_counter() - started) * 1000
    drifts = None
    if isinstance(model, ReplayModel):
        events = [event for turn in outcome.turns for event in turn.all_events]
        drifts = session_drifts(model.drifts, plan.agent, events, policies)
    return settle(plan, model, cassette, outcome, existed=existed, drifts=drifts)
