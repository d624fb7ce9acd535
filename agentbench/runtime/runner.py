"""`Runner`: the one place the agent loop lives.

`Runner.stream` is a single async generator that reads top to bottom: check the brakes, ask
the model, then either finish (validating structured output) or run the requested tools, and
go round again. Every fact is yielded as a typed event; `run` drains the stream, `run_sync`
wraps it for scripts and `run_many` runs many inputs in isolation. `RunFinished` is always the
last event, whatever happened.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import orjson
from pydantic import ValidationError

from agentbench.errors import (
    AgentbenchError,
    OutputValidationError,
    RunTimeoutError,
    UsageError,
)
from agentbench.runtime.agent import Agent
from agentbench.runtime.arguments import ArgumentsParseError, parse_arguments
from agentbench.runtime.events import (
    ErrorInfo,
    GuardTriggered,
    Hook,
    ModelRequest,
    ModelResponse,
    RunStarted,
    StopReason,
    TextDelta,
    notify,
)
from agentbench.runtime.models import ChatModel, ChatResponse
from agentbench.runtime.run_state import RunResult, RunState
from agentbench.runtime.tool_calls import run_tool_calls

RunInput = str | list[dict[str, Any]]


class Runner:
    """Runs agents. Stateless: every method takes what it needs."""

    @classmethod
    async def stream(
        cls,
        agent: Agent,
        input: RunInput,
        *,
        model: ChatModel | None = None,
        context: dict[str, Any] | None = None,
        hooks: Sequence[Hook] = (),
        run_id: str | None = None,
        parent_run_id: str | None = None,
    ) -> AsyncIterator[Any]:
        """Run `agent` on `input`, yielding every event as it happens."""
        run = RunState(
            agent,
            input,
            _resolve_model(agent, model),
            context=context,
            run_id=run_id,
            parent_run_id=parent_run_id,
        )
        # aclosing: if our consumer stops early, the inner generator is closed now (so the
        # hooks see RunFinished(cancelled) at once), not whenever it is garbage collected.
        async with contextlib.aclosing(_events(run, hooks)) as events:
            async for event in events:
                yield event

    @classmethod
    async def run(
        cls,
        agent: Agent,
        input: RunInput,
        *,
        model: ChatModel | None = None,
        context: dict[str, Any] | None = None,
        hooks: Sequence[Hook] = (),
        run_id: str | None = None,
        parent_run_id: str | None = None,
    ) -> RunResult:
        """Run to the end and return the result (events included)."""
        run = RunState(
            agent,
            input,
            _resolve_model(agent, model),
            context=context,
            run_id=run_id,
            parent_run_id=parent_run_id,
        )
        async for _ in _events(run, hooks):
            pass
        return run.result()

    @classmethod
    def run_sync(cls, agent: Agent, input: RunInput, **kwargs: Any) -> RunResult:
        """`run` for scripts; works even when called from inside a running event loop."""

        async def run_and_close() -> RunResult:
            try:
                return await cls.run(agent, input, **kwargs)
            finally:
                # This loop dies with the call: release the model's connections bound to it.
                closer = getattr(kwargs.get("model") or agent.model, "aclose", None)
                if closer is not None:
                    await closer()

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(run_and_close())
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(asyncio.run, run_and_close()).result()

    @classmethod
    async def run_many(
        cls,
        agent: Agent,
        inputs: Sequence[RunInput],
        *,
        model: ChatModel | None = None,
        model_factory: Callable[[], ChatModel] | None = None,
        concurrency: int = 4,
        context: dict[str, Any] | None = None,
        hooks: Sequence[Hook] = (),
    ) -> list[RunResult]:
        """Run every input, at most `concurrency` at a time; results keep the inputs' order.

        Runs share nothing: each gets its own copy of `context`, its own conversation and,
        with `model_factory`, its own model (use it for stateful models such as a script).
        """
        if concurrency < 1:
            raise UsageError("run_many: concurrency must be at least 1")
        gate = asyncio.Semaphore(concurrency)

        async def one(item: RunInput) -> RunResult:
            async with gate:
                chosen = model_factory() if model_factory is not None else model
                return await cls.run(agent, item, model=chosen, context=context, hooks=hooks)

        return list(await asyncio.gather(*(one(item) for item in inputs)))


def _resolve_model(agent: Agent, model: ChatModel | None) -> ChatModel:
    chosen = model or agent.model
    if chosen is None:
        raise UsageError(
            f"agent {agent.name!r} has no model: pass model= to the runner or set Agent(model=...)"
        )
    return chosen


async def _events(run: RunState, hooks: Sequence[Hook]) -> AsyncIterator[Any]:
    """The run's events, delivered to the hooks first; RunFinished always comes last."""
    try:
        async for event in _drive(run):
            await notify(hooks, event, run.hook_errors)
            yield event
    except (asyncio.CancelledError, GeneratorExit):
        # The consumer went away or the task was cancelled: hooks still see the end.
        run.finish(StopReason.CANCELLED)
        run.close_open_calls()
        await notify(hooks, run.finished_event(), run.hook_errors)
        raise
    final = run.finished_event()
    await notify(hooks, final, run.hook_errors)
    yield final


async def _drive(run: RunState) -> AsyncIterator[Any]:
    """The loop. Yields every event except RunFinished; never raises for a run's failure."""
    agent = run.agent
    yield run.event(
        RunStarted,
        input=run.input,
        model=agent.model_settings.model or run.model.name,
        parent_run_id=run.parent_run_id,
        context=run.context.variables,
    )
    try:
        while run.stop is None:
            brake = _check_brakes(run)
            if brake is not None:
                yield brake
                break
            run.iteration += 1
            run.context.step = run.iteration
            request = _build_request(run)
            yield run.event(ModelRequest, step=run.iteration, request=request)
            response: ChatResponse | None = None
            async for item in _ask_model(run, request):
                if isinstance(item, ChatResponse):
                    response = item
                else:
                    yield item
            assert response is not None
            run.usage = run.usage + response.usage
            run.messages.append(response.as_message())
            yield run.event(ModelResponse, step=run.iteration, response=response)
            if response.tool_calls:
                async for event in run_tool_calls(run, response.tool_calls, run.iteration):
                    yield event
            else:
                for event in _finish_or_correct(run, response):
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
    run.close_open_calls()


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


def _build_request(run: RunState) -> dict[str, Any]:
    """The chat-completions body for this iteration, instructions freshly rendered."""
    agent = run.agent
    settings = agent.model_settings
    schema = agent.output_schema()
    system = agent.template.render(
        run.context.variables,
        state=run.state_lines,
        state_summary=agent.state_summary,
        output_schema=orjson.dumps(schema).decode() if schema is not None else None,
    )
    run.system_message = {"role": "system", "content": system}
    request: dict[str, Any] = {
        "model": settings.model or run.model.name,
        "messages": [run.system_message, *run.messages],
    }
    if run.tool_schemas:
        request["tools"] = run.tool_schemas
    request.update(settings.request_params())
    if schema is not None and settings.output_mode == "json_schema":
        request["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": agent.output_type.__name__, "schema": schema},  # type: ignore[union-attr]
        }
    return request


async def _ask_model(run: RunState, request: dict[str, Any]) -> AsyncIterator[Any]:
    """Call the model under the deadline; yield TextDelta events, then the ChatResponse.

    When the request streams, deltas are yielded as they arrive; otherwise any deltas the
    model reports are yielded after it answers (no task or queue needed on the fast path).
    """
    step = run.iteration
    if not request.get("stream"):
        deltas: list[str] = []
        response = await run.within_deadline(
            run.model.complete(request, on_text_delta=deltas.append)
        )
        for text in deltas:
            yield run.event(TextDelta, step=step, text=text)
        yield response
        return

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
        yield call.result()
    finally:
        if not call.done():
            call.cancel()


def _finish_or_correct(run: RunState, response: ChatResponse) -> list[Any]:
    """A reply without tool calls: the final answer, or one chance to fix its structure."""
    text = response.text or ""
    output_type = run.agent.output_type
    if output_type is None:
        run.finish(StopReason.COMPLETED, output=text)
        return []
    try:
        output = output_type.model_validate(parse_arguments(text, what="the final answer"))
    except (ArgumentsParseError, ValidationError) as exc:
        problem = str(exc)
    else:
        run.finish(StopReason.COMPLETED, output=output)
        return []
    if run.output_corrections >= 1:
        message = f"final answer still does not match {output_type.__name__}: {problem}"
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
                f"Your answer does not match the required output ({output_type.__name__}): "
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
            message=f"final answer does not match {output_type.__name__}: {problem}",
        )
    ]
