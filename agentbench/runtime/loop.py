"""The agent loop of one run, as one async generator of events.

Read `drive` top to bottom: check the brakes, prepare the request (memory may compact the
conversation first), ask the model, then either run the requested tools, or finish (validating
structured output, or taking a handoff decision) — and go round again. Everything else is a
helper it calls. A run's failure never raises out of `drive`: it becomes the stop reason.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from operator import is_
from typing import Any

import orjson
from pydantic import ValidationError

from agentbench.errors import AgentbenchError, OutputValidationError, RunTimeoutError
from agentbench.runtime.agent import ModelSettings
from agentbench.runtime.arguments import ArgumentsParseError, parse_arguments
from agentbench.runtime.events import (
    ErrorInfo,
    GuardTriggered,
    Handoff,
    MemoryDecision,
    ModelRequest,
    ModelResponse,
    RunStarted,
    StopReason,
    TextDelta,
)
from agentbench.runtime.message_view import MessageView
from agentbench.runtime.models import ChatResponse
from agentbench.runtime.orchestration import (
    HandoffRequest,
    ping_pong,
    request_from_decision,
)
from agentbench.runtime.run_state import RunState, new_run_id
from agentbench.runtime.tokens import estimate_tokens
from agentbench.runtime.tool_calls import Execution, run_tool_calls


async def drive(run: RunState) -> AsyncIterator[Any]:
    """The loop. Yields every event except RunFinished; never raises for a run's failure."""
    yield run.event(
        RunStarted,
        input=run.input,
        model=run.agent.model_settings.model or run.model.name,
        parent_run_id=run.parent_run_id,
        context=run.context.snapshot().as_dict(),
    )
    try:
        _follow_up_shortcut(run)
        while run.stop is None and run.handoff is None:
            brake = _check_brakes(run)
            if brake is not None:
                yield brake
                break
            run.iteration += 1
            run.context.step = run.iteration
            system = _instructions(run)
            # Memory may compact the conversation first; its events all come after its work.
            for event in () if run.memory is None else await _compact(run, system):
                yield event
            request = _request(run)
            yield run.event(ModelRequest, step=run.iteration, request=request)
            if request.get("stream"):
                answer: list[ChatResponse] = []
                async for event in _stream_model(run, request, answer):
                    yield event
                response = answer[0]
            else:
                # Awaited here, no coroutine of its own: the TextDelta events of any text it
                # reported follow it (no task, queue or generator needed on this fast path).
                texts: list[str] = []
                response = await run.within_deadline(
                    run.model.complete(request, on_text_delta=texts.append)
                )
                for event in _text_events(run, texts) if texts else ():
                    yield event
            _account(run, request, response)
            run.messages.append(response.as_message())
            yield run.event(ModelResponse, step=run.iteration, response=response)
            for item in _turn(run, response):
                if type(item) is Execution:  # the turn's tools, to run under the deadline
                    item.result = await run.within_deadline(item.awaitable)
                else:
                    yield item
        for event in _pass_on(run):
            yield event
    except RunTimeoutError as exc:
        yield run.event(
            GuardTriggered, step=run.iteration, guard="timeout", action="stop", message=str(exc)
        )
        run.finish(StopReason.TIMEOUT, error=ErrorInfo(type="RunTimeoutError", message=str(exc)))
    except Exception as exc:  # a provider, template or framework failure ends this run only
        message = str(exc) if isinstance(exc, AgentbenchError) else f"{type(exc).__name__}: {exc}"
        error = ErrorInfo(type=type(exc).__name__, message=message, step=run.iteration)
        run.finish(StopReason.ERROR, error=error)
    finally:
        run.release_deadline()
    run.close_open_calls()


def _turn(run: RunState, response: ChatResponse) -> Iterable[Any]:
    """What follows the model's answer: its tool calls run (events, and an `Execution` for
    the loop to await), or the final answer taken."""
    if response.tool_calls:
        return run_tool_calls(run, response.tool_calls, run.iteration)
    return _finish_or_correct(run, response)


def _follow_up_shortcut(run: RunState) -> None:
    """A router keeps a short follow-up with the agent that answered last, without a model call."""
    last_user = next((m for m in reversed(run.messages) if m.get("role") == "user"), None)
    text = last_user.get("content") if last_user else None
    if not isinstance(text, str):
        return
    target = run.agent.sticky_target(text, run.context.variables)
    if target is not None:
        run.handoff = HandoffRequest(
            target, "router", reason=f"short follow-up stays with {target.name}"
        )


def _check_brakes(run: RunState) -> GuardTriggered | None:
    """Stop before the next model call if a limit has been reached."""
    limits = run.agent.limits
    if run.iteration >= limits.max_iterations:
        run.finish(StopReason.MAX_ITERATIONS)
        message = f"reached max_iterations={limits.max_iterations} without a final answer"
        guard = "max_iterations"
    elif limits.token_budget is not None and run.usage.total_tokens >= limits.token_budget:
        run.finish(StopReason.TOKEN_BUDGET)
        message = (
            f"used {run.usage.total_tokens} tokens, at or over token_budget={limits.token_budget}"
        )
        guard = "token_budget"
    else:
        return None
    return run.event(
        GuardTriggered, step=run.iteration, guard=guard, action="stop", message=message
    )


def _instructions(run: RunState) -> str:
    """The system message's text for this iteration, rendered again only when what the
    template reads changed: most steps of a long run repeat the same instructions, and
    rendering costs more than the rest of a replayed step. (`state_version` moves only when
    the instructions show the state lines.)"""
    key = (run.context.version, run.state_version)
    if run.system_message is not None and run.system_key == key:
        return run.system_message["content"]  # type: ignore[no-any-return]
    agent = run.agent
    schema = agent.output_schema()
    system = agent.template.render(
        run.context.variables,
        state=run.state_lines,
        state_summary=agent.state_summary,
        output_schema=orjson.dumps(schema).decode() if schema is not None else None,
        pinned=run.context.pinned_facts,
        handoff=run.handoff_note,
    )
    # The same text keeps the same message object, so what hashes a request by object
    # (the replay fingerprint, the trace's request diff) finds it already known.
    if run.system_message is None or run.system_message["content"] != system:
        run.system_message = {"role": "system", "content": system}
    run.system_key = key
    return system


def _request(run: RunState) -> dict[str, Any]:
    """This iteration's request body: the conversation as a view, not a copy."""
    agent = run.agent
    settings = agent.model_settings
    request: dict[str, Any] = {
        "model": settings.model or run.model.name,
        "messages": MessageView(run.system_message, run.messages),
    }
    if run.tool_schemas:
        request["tools"] = run.tool_schemas
    request.update(_request_params(run, settings))
    if settings.output_mode == "json_schema" and (schema := agent.output_schema()) is not None:
        request["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": agent.final_type.__name__, "schema": schema},  # type: ignore[union-attr]
        }
    return request


def _request_params(run: RunState, settings: ModelSettings) -> dict[str, Any]:
    """`settings.request_params()`, the last dump again while every setting is the very
    same object (the check costs a third of a dump; most runs never change their settings).

    Kept only for agentbench's own settings without a `stop` list or a filled-in
    `extra_body`, which could change in place; a setting assigned anew (even an equal value,
    1 for 1.0) is a new object, so any other change is seen.
    """
    values = tuple(settings.__dict__.values())
    kept = run.request_params
    if (
        kept is not None
        and kept[0] is settings
        and not settings.extra_body
        and all(map(is_, values, kept[1]))
    ):
        return kept[2]
    params = settings.request_params()
    if type(settings) is ModelSettings and settings.stop is None and not settings.extra_body:
        run.request_params = (settings, values, params)
    return params


async def _compact(run: RunState, system: str) -> list[Any]:
    """Let the memory policy compact the conversation (beside the `system` message's text);
    its model calls are ordinary events."""
    assert run.memory is not None
    system_tokens = estimate_tokens(system)
    pending: list[Any] = []
    summarizer_model = getattr(run.memory.policy.summarizer, "model", None) or run.model

    async def call_model(body: dict[str, Any]) -> ChatResponse:
        body = {**body, "model": body.get("model") or summarizer_model.name}
        step = run.iteration
        pending.append(run.event(ModelRequest, step=step, request=body, purpose="memory"))
        response = await run.within_deadline(summarizer_model.complete(body))
        run.usage = run.usage + response.usage
        pending.append(run.event(ModelResponse, step=step, response=response, purpose="memory"))
        return response

    run.messages, decisions = await run.memory.prepare(run.messages, system_tokens, call_model)
    return pending + [
        run.event(
            MemoryDecision,
            step=run.iteration,
            action=decision.action,
            reason=decision.reason,
            messages=decision.messages,
            tokens_before=decision.tokens_before,
            tokens_after=decision.tokens_after,
            summary=decision.summary,
            detail=decision.detail,
        )
        for decision in decisions
    ]


def _account(run: RunState, request: dict[str, Any], response: ChatResponse) -> None:
    run.usage = run.usage + response.usage
    if run.memory is not None:
        # The report covers the system message plus the conversation as it was sent.
        run.memory.observe_usage(len(request["messages"]) - 1, response.usage.input_tokens)


def _text_events(run: RunState, texts: list[str]) -> list[TextDelta]:
    """The TextDelta events of the text a model reported, all made once it has answered."""
    return [run.event(TextDelta, step=run.iteration, text=text) for text in texts]


async def _stream_model(
    run: RunState, request: dict[str, Any], answer: list[ChatResponse]
) -> AsyncIterator[TextDelta]:
    """Call a streaming model under the deadline; yield TextDelta events as they arrive, and
    put its ChatResponse in `answer` once it has answered."""
    step = run.iteration
    queue: asyncio.Queue[str] = asyncio.Queue()
    call = asyncio.ensure_future(run.model.complete(request, on_text_delta=queue.put_nowait))
    try:
        while not call.done() or not queue.empty():
            if queue.empty():
                getter = asyncio.ensure_future(queue.get())
                done, _ = await run.within_deadline(
                    asyncio.wait({call, getter}, return_when=asyncio.FIRST_COMPLETED)
                )
                if getter not in done:
                    getter.cancel()
                    continue
                text = getter.result()
            else:
                text = queue.get_nowait()
            yield run.event(TextDelta, step=step, text=text)
        answer.append(call.result())
    finally:
        if not call.done():
            call.cancel()


def _finish_or_correct(run: RunState, response: ChatResponse) -> list[Any]:
    """A reply without tool calls: the final answer, or one chance to fix its structure."""
    text = response.text or ""
    final_type = run.agent.final_type
    if final_type is None:
        run.finish(StopReason.COMPLETED, output=text)
        return []
    try:
        output = final_type.model_validate(parse_arguments(text, what="the final answer"))
    except (ArgumentsParseError, ValidationError) as exc:
        problem = str(exc)
    else:
        if run.agent.decision_type is not None:
            run.handoff = request_from_decision(run.agent, output)
            if run.handoff is None:
                run.finish(StopReason.COMPLETED, output=output.answer or "")  # type: ignore[attr-defined]
        else:
            run.finish(StopReason.COMPLETED, output=output)
        return []
    if run.output_corrections >= 1:
        message = f"final answer still does not match {final_type.__name__}: {problem}"
        run.finish(
            StopReason.ERROR,
            error=ErrorInfo(
                type=OutputValidationError.__name__, message=message, step=run.iteration
            ),
        )
        return [
            run.event(
                GuardTriggered,
                step=run.iteration,
                guard="output_validation",
                action="stop",
                message=message,
            )
        ]
    run.output_corrections += 1
    schema = orjson.dumps(run.agent.output_schema()).decode()
    run.messages.append(
        {
            "role": "user",
            "content": (
                f"Your answer does not match the required output ({final_type.__name__}): "
                f"{problem}\nReply again with only a JSON object matching this JSON Schema:\n"
                f"{schema}"
            ),
        }
    )
    return [
        run.event(
            GuardTriggered,
            step=run.iteration,
            guard="output_validation",
            action="retry",
            message=f"final answer does not match {final_type.__name__}: {problem}",
        )
    ]


def _pass_on(run: RunState) -> list[Any]:
    """End the run by passing control on: a handoff, or the next agent of a chain."""
    if run.stop is None and run.handoff is not None:
        return _hand_off(run, run.handoff)
    if run.stop is not None and run.stop.reason is StopReason.COMPLETED and run.then:
        target = run.then[0]
        run.handoff = HandoffRequest(target, "chain", reason="next agent of the chain")
        run.child_run_id = new_run_id()
        return [
            run.event(
                Handoff,
                step=run.iteration,
                mode="chain",
                from_agent=run.agent.name,
                to_agent=target.name,
                reason=run.handoff.reason,
                child_run_id=run.child_run_id,
            )
        ]
    return []


def _hand_off(run: RunState, request: HandoffRequest) -> list[Any]:
    """Check the handoff guards, save the context updates and announce the child run."""
    limits = run.agent.limits
    target = request.target.name
    guard, message = None, ""
    if len(run.path) - 1 >= limits.max_handoffs:
        guard = "max_handoffs"
        message = f"{len(run.path) - 1} handoffs already (max_handoffs={limits.max_handoffs})"
    elif ping_pong(run.path, target, limits.max_bounces):
        guard = "ping_pong"
        message = (
            f"handing over to {target!r} again would bounce {' → '.join([*run.path, target])} "
            f"(max_bounces={limits.max_bounces})"
        )
    if guard is not None:
        run.handoff = None
        run.finish(StopReason.LOOP_DETECTED)
        return [
            run.event(
                GuardTriggered, step=run.iteration, guard=guard, action="stop", message=message
            )
        ]
    # Handoff payloads are addressed to the target, so they land in its namespace.
    run.context.update(request.context_updates, namespace=target)
    events: list[Any] = run.context_events()
    run.child_run_id = new_run_id()
    events.append(
        run.event(
            Handoff,
            step=run.iteration,
            mode=request.mode,
            from_agent=run.agent.name,
            to_agent=target,
            reason=request.reason,
            child_run_id=run.child_run_id,
        )
    )
    run.finish(StopReason.HANDOFF)
    return events
