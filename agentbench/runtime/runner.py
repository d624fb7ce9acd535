"""`Runner`: the public way to run agents.

`Runner.stream` yields every event of a conversation as it happens: one run per agent, a
handoff or the next agent of a chain starting a child run (`parent_run_id`) of its own.
`Runner.run` drains the stream into the final `RunResult`, `run_sync` wraps it for scripts,
`run_many` runs many inputs in isolation and `run_chain` runs agents in a fixed sequence. The
loop of a single run lives in `loop.drive`; `RunFinished` is always the last event of each run.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Protocol

from pydantic import BaseModel

from agentbench.errors import UsageError
from agentbench.runtime.agent import Agent
from agentbench.runtime.context import Context, visible_to
from agentbench.runtime.events import Hook, StopReason, notify
from agentbench.runtime.loop import drive
from agentbench.runtime.models import ChatModel
from agentbench.runtime.orchestration import child_input, handoff_note
from agentbench.runtime.run_state import Deadline, RunResult, RunState
from agentbench.runtime.tools import ToolInterceptor

RunInput = str | list[dict[str, Any]]
ContextInput = Context | Mapping[str, Any] | None


class Runner:
    """Runs agents. Stateless: every method takes what it needs."""

    @classmethod
    async def stream(
        cls,
        agent: Agent,
        input: RunInput,
        *,
        model: ChatModel | None = None,
        context: ContextInput = None,
        hooks: Sequence[Hook] = (),
        store: RunStore | None = None,
        run_id: str | None = None,
        parent_run_id: str | None = None,
        tool_interceptor: ToolInterceptor | None = None,
        timeout_s: float | Deadline | None = None,
    ) -> AsyncIterator[Any]:
        """Run `agent` on `input`, yielding every event (of every run it leads to) as it happens.

        `timeout_s` bounds the whole conversation (handoffs included); each agent's own
        `limits.timeout_s` still applies. Running out stops the run with stop reason `timeout`.
        A `Deadline` given instead says who set it and when it runs out (a server counts the
        time a request waited for its slot).
        """
        conversation = _Conversation(
            agent,
            input,
            model,
            context,
            _with_store(hooks, store),
            run_id=run_id,
            parent_run_id=parent_run_id,
            tool_interceptor=tool_interceptor,
            deadline=_deadline(timeout_s),
        )
        # aclosing: if our consumer stops early, the inner generator is closed now (so the
        # hooks see RunFinished(cancelled) at once), not whenever it is garbage collected.
        async with contextlib.aclosing(conversation.events()) as events:
            async for event in events:
                yield event

    @classmethod
    async def run(
        cls,
        agent: Agent,
        input: RunInput,
        *,
        model: ChatModel | None = None,
        context: ContextInput = None,
        hooks: Sequence[Hook] = (),
        store: RunStore | None = None,
        run_id: str | None = None,
        parent_run_id: str | None = None,
        tool_interceptor: ToolInterceptor | None = None,
        timeout_s: float | Deadline | None = None,
    ) -> RunResult:
        """Run to the end; the result is the last run's, with every run in `.runs`.
        `timeout_s`: a budget for the whole conversation, as in `stream`."""
        conversation = _Conversation(
            agent,
            input,
            model,
            context,
            _with_store(hooks, store),
            run_id=run_id,
            parent_run_id=parent_run_id,
            tool_interceptor=tool_interceptor,
            deadline=_deadline(timeout_s),
        )
        async with contextlib.aclosing(conversation.events()) as events:
            async for _ in events:
                pass
        return conversation.result()

    @classmethod
    async def run_chain(
        cls,
        agents: Sequence[Agent],
        input: RunInput,
        *,
        model: ChatModel | None = None,
        context: ContextInput = None,
        hooks: Sequence[Hook] = (),
        store: RunStore | None = None,
        tool_interceptor: ToolInterceptor | None = None,
    ) -> RunResult:
        """Run `agents` in order, each one's output the next one's input."""
        if not agents:
            raise UsageError("run_chain needs at least one agent")
        conversation = _Conversation(
            agents[0],
            input,
            model,
            context,
            _with_store(hooks, store),
            then=agents[1:],
            tool_interceptor=tool_interceptor,
        )
        async with contextlib.aclosing(conversation.events()) as events:
            async for _ in events:
                pass
        return conversation.result()

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
        context: ContextInput = None,
        hooks: Sequence[Hook] = (),
        store: RunStore | None = None,
        tool_interceptor: ToolInterceptor | None = None,
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
                return await cls.run(
                    agent,
                    item,
                    model=chosen,
                    context=context,
                    hooks=hooks,
                    store=store,
                    tool_interceptor=tool_interceptor,
                )

        return list(await asyncio.gather(*(one(item) for item in inputs)))


class RunStore(Protocol):
    """Where runs are recorded (e.g. `agentbench.trace.TraceStore`): it gives a hook per call.

    The hook sees every event of the runs the call leads to, `RunFinished` last for each.
    """

    def run_hook(self) -> Hook: ...


def _deadline(timeout_s: float | Deadline | None) -> Deadline | None:
    if timeout_s is None or isinstance(timeout_s, Deadline):
        return timeout_s
    if timeout_s <= 0:
        raise UsageError(f"timeout_s must be positive, not {timeout_s!r}")
    return Deadline.after(timeout_s, "the caller's timeout_s")


def _with_store(hooks: Sequence[Hook], store: RunStore | None) -> Sequence[Hook]:
    """The hooks, led by the store's recorder; AGENTBENCH_DB names a store when none is given."""
    if store is None and os.environ.get("AGENTBENCH_DB"):
        from agentbench.trace.store import store_from_env  # lazy: the runtime knows no traces

        store = store_from_env()
    return hooks if store is None else [store.run_hook(), *hooks]


def _resolve_model(agent: Agent, model: ChatModel | None) -> ChatModel:
    chosen = model or agent.model
    if chosen is None:
        raise UsageError(
            f"agent {agent.name!r} has no model: pass model= to the runner or set Agent(model=...)"
        )
    return chosen


class _Conversation:
    """The runs one call leads to: the first agent's, then one per handoff or chain step.

    Session variables travel with the conversation: each run sees the part its agent may
    read, and what it writes is merged back, so the next agent (or the next turn, through
    `RunResult.context`) finds it.
    """

    def __init__(
        self,
        agent: Agent,
        input: RunInput,
        model: ChatModel | None,
        context: ContextInput,
        hooks: Sequence[Hook],
        *,
        run_id: str | None = None,
        parent_run_id: str | None = None,
        then: Sequence[Agent] = (),
        tool_interceptor: ToolInterceptor | None = None,
        deadline: Deadline | None = None,
    ) -> None:
        self.root = agent
        self.deadline = deadline
        self.tool_interceptor = tool_interceptor
        self.model = model
        self.hooks = list(hooks)
        start = Context.of(context)
        self.session = dict(start.session)
        self.runs: list[RunState] = []
        self.current = RunState(
            agent,
            input,
            _resolve_model(agent, model),
            context=start,
            run_id=run_id,
            parent_run_id=parent_run_id,
            then=then,
            tool_interceptor=tool_interceptor,
            deadline=deadline,
        )

    async def events(self) -> AsyncIterator[Any]:
        """Every run's events, delivered to the hooks first; RunFinished always comes last.

        One generator for the whole conversation, not one more per run around `drive`:
        every event of every step passes through each generator it is yielded by.
        """
        hooks = self.hooks
        run: RunState | None = self.current
        while run is not None:
            self.current = run
            self.runs.append(run)
            try:
                async for event in drive(run):
                    if hooks:  # most runs have none: no coroutine to make and await per event
                        await notify(hooks, event, run.hook_errors, run.unkept)
                    yield event
            except (asyncio.CancelledError, GeneratorExit):
                # The consumer went away or the task was cancelled: hooks still see the end.
                run.finish(StopReason.CANCELLED)
                run.close_open_calls()
                await notify(hooks, run.finished_event(), run.hook_errors, run.unkept)
                raise
            final = run.finished_event()
            await notify(hooks, final, run.hook_errors, run.unkept)
            yield final
            self._merge_session(run)
            run = self._next_run(run)
        # The store could not keep a run of the conversation: every hook saw the end, and the
        # caller learns it was not recorded (its latest word, which counts what was lost).
        unkept = [error for each in self.runs for error in each.unkept]
        if unkept:
            raise unkept[-1]

    def _merge_session(self, run: RunState) -> None:
        self.session.update(run.context.scope("session"))
        for key in run.session_removals:
            self.session.pop(key, None)
        # A router remembers who answered last, so a short follow-up goes straight back there
        # even when its specialist handed the conversation on.
        routes = getattr(self.root, "routes", None)
        if routes is not None and run is not self.runs[0] and run.agent.name in routes:
            self.session[f"{self.root.name}.last_agent"] = run.agent.name

    def _next_run(self, run: RunState) -> RunState | None:
        request = run.handoff
        if request is None or run.child_run_id is None or run.stop is None:
            return None
        if run.stop.reason is StopReason.COMPLETED and request.mode == "chain":
            output = run.stop.output
            text = output.model_dump_json() if isinstance(output, BaseModel) else str(output)
            next_input: RunInput = text
            note = None
        elif run.stop.reason is StopReason.HANDOFF:
            next_input = child_input(run.messages, request)
            note = handoff_note(run.agent.name, request)
        else:
            return None
        target = request.target
        snapshot = run.context.snapshot()
        context = Context(
            session={
                key: value
                for key, value in self.session.items()
                if visible_to(key, target.name, target.reads)
            },
            request={},  # the request scope never crosses a handoff
            global_=snapshot.global_,
            pinned=snapshot.pinned,
        )
        return RunState(
            target,
            next_input,
            _resolve_model(target, self.model),
            context=context,
            run_id=run.child_run_id,
            parent_run_id=run.run_id,
            path=run.path,
            handoff_note=note,
            then=run.then[1:] if request.mode == "chain" else (),
            tool_interceptor=self.tool_interceptor,
            deadline=self.deadline,
        )

    def result(self) -> RunResult:
        results = [run.result() for run in self.runs]
        final = results[-1]
        final.runs = results
        final.context = Context(
            session=dict(self.session),
            global_=final.context.global_,
            pinned=final.context.pinned,
        )
        return final
