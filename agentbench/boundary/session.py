"""A boundary target's turns against one model: the loopback server, the function, the events.

`run_turns` is what the harness (`evals.running.boundary_case`, one trial of a case) and `agentbench
replay` (`replay.replayer`, a cassette or a stored run) both do with a boundary target: start
a server on 127.0.0.1 that answers every model call through the `ChatModel` given (a
`ReplayModel` over a cassette, a `RecordingModel`, …), call the function once per user turn
with the conversation so far, and turn each turn's traffic into a run of typed events
(`boundary.traffic`), handed to the store and the hooks as a runtime run's are. A request the
model cannot answer (a replay miss, strict drift) is an HTTP 400 with agentbench's reason,
which the function's client raises, so the run ends in that error.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Any

import orjson

from agentbench.boundary.forward import WireCall, WireForwarder, current_call
from agentbench.boundary.server import BoundaryServer
from agentbench.boundary.target import CallableTarget, TargetContext
from agentbench.boundary.traffic import TurnTraffic
from agentbench.boundary.wire import Wire
from agentbench.errors import ModelError
from agentbench.mcp_proxy.recording import RecordingError, recordings_from
from agentbench.mcp_proxy.servers import CaseMcpServers
from agentbench.replay.cassette import CassetteError
from agentbench.replay.models import (
    RecordingModel,
    ReplayMissingError,
    ReplayModel,
    RequestDriftError,
)
from agentbench.replay.session import Turn, continue_conversation
from agentbench.replay.tool_policy import ToolPolicies
from agentbench.runtime.completions import CompletionFormatError
from agentbench.runtime.context import Context
from agentbench.runtime.events import Hook
from agentbench.runtime.models import ChatModel
from agentbench.runtime.run_state import RunResult

# How long one turn of a boundary target may take before the case is an error: a function
# that never returns must not hang the eval (a sync one's thread cannot be stopped, only
# left behind).
TURN_TIMEOUT_S = 600.0


def forwarder_for(live: ChatModel) -> WireForwarder:
    """The live model of a boundary target: `live`'s endpoint, reached by forwarding the
    client's own request (`boundary.forward`) rather than by agentbench's chat client."""
    return WireForwarder(
        live.name,
        base_url=getattr(live, "base_url", None),
        api_key=getattr(live, "_api_key", None),
    )


def keep_offline() -> None:
    """Offline means offline: the OpenAI Agents SDK uploads each run's trace to OpenAI with
    whatever key the environment holds, whatever base URL its model was given. It reads this
    once, at its first trace; a value the user set wins."""
    os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")


def variables_of(context: Context | dict[str, Any] | None) -> dict[str, Any]:
    """A case's context variables as one mapping, as a function is handed them."""
    scopes = Context.of(context)
    return {**dict(scopes.global_), **scopes.session, **scopes.request}


class _Served:
    """What the server answers with: the model, and the turn being run.

    Calls the function makes at once (sub-agents gathered, a graph's parallel branches) reach
    the server in whatever order the machine runs them. Recording, the calls that were in
    flight together are kept in the cassette (`concurrent_calls`, by position); replaying, a
    call among them is answered by the recorded one it asks exactly (`ReplayModel.prefer`),
    so a replay's verdict never depends on which thread ran first.
    """

    def __init__(self, model: ChatModel) -> None:
        self.model = model
        self.turn: TurnTraffic | None = None
        self.calls = 0
        self._in_flight: set[int] = set()  # calls (1-based, by arrival) being answered
        self._together: dict[int, set[int]] = {}  # call -> the calls in flight with it
        self._positions: dict[int, int] = {}  # call -> its recorded position (0-based)
        self._groups: dict[int, tuple[int, ...]] = {}  # position -> positions made at once
        if isinstance(model, ReplayModel):
            for group in model.cassette.info.get("concurrent_calls") or ():
                positions = tuple(p - 1 for p in group if isinstance(p, int) and p > 0)
                for position in positions:
                    self._groups[position] = positions

    def made_at_once(self) -> list[list[int]]:
        """The recorded positions (1-based) of the calls that were in flight together."""
        groups: list[list[int]] = []
        seen: set[int] = set()
        for call, others in sorted(self._together.items()):
            if call in seen or not others:
                continue
            group = {call}
            pending = [call]
            while pending:  # every call linked to this one, however far along
                for other in self._together.get(pending.pop(), ()):
                    if other not in group:
                        group.add(other)
                        pending.append(other)
            seen |= group
            positions = sorted(self._positions[c] + 1 for c in group if c in self._positions)
            if len(positions) > 1:
                groups.append(positions)
        return groups

    def _arrived(self, call: int) -> None:
        for other in self._in_flight:
            self._together.setdefault(call, set()).add(other)
            self._together.setdefault(other, set()).add(call)
        self._in_flight.add(call)

    def _left(self, call: int) -> None:
        self._in_flight.discard(call)
        recorded = getattr(self.model, "cassette", None)
        if isinstance(self.model, RecordingModel) and recorded is not None:
            # Resumed straight from the call that appended it: nothing ran in between.
            self._positions[call] = len(recorded.interactions) - 1

    async def answer(
        self, wire: Wire, body: dict[str, Any], headers: dict[str, str]
    ) -> tuple[int, str, bytes]:
        traffic = self.turn
        if traffic is None:
            return (
                409,
                "application/json",
                wire.error("no turn of this case is running", "invalid_request_error", None),
            )
        try:
            request = wire.normalize(body)
        except CompletionFormatError as exc:  # the client's own request: it hears why
            return (
                400,
                "application/json",
                wire.error(f"agentbench: {exc}", "invalid_request_error", None),
            )
        step = await traffic.request(request)
        agent = traffic.agent
        self.calls += 1
        call = self.calls
        token = current_call.set(WireCall(wire, body, headers))
        self._arrived(call)
        try:
            if self._groups and isinstance(self.model, ReplayModel):
                # No await between this and the call: the next position is this call's.
                self.model.prefer(request, self._groups.get(self.model.calls, ()))
            response = await self.model.complete(request)
        except (ReplayMissingError, RequestDriftError) as exc:
            # 400: a client does not retry it, and shows the message.
            return (
                400,
                "application/json",
                wire.error(f"agentbench: {exc}", "invalid_request_error", "replay"),
            )
        except ModelError as exc:  # recorded, or the live endpoint's: the client sees it
            status = exc.status_code or 502
            payload = exc.body.encode() if exc.body else wire.error(str(exc), "api_error", None)
            return status, "application/json", payload
        finally:
            self._left(call)
            current_call.reset(token)
        await traffic.response(step, agent, response)
        content_type, payload = wire.render(response, str(request.get("model") or ""), body, call)
        return 200, content_type, payload


async def run_turns(
    target: CallableTarget,
    model: ChatModel,
    turns: Sequence[Turn],
    *,
    variables: dict[str, Any],
    store: Any = None,
    hooks: Sequence[Hook] = (),
    mcp: CaseMcpServers | None = None,
) -> list[RunResult]:
    """Each user turn as one run of the function, its model calls answered by `model` (which
    the caller closes); a turn after the first is handed the conversation so far. The
    function's MCP servers are reached through `mcp`'s proxies (by default: answered from
    the cassette's recording, or recorded when `model` records)."""
    served = _Served(model)
    if mcp is None:
        mcp = mcp_servers_for(model, ToolPolicies())
    name = target.model or getattr(model, "name", "") or ""
    results: list[RunResult] = []
    try:
        async with BoundaryServer(served.answer, model=name, mcp=mcp.routes) as server:
            mcp.root_url = server.root_url
            await _turns(target, served, turns, server, name, variables, store, hooks, mcp, results)
    finally:
        await mcp.close()
    together = served.made_at_once()
    if isinstance(model, RecordingModel):
        if together:
            model.cassette.update_info(concurrent_calls=together)
        if mcp.proxies:
            model.cassette.update_info(mcp=mcp.recordings())
    return results


def mcp_servers_for(model: ChatModel, policies: ToolPolicies) -> CaseMcpServers:
    """The MCP proxies of a case answered by `model`: recording when it records, else
    replaying what its cassette recorded, by `policies`."""
    cassette = getattr(model, "cassette", None)
    recording = isinstance(model, RecordingModel)
    recorded: dict[str, Any] = {}
    if cassette is not None and not recording:
        try:
            recorded = recordings_from(cassette.info.get("mcp"), f"{cassette.path}: mcp")
        except RecordingError as exc:
            raise CassetteError(str(exc)) from None
    return CaseMcpServers(recorded=recorded, policies=policies, recording=recording)


async def _turns(
    target: CallableTarget,
    served: _Served,
    turns: Sequence[Turn],
    server: BoundaryServer,
    name: str,
    variables: dict[str, Any],
    store: Any,
    hooks: Sequence[Hook],
    mcp: CaseMcpServers,
    results: list[RunResult],
) -> None:
    agents: dict[Any, str] = {}  # agents by what they show the model, across the turns
    for number, turn in enumerate(turns, 1):
        turn_input = continue_conversation(results[-1] if results else None, turn)
        traffic = TurnTraffic(
            target.name,
            turn_input,
            model=name,
            context=variables,
            hooks=[*([store.run_hook()] if store is not None else []), *hooks],
            agents=agents,
            tool_outcome=mcp.tool_outcome,
        )
        served.turn = traffic
        await traffic.start()
        context = TargetContext(
            server.base_url,
            name,
            variables=variables,
            turn=number,
            anthropic_base_url=server.root_url,
            mcp_servers=mcp,
        )
        output, error = await _call(target, turn_input, context)
        result = await traffic.finish(output, error)
        served.turn = None
        if traffic.unkept:  # the store could not keep the run: not a finished run
            raise traffic.unkept[0]
        result.messages = _dialogue(turn_input, result.output)
        results.append(result)


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
