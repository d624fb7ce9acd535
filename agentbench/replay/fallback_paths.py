"""A replay's fallback paths against the code's: drift when a `FallbackModel` changed.

Replay serves each recorded answer, fallback record included, so no model runs and nothing
can fall back again; what can change is the code's chain. For each model call of the
session whose recorded answer came through a fallback (`ModelResponse.fallback`), the chain
the agent that made the call has now — its `FallbackModel`'s models, or its one model — is
compared with the recorded path (`drift.fallback_drift`): the model that answered must still
be in the chain, reached after the same models. A difference is request drift of that call,
reported and gated as any other (`fallback.chain: ['primary', 'backup'] → ['primary']`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agentbench.replay.drift import fallback_drift
from agentbench.replay.drifted_calls import Drift
from agentbench.runtime.agent import Agent
from agentbench.runtime.orchestration import AgentRegistry


def chains(agent: Any) -> dict[str, list[str]]:
    """The model chain of each agent reachable from `agent` (handoffs, a router's agents),
    by name; agents whose model is given at run time have none."""
    from agentbench.runtime.fallback import FallbackModel

    found: dict[str, list[str]] = {}
    waiting, seen = [agent], set()
    while waiting:
        current = waiting.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        model = getattr(current, "model", None)
        name = getattr(current, "name", None)
        if isinstance(model, FallbackModel):
            found[name] = model.chain
        elif model is not None and getattr(model, "name", None):
            found[name] = [model.name]
        waiting.extend(getattr(current, "handoffs", ()) or ())
        routes = getattr(current, "agents", ())
        if isinstance(routes, AgentRegistry):
            waiting.extend(routes.get(key) for key in routes.ids)
        else:
            waiting.extend(routes or ())
    return found


def fallback_drifts(agent: Agent | Any, events: Iterable[Any]) -> list[Drift]:
    """Drift of each model call whose recorded fallback path the code's chain no longer takes."""
    known = chains(agent)
    drifts = []
    call = -1
    for event in events:
        if event.kind == "model_request":
            call += 1
        elif event.kind == "model_response" and event.agent in known:
            recorded = event.fallback
            if recorded is not None:
                changes = fallback_drift(recorded, known[event.agent])
                if changes:
                    drifts.append(Drift(call, changes))
    return drifts


def with_fallback_drifts(drifts: list[Drift], extra: list[Drift]) -> list[Drift]:
    """Request drifts and fallback drifts, one entry per model call, in call order."""
    by_call = {drift.index: Drift(drift.index, list(drift.changes)) for drift in drifts}
    for drift in extra:
        if drift.index in by_call:
            by_call[drift.index].changes.extend(drift.changes)
        else:
            by_call[drift.index] = drift
    return [by_call[index] for index in sorted(by_call)]
