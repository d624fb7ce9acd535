"""Run one case of a boundary target: the user's own function, its model calls served by a
loopback server from the case's cassette (or forwarded live and recorded).

The same `ReplayModel` / `RecordingModel` answer as for an agentbench `Agent`, so record modes,
strict and lenient drift, `--live-from-divergence` and cassettes are one thing for both kinds
of target; what differs is where the requests come from (HTTP, from whatever client the
function uses) and where the events come from (the traffic, `boundary.traffic`). The turns
themselves run in `boundary.session`, as `agentbench replay` runs them; here is what a trial
adds: the model its plan asks for, what the replay found, and the recording it writes.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from agentbench.boundary.session import (
    forwarder_for,
    keep_offline,
    mcp_servers_for,
    run_turns,
    variables_of,
)
from agentbench.boundary.target import CallableTarget
from agentbench.evals.running.case_trial import CasePlan, CaseRun, CaseSetupError, model_for, settle
from agentbench.replay.cassette import CassetteError
from agentbench.replay.models import ReplayModel
from agentbench.runtime.models import ChatModel


def forwarding(live: Callable[[], ChatModel] | None) -> Callable[[], ChatModel] | None:
    """The live model of a boundary case: the configured endpoint, reached by forwarding the
    client's own request (`boundary.forward`) rather than by agentbench's chat client."""
    if live is None:
        return None
    return lambda: forwarder_for(live())


async def run_boundary_case(plan: CasePlan) -> CaseRun:
    """Every turn of the case, against the case's own loopback server."""
    target = plan.agent
    assert isinstance(target, CallableTarget)
    existed = plan.cassette.is_file()
    if not plan.always_live:
        keep_offline()
    model, cassette = model_for(dataclasses.replace(plan, live=forwarding(plan.live)))
    try:
        mcp = mcp_servers_for(model, plan.tools)
    except CassetteError as exc:
        raise CaseSetupError(f"case {plan.case_id!r}: {exc}") from None
    outcome = CaseRun()
    started = time.perf_counter()
    try:
        outcome.turns = await run_turns(
            target,
            model,
            plan.turns,
            variables=variables_of(plan.context),
            store=plan.store,
            hooks=plan.hooks,
            mcp=mcp,
        )
    finally:
        closer = getattr(model, "aclose", None)
        if closer is not None:
            await closer()
    outcome.duration_ms = (time.perf_counter() - started) * 1000
    # A live MCP server whose tools differ from the recording's: drift of the first call.
    drifts = mcp.drifts(model.drifts) if isinstance(model, ReplayModel) else None
    return settle(plan, model, cassette, outcome, existed=existed, drifts=drifts)
