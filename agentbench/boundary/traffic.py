"""A boundary target's events, derived from its model traffic.

The runtime emits typed events as it works; a boundary target's framework emits none that
agentbench can read, but every decision it makes crosses the model API: the request says
what the model was shown (and carries the results of the tools it asked for last time), the
answer says which tools it asks for now. So each turn becomes one run of the same events an
agentbench `Agent` gives — `run_started`, per model call `model_request` / `model_response`,
per tool result sent back `tool_started` / `tool_finished`, `handoff`, `run_finished` — and
everything above the target (trajectory, drift, scorers, stores, reports) reads them unchanged.

Which agent a request belongs to is read from what it shows the model: its system prompt
and tool list. A request whose pair was seen before belongs to that agent again (a sub-agent
called as a tool, then its caller resuming); a new pair is a new agent, named by the
`transfer_to_NAME` tool call the previous agent made (the OpenAI Agents SDK's handoff tools),
which is then a `handoff` event, or else `<function>.<n>`. What a framework decides without
the model (a guard it ran, what its memory dropped) never crosses the wire and is not here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from agentbench.errors import RecordingError
from agentbench.runtime.events import (
    ErrorInfo,
    Handoff,
    Hook,
    ModelRequest,
    ModelResponse,
    RunFinished,
    RunStarted,
    StopReason,
    ToolFinished,
    ToolStarted,
    notify,
)
from agentbench.runtime.models import ChatResponse, ToolCall, Usage
from agentbench.runtime.run_state import RunResult, new_run_id
from agentbench.runtime.tools import ResultKind, ToolResult

HANDOFF_PREFIX = "transfer_to_"


def shown_to_model(request: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
    """Who a request is from: its system prompt and the names of the tools it offers."""
    system = ""
    for message in request.get("messages") or ():
        if isinstance(message, dict) and message.get("role") in ("system", "developer"):
            system = _text(message.get("content"))
            break
    names = []
    for tool in request.get("tools") or ():
        if isinstance(tool, dict):
            function = tool.get("function")
            name = function.get("name") if isinstance(function, dict) else tool.get("name")
            names.append(str(name or tool.get("type") or ""))
    return system, tuple(sorted(names))


def _text(content: Any) -> str:
    """A message's content as text: a string as it is, content parts' texts joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text") or "") for part in content if isinstance(part, dict))
    return "" if content is None else str(content)


def result_data(content: Any) -> Any:
    """A tool result as the agent sent it back: its text, exactly as the model saw it (so a
    scorer's `contains` matches what was sent). Comparisons read JSON text as data
    (`trajectory.canonical`), so a re-spaced result is not a changed one."""
    return _text(content)


def _result(message: dict[str, Any], took: float) -> ToolResult:
    """A tool message as the tool's result: an error where the agent said so (a Messages
    `tool_result` with `is_error`), the text the model saw kept either way."""
    data = result_data(message.get("content"))
    if message.get("is_error"):
        error = data if isinstance(data, str) else orjson.dumps(data).decode()
        return ToolResult(kind=ResultKind.SYSTEM_ERROR, data=data, error=error, duration_ms=took)
    return ToolResult(kind=ResultKind.OK, data=data, duration_ms=took)


# (tool, arguments) -> (how the call ended: `mcp_proxy.proxy.ToolOutcome`, its effect)
ToolOutcomes = Callable[[str, dict[str, Any]], tuple[Any, str] | None]


def _arguments(call: ToolCall) -> dict[str, Any]:
    try:
        parsed = orjson.loads(call.arguments or "{}")
    except orjson.JSONDecodeError:
        return {"arguments": call.arguments}
    return parsed if isinstance(parsed, dict) else {"arguments": parsed}


class TurnTraffic:
    """The events of one turn, made as its model calls happen and handed to `hooks` (the
    trace store's recorder first) in order."""

    def __init__(
        self,
        name: str,
        turn_input: Any,
        *,
        model: str,
        context: dict[str, Any],
        hooks: Sequence[Hook],
        agents: dict[tuple[str, tuple[str, ...]], str] | None = None,
        tool_outcome: ToolOutcomes | None = None,
    ) -> None:
        self.name = name
        # How a tool call that went through the case's MCP proxy ended, and its effect: the
        # text the framework sent back cannot tell an `isError` answer from a result.
        self.tool_outcome = tool_outcome
        self.run_id = new_run_id()
        self.hooks = list(hooks)
        self.events: list[Any] = []
        self.failures: list[str] = []  # hooks that raised (the run goes on)
        self.unkept: list[RecordingError] = []  # what the store could not keep
        # Agents by what they show the model, shared by the turns of a case.
        self.agents = agents if agents is not None else {}
        self.agent = name
        self.calls = 0  # model calls of the turn, every agent's
        # Each agent's own steps, as each run of the runtime counts its own: a sub-agent's
        # calls never renumber its caller's.
        self.steps: dict[str, int] = {}
        self.usage = Usage()
        # call id -> (call, agent, step, when the model's answer asked for it)
        self._asked: dict[str, tuple[ToolCall, str, int, float]] = {}
        self._last_calls: dict[str, list[ToolCall]] = {}  # each agent's last answer's
        self._said: dict[bytes, dict[str, Any]] = {}  # each message of the turn, by its JSON
        self._started = time.perf_counter()
        self._first = RunStarted(
            run_id=self.run_id,
            seq=0,
            agent=name,
            input=turn_input,
            model=model,
            context={"session": context} if context else {},
        )

    async def start(self) -> None:
        await self._emit(self._first)

    async def request(self, request: dict[str, Any]) -> int:
        """A model request arrived: the tool results it carries, a change of agent, then the
        request itself. Returns the step it is."""
        self._share_messages(request)
        await self._results_sent_back(request)
        await self._switch_agent(shown_to_model(request))
        self.calls += 1
        step = self.steps[self.agent] = self.steps.get(self.agent, 0) + 1
        await self._emit(
            ModelRequest(
                run_id=self.run_id,
                seq=len(self.events),
                agent=self.agent,
                step=step,
                request=request,
            )
        )
        return step

    async def response(self, step: int, agent: str, response: ChatResponse) -> None:
        self.usage = self.usage + response.usage
        answered = time.perf_counter()
        for call in response.tool_calls:
            self._asked[call.id] = (call, agent, step, answered)
        self._last_calls[agent] = list(response.tool_calls)
        await self._emit(
            ModelResponse(
                run_id=self.run_id,
                seq=len(self.events),
                agent=agent,
                step=step,
                response=response,
            )
        )
        # A tool starts when the model asks for it: whatever the agent does to run it (a
        # sub-agent's model calls) comes between this and the result it sends back.
        for call in response.tool_calls:
            await self._emit(
                ToolStarted(
                    run_id=self.run_id,
                    seq=len(self.events),
                    agent=agent,
                    step=step,
                    call_id=call.id,
                    tool=call.name,
                    arguments=_arguments(call),
                )
            )

    async def finish(self, output: Any, error: BaseException | None) -> RunResult:
        duration = (time.perf_counter() - self._started) * 1000
        info = None
        if error is not None:
            info = ErrorInfo(
                type=type(error).__name__, message=str(error), step=self.steps.get(self.agent)
            )
        finished = RunFinished(
            run_id=self.run_id,
            seq=len(self.events),
            agent=self.agent,
            stop_reason=StopReason.ERROR if error is not None else StopReason.COMPLETED,
            output=None if error is not None else output,
            error=info,
            usage=self.usage,
            iterations=self.calls,
            duration_ms=duration,
        )
        await self._emit(finished)
        return RunResult(
            run_id=self.run_id,
            agent=self.name,
            output=finished.output,
            stop_reason=finished.stop_reason,
            messages=[],
            usage=self.usage,
            events=self.events,
            iterations=self.calls,
            duration_ms=duration,
            error=info,
            hook_errors=self.failures,
        )

    def _share_messages(self, request: dict[str, Any]) -> None:
        """The request's messages sent before in this turn become the objects first seen.

        Each request carries the whole conversation again, parsed into new objects; as the
        runtime's requests do, these then share the messages they have in common, so a
        session holds each message once rather than once per later call, and what caches
        a message by its object (the replay's request fingerprints) reads each one once.
        The same means the same JSON: `1`, `1.0` and `true` are equal in Python, not on
        the wire."""
        messages = request.get("messages")
        if not isinstance(messages, list):
            return  # no conversation: compared as it is
        said = self._said
        for index, message in enumerate(messages):
            if type(message) is not dict:
                continue
            try:
                kept = said.setdefault(orjson.dumps(message), message)
            except TypeError:  # not JSON orjson writes (a lone surrogate): left as it is
                continue
            if kept is not message:
                messages[index] = kept

    def _answers(self, messages: Any) -> list[dict[str, Any]]:
        """The tool messages that may answer a call still waiting for its result, in order.

        A tool message follows the assistant message that asked for its call, so they are
        looked for from the end back to where every waiting call was asked: the rest of the
        conversation was read with the requests before (each request carries it all again,
        so reading it whole every time costs the square of the session's length)."""
        if not self._asked:
            return []
        if not isinstance(messages, list):
            return [m for m in messages or () if isinstance(m, dict) and m.get("role") == "tool"]
        waiting = set(self._asked)
        found = []
        for message in reversed(messages):
            if not isinstance(message, dict):
                continue
            role = message.get("role")
            if role == "tool":
                found.append(message)
            elif role == "assistant" and isinstance(message.get("tool_calls"), list):
                waiting.difference_update(
                    str(c.get("id")) for c in message["tool_calls"] if isinstance(c, dict)
                )
                if not waiting:
                    break
        found.reverse()
        return found

    async def _results_sent_back(self, request: dict[str, Any]) -> None:
        for message in self._answers(request.get("messages")):
            asked = self._asked.pop(str(message.get("tool_call_id")), None)
            if asked is None:
                continue  # answered before, or a call this turn never saw asked
            call, agent, step, answered = asked
            # What the wire shows of a tool's time: from the answer that asked for it to the
            # request that carried its result (calls answered together share it).
            took = (time.perf_counter() - answered) * 1000
            arguments = _arguments(call)
            base = {"run_id": self.run_id, "agent": agent, "step": step, "call_id": call.id}
            result, effect = _result(message, took), "unknown"
            found = self.tool_outcome(call.name, arguments) if self.tool_outcome else None
            if found is not None:
                ended, effect = found
                if ended.kind is not ResultKind.OK and result.kind is ResultKind.OK:
                    result = ToolResult(
                        kind=ended.kind, data=result.data, error=ended.error, duration_ms=took
                    )
            await self._emit(
                ToolFinished(
                    **base,
                    seq=len(self.events),
                    tool=call.name,
                    arguments=arguments,
                    result=result,
                    effect=effect,
                )
            )

    async def _switch_agent(self, shown: tuple[str, tuple[str, ...]]) -> None:
        known = self.agents.get(shown)
        if not self.agents:  # the first request: the function's own agent
            self.agents[shown] = self.agent
            return
        if known is not None:
            self.agent = known
            return
        transfer = next(
            (
                c.name[len(HANDOFF_PREFIX) :]
                for c in self._last_calls.get(self.agent, ())
                if c.name.startswith(HANDOFF_PREFIX)
            ),
            None,
        )
        new = transfer or f"{self.name}.{len(self.agents) + 1}"
        if new in self.agents.values():  # a name taken by another prompt: keep them apart
            new = f"{new}.{len(self.agents) + 1}"
        self.agents[shown] = new
        if transfer is not None:
            await self._emit(
                Handoff(
                    run_id=self.run_id,
                    seq=len(self.events),
                    agent=self.agent,
                    step=self.steps.get(self.agent, 0),
                    mode="tool",
                    from_agent=self.agent,
                    to_agent=new,
                )
            )
        self.agent = new

    async def _emit(self, event: Any) -> None:
        self.events.append(event)
        await notify(self.hooks, event, self.failures, self.unkept)
