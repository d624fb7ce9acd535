"""Run one case of a boundary target: the user's own function, its model calls served by a
loopback server from the case's cassette (or forwarded live and recorded).

The same `ReplayModel` / `RecordingModel` answer as for an agentbench `Agent`, so record modes,
strict and lenient drift, `--live-from-divergence` and cassettes are one thing for both kinds
of target; what differs is where the requests come from (HTTP, from whatever client the
function uses) and where the events come from (the traffic, `boundary.traffic`). A request
the recording cannot answer gets an HTTP 400 with agentbench's reason, which the function's
client raises; the run then ends in that error, and the divergence is reported as for any
agent. Multi-turn cases call the function once per turn with the conversation so far.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from collections.abc import Callable
from typing import Any

import orjson

from agentbench.boundary.forward import WireCall, WireForwarder, current_call
from agentbench.boundary.server import BoundaryServer, error_body
from agentbench.boundary.target import CallableTarget, TargetContext
from agentbench.boundary.traffic import TurnTraffic
from agentbench.boundary.wire import Wire
from agentbench.errors import ModelError
from agentbench.evals.case_runner import (
    CasePlan,
    CaseRun,
    LiveModelError,
    left_as_it_was,
    model_for,
    save_recording,
)
from agentbench.replay.models import ReplayMissingError, ReplayModel, RequestDriftError
from agentbench.replay.session import continue_conversation
from agentbench.replay.trajectory import Step
from agentbench.runtime.context import Context
from agentbench.runtime.models import ChatModel
from agentbench.runtime.run_state import RunResult

# How long one turn of a boundary target may take before the case is an error: a function
# that never returns must not hang the eval (a sync one's thread cannot be stopped, only
# left behind).
TURN_TIMEOUT_S = 600.0


def forwarding(live: Callable[[], ChatModel] | None) -> Callable[[], ChatModel] | None:
    """The live model of a boundary case: the configured endpoint, reached by forwarding the
    client's own request (`boundary.forward`) rather than by agentbench's chat client."""
    if live is None:
        return None

    def make() -> ChatModel:
        model = live()
        return WireForwarder(
            model.name,
            base_url=getattr(model, "base_url", None),
            api_key=getattr(model, "_api_key", None),
        )

    return make


def variables_of(context: Context | dict[str, Any] | None) -> dict[str, Any]:
    """The case's context variables as one mapping, as a function is handed them."""
    scopes = Context.of(context)
    return {**dict(scopes.global_), **scopes.session, **scopes.request}


class _Served:
    """What the case's server answers with: the model, and the turn being run."""

    def __init__(self, model: ChatModel, name: str) -> None:
        self.model = model
        self.name = name
        self.turn: TurnTraffic | None = None
        self.calls = 0

    async def answer(
        self, wire: Wire, body: dict[str, Any], headers: dict[str, str]
    ) -> tuple[int, str, bytes]:
        traffic = self.turn
        if traffic is None:
            return 409, "application/json", error_body("no turn of this case is running")
        request = wire.normalize(body)
        step = await traffic.request(request)
        agent = traffic.agent
        self.calls += 1
        call = self.calls
        token = current_call.set(WireCall(wire, body))
        try:
            response = await self.model.complete(request)
        except (ReplayMissingError, RequestDriftError) as exc:
            # 400: a client does not retry it, and shows the message.
            return 400, "application/json", error_body(f"agentbench: {exc}", code="replay")
        except ModelError as exc:  # recorded, or the live endpoint's: the client sees it
            status = exc.status_code or 502
            payload = exc.body.encode() if exc.body else error_body(str(exc), "api_error")
            return status, "application/json", payload
        finally:
            current_call.reset(token)
        await traffic.response(step, agent, response)
        content_type, payload = wire.render(response, str(request.get("model") or ""), body, call)
        return 200, content_type, payload


async def run_boundary_case(plan: CasePlan) -> CaseRun:
    """Every turn of the case, against the case's own loopback server."""
    target = plan.agent
    assert isinstance(target, CallableTarget)
    existed = plan.cassette.is_file()
    if not plan.always_live:
        # Offline means offline: the OpenAI Agents SDK uploads each run's trace to OpenAI with
        # whatever key the environment holds, whatever base URL its model was given. It reads
        # this once, at its first trace; a value the user set wins.
        os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
    model, cassette = model_for(dataclasses.replace(plan, live=forwarding(plan.live)))
    served = _Served(model, target.name)
    outcome = CaseRun()
    variables = variables_of(plan.context)
    name = target.model or getattr(model, "name", "") or ""
    agents: dict[Any, str] = {}
    started = time.perf_counter()
    previous: RunResult | None = None
    try:
        async with BoundaryServer(served.answer, model=name) as server:
            for number, turn in enumerate(plan.turns, 1):
                turn_input = continue_conversation(previous, turn)
                hooks = [*([plan.store.run_hook()] if plan.store is not None else []), *plan.hooks]
                traffic = TurnTraffic(
                    target.name,
                    turn_input,
                    model=name,
                    context=variables,
                    hooks=hooks,
                    agents=agents,
                )
                served.turn = traffic
                await traffic.start()
                context = TargetContext(server.base_url, name, variables=variables, turn=number)
                output, error = await _call(target, turn_input, context)
                result = await traffic.finish(output, error)
                served.turn = None
                if traffic.unkept:  # the store could not keep the run: not a finished run
                    raise traffic.unkept[0]
                result.messages = _dialogue(turn_input, result.output)
                outcome.turns.append(result)
                previous = result
    finally:
        closer = getattr(model, "aclose", None)
        if closer is not None:
            await closer()
    outcome.duration_ms = (time.perf_counter() - started) * 1000
    failure = getattr(model, "failure", None)
    if failure is not None:
        raise LiveModelError(
            f"case {plan.case_id!r}: the live model failed, so this trial says nothing about "
            f"the code ({failure}); {left_as_it_was(plan.cassette, existed)}"
        )
    if isinstance(model, ReplayModel):
        outcome.drifts = list(model.drifts)
        outcome.live_from = model.live_began
        outcome.replayed = not model.recorded
        outcome.stopped = model.strict and bool(model.drifts)
        outcome.unanswered = list(model.unanswered)
    if cassette is not None and "trajectory" in cassette.info:
        outcome.recorded = [Step.from_dict(s) for s in cassette.info["trajectory"]]
    outcome.recorded_to = save_recording(plan, model, outcome, existed=existed)
    return outcome


async def _call(
    target: CallableTarget, turn_input: Any, context: TargetContext
) -> tuple[Any, BaseException | None]:
    """The function's output, or the error it ended in (its own, or not finishing in time)."""
    try:
        return await asyncio.wait_for(target.call(turn_input, context), TURN_TIMEOUT_S), None
    except TimeoutError:
        return None, TimeoutError(f"{target.name} did not return within {TURN_TIMEOUT_S:g} s")
    except Exception as exc:  # the agent's own failure is the run's result, never a crash
        return None, exc


def _dialogue(turn_input: Any, output: Any) -> list[dict[str, Any]]:
    """The conversation after a turn, as the next turn is handed it."""
    messages = (
        [{"role": "user", "content": turn_input}]
        if isinstance(turn_input, str)
        else list(turn_input)
    )
    if output is not None:
        text = output if isinstance(output, str) else orjson.dumps(output).decode()
        messages.append({"role": "assistant", "content": text})
    return messages
