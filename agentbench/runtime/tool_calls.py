"""Executing one turn's tool calls: check, detect repeats, run, and report as events.

A call the model got wrong (unknown tool, unparseable or invalid arguments) is answered with
an observation that shows what was expected, so the model can correct itself. A call repeated
with identical arguments is warned about, then stops the run. Calls run concurrently only
when every call in the turn is `read_only`; anything that writes runs in the model's order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine, Iterator
from dataclasses import dataclass
from typing import Any

import orjson
from pydantic import ValidationError

from agentbench.runtime.arguments import ArgumentsParseError, parse_arguments
from agentbench.runtime.events import (
    GuardTriggered,
    StopReason,
    ToolCallRejected,
    ToolFinished,
    ToolStarted,
)
from agentbench.runtime.models import ToolCall
from agentbench.runtime.orchestration import request_from_tool
from agentbench.runtime.run_state import RunState
from agentbench.runtime.tools import RUNTIME_NOTE, Effect, ResultKind, Tool, ToolResult
from agentbench.trace._json import canonical, well_formed


@dataclass
class PlannedCall:
    call: ToolCall
    arguments: dict[str, Any]
    tool: Tool | None = None
    kwargs: dict[str, Any] | None = None
    rejection: tuple[str, str] | None = None  # (reason, observation)
    repeats: int = 1


def _schema_text(tool: Tool) -> str:
    return orjson.dumps(tool.parameters).decode()


def _validation_text(exc: ValidationError) -> str:
    lines = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(p) for p in error["loc"]) or "(arguments)"
        got = f" (got {error['input']!r})" if error["type"] != "missing" else ""
        lines.append(f"- {where}: {error['msg']}{got}")
    return "\n".join(lines)


def plan_call(run: RunState, call: ToolCall) -> PlannedCall:
    """Parse and validate one call, and count how often it has been made."""
    registry = run.agent.registry
    try:
        arguments = parse_arguments(call.arguments)
    except ArgumentsParseError as exc:
        tool = registry.get(call.name)
        schema = f" Send a JSON object matching this schema: {_schema_text(tool)}" if tool else ""
        return PlannedCall(
            call, {}, rejection=("invalid_json", f"Error calling {call.name!r}: {exc}.{schema}")
        )
    tool = registry.get(call.name)
    if tool is None:
        available = "; ".join(f"{t.name}: {t.description or 'no description'}" for t in registry)
        return PlannedCall(
            call,
            arguments,
            rejection=(
                "unknown_tool",
                f"Error: there is no tool named {call.name!r}. Available tools — "
                f"{available or 'none'}. Call one of these, or answer without a tool.",
            ),
        )
    try:
        kwargs = tool.validate(arguments)
    except ValidationError as exc:
        return PlannedCall(
            call,
            arguments,
            tool=tool,
            rejection=(
                "invalid_arguments",
                f"Error: the arguments for {call.name!r} do not match its schema:\n"
                f"{_validation_text(exc)}\nExpected schema: {_schema_text(tool)}",
            ),
        )
    try:
        encoded = orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # half an emoji in the arguments: the key is their repaired form
        encoded = canonical(arguments)
    key = (tool.name, encoded.decode())
    counts = run.call_counts
    counts[key] = repeats = counts.get(key, 0) + 1  # not `+= 1`: Counter's __missing__ is Python
    return PlannedCall(call, arguments, tool=tool, kwargs=kwargs, repeats=repeats)


def tool_message(call_id: str, content: str) -> dict[str, Any]:
    # Half an emoji a tool cut off becomes U+FFFD here: no HTTP client can encode a lone
    # surrogate, so the next model call would fail (the store repairs and flags it itself).
    return {"role": "tool", "tool_call_id": call_id, "content": well_formed(content, counted=False)}


@dataclass(slots=True)
class Execution:
    """What a turn needs awaited under the run's deadline (its tools running): the loop
    awaits it and puts the outcome in `result` before taking the turn's next item."""

    awaitable: Awaitable[Any]
    result: Any = None


def run_tool_calls(run: RunState, calls: list[ToolCall], step: int) -> Iterator[Any]:
    """The events of one turn's tool calls, and an `Execution` wherever its tools run;
    each call's message is appended to the run.

    A plain generator, the awaiting left to the loop: an async generator would cost the
    event loop's bookkeeping of one more generator every step.
    """
    planned = [plan_call(run, call) for call in calls]
    limits = run.agent.limits
    looping = next(
        (p for p in planned if p.rejection is None and p.repeats >= limits.repeat_stop_at), None
    )
    if looping is not None:
        message = (
            f"{looping.call.name} was called {looping.repeats} times with the same arguments "
            f"{looping.call.arguments}; stopping (repeat_stop_at={limits.repeat_stop_at})"
        )
        yield run.event(
            GuardTriggered, step=step, guard="loop_detected", action="stop", message=message
        )
        run.finish(StopReason.LOOP_DETECTED)
        return

    ready = _one_handoff_per_turn(run, [p for p in planned if p.rejection is None])
    for p in planned:
        if p.rejection is not None:
            reason, observation = p.rejection
            yield run.event(
                ToolCallRejected,
                step=step,
                call_id=p.call.id,
                tool=p.call.name,
                raw_arguments=p.call.arguments,
                reason=reason,
                message=observation,
            )

    results: dict[str, ToolResult] = {}
    if len(ready) > 1 and all(p.tool.effect is Effect.READ_ONLY for p in ready):  # type: ignore[union-attr]
        for p in ready:
            yield _started(run, p, step)
        execution = Execution(asyncio.gather(*(_execute(run, p) for p in ready)))
        yield execution
        results = {p.call.id: r for p, r in zip(ready, execution.result, strict=True)}
        for p in ready:
            yield _finished(run, p, results[p.call.id], step)
        for event in run.context_events():
            yield event
    else:
        for p in ready:
            yield _started(run, p, step)
            execution = Execution(_execute(run, p))
            yield execution
            results[p.call.id] = execution.result
            yield _finished(run, p, execution.result, step)
            for event in run.context_events():
                yield event

    for p in planned:
        warned = _answer(run, p, results.get(p.call.id), step)
        if warned is not None:
            yield warned


def _answer(
    run: RunState, p: PlannedCall, result: ToolResult | None, step: int
) -> GuardTriggered | None:
    """Append the tool message for one call; the repeat warning's event when one is due."""
    warned = None
    if result is None:
        if run.memory is not None:
            run.memory.note_outcome(p.call.id, "rejected")
        run.messages.append(tool_message(p.call.id, p.rejection[1] if p.rejection else ""))
        return None
    if run.memory is not None:
        run.memory.note_outcome(p.call.id, result.kind.value)
    content = result.observation()
    run.remember(p.call.name, p.call.arguments, result.kind, content)  # a StrEnum: its value
    if p.repeats >= run.agent.limits.repeat_warn_at:
        warning = (
            f"This is call number {p.repeats} of {p.call.name} with these same arguments. "
            "Calling it again with the same arguments will stop the run; use the result you "
            "have or change your approach."
        )
        warned = run.event(
            GuardTriggered, step=step, guard="repeated_call", action="warn", message=warning
        )
        content = f"{content}{RUNTIME_NOTE}{warning}"
    run.messages.append(tool_message(p.call.id, content))
    if result.kind is ResultKind.BUSINESS_FAILURE and result.stop:
        run.finish(StopReason.BUSINESS_STOP, output=result.error)
    return warned


def _execute(run: RunState, p: PlannedCall) -> Coroutine[Any, Any, ToolResult]:
    """Run the tool, unless the run's interceptor (a replay policy) decides the result.
    Without an interceptor, the tool's own coroutine: no coroutine around it."""
    assert p.tool is not None and p.kwargs is not None
    if run.tool_interceptor is None:
        return p.tool.run(p.kwargs, run.context)
    return _intercepted(run, p)


async def _intercepted(run: RunState, p: PlannedCall) -> ToolResult:
    """The interceptor's result for the call, or, if it decides none, the tool's own."""
    assert run.tool_interceptor is not None and p.tool is not None and p.kwargs is not None
    decided = await run.tool_interceptor(p.tool, p.arguments, run.context)
    if decided is not None:
        return decided
    return await p.tool.run(p.kwargs, run.context)


def _one_handoff_per_turn(run: RunState, ready: list[PlannedCall]) -> list[PlannedCall]:
    """Take the turn's first handoff (or dispatch); any other handoff call is refused."""
    kept: list[PlannedCall] = []
    for p in ready:
        request = request_from_tool(p.tool, p.kwargs)  # type: ignore[arg-type]
        if request is None:
            kept.append(p)
        elif run.handoff is None:
            run.handoff = request
            kept.append(p)
        else:
            p.rejection = (
                "invalid_arguments",
                f"Not executed: this turn already hands over to {run.handoff.target.name!r}; "
                "only one handoff per turn.",
            )
    return kept


def _started(run: RunState, p: PlannedCall, step: int) -> ToolStarted:
    return run.event(
        ToolStarted, step=step, call_id=p.call.id, tool=p.call.name, arguments=p.arguments
    )


def _finished(run: RunState, p: PlannedCall, result: ToolResult, step: int) -> ToolFinished:
    return run.event(
        ToolFinished,
        step=step,
        call_id=p.call.id,
        tool=p.call.name,
        arguments=p.arguments,
        result=result,
        # `_value_`, not `.value`: the same string, without enum's property (every step).
        effect=p.tool.effect._value_,  # type: ignore[union-attr]
    )
