"""What one server holds: the served agents, their model, the store, admission and runs.

Built by `agentbench serve` (or by a test) and handed to `create_app`; nothing here knows
HTTP, so the same service could sit behind another front end.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from agentbench.errors import InstructionsError, UsageError
from agentbench.runtime.agent import Agent
from agentbench.runtime.context import Context, RunContext
from agentbench.runtime.models import ChatModel
from agentbench.runtime.run_state import Deadline
from agentbench.serve.admission import Admission, Ticket
from agentbench.serve.callers import Caller, Keyring
from agentbench.serve.metrics import ServeMetrics
from agentbench.serve.runs import Launch, RunRegistry, ServedRun
from agentbench.serve.store_health import StoreHealth
from agentbench.trace.redaction.rules import RedactionRules


@dataclass(frozen=True)
class ServeSettings:
    """The promises the server keeps under load (see `agentbench serve --help`)."""

    concurrency: int = 8
    queue: int = 64  # requests that may wait for a slot; beyond it, 429
    timeout_s: float | None = 300.0  # per request, queue wait included
    max_body_bytes: int = 1_000_000
    drain_s: float = 30.0  # on SIGTERM, how long running requests may finish
    # The callers' named keys; none: one user, on loopback only (see `callers`).
    keys: Keyring = field(default_factory=Keyring)
    keep_finished: int = 1000  # finished runs answerable from memory
    # A client gets this long to send a request's headers, then this long for its body;
    # past either the connection is closed (a slow client holds no socket for long).
    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0


def agent_refs(ref: str, target: Any, agents: Mapping[str, Agent], module: Any) -> dict[str, str]:
    """`module:attribute` of each served agent: `ref` itself for a single agent; for a list or
    dict of them, the module-level name each one is bound to (if any)."""
    if isinstance(target, Agent):
        return {target.name: ref}
    module_name = ref.partition(":")[0]
    refs: dict[str, str] = {}
    for attribute, value in vars(module).items():
        for name, agent in agents.items():
            if value is agent and name not in refs:
                refs[name] = f"{module_name}:{attribute}"
    return refs


def served_agents(target: Any, ref: str = "the target") -> dict[str, Agent]:
    """The agents `target` offers, by name: an agent (or router), or a list or mapping of them."""
    if isinstance(target, Agent):
        return {target.name: target}
    items: Iterable[Any]
    if isinstance(target, Mapping):
        items = target.values()
    elif isinstance(target, list | tuple):
        items = target
    else:
        raise UsageError(
            f"{ref} is a {type(target).__name__}: expected an Agent (or a Router), or a list "
            "or dict of agents"
        )
    agents: dict[str, Agent] = {}
    for item in items:
        if not isinstance(item, Agent):
            raise UsageError(f"{ref} holds a {type(item).__name__}: every item must be an Agent")
        if item.name in agents:
            raise UsageError(f"{ref} serves two agents named {item.name!r}")
        agents[item.name] = item
    if not agents:
        raise UsageError(f"{ref} holds no agent to serve")
    return agents


class Service:
    def __init__(
        self,
        agents: Mapping[str, Agent],
        *,
        settings: ServeSettings | None = None,
        model: ChatModel | None = None,
        store: Any = None,
        agent_refs: Mapping[str, str] | None = None,
    ) -> None:
        self.agents = dict(agents)
        # module:attribute of each served agent, stored with its runs so `agentbench replay
        # RUN_ID` needs no --agent.
        self.agent_refs = dict(agent_refs or {})
        self.settings = settings or ServeSettings()
        self.model = model
        self.store = store
        self.metrics = ServeMetrics()
        # The store's rules with the callers' keys as secrets: a key pasted into a message is
        # masked in the store and in every answer, like the secrets of this environment.
        rules = store.redaction if store is not None else RedactionRules()
        self.redaction = replace(
            rules, secret_values=(*rules.secret_values, *self.settings.keys.secrets)
        )
        if store is not None:
            store.redaction = self.redaction
        self.runs = RunRegistry(keep=self.settings.keep_finished)
        self.runs.finished_callbacks.append(self._count)
        # Asked before each run: a store that cannot keep runs refuses them (503) unstarted.
        self.store_health = StoreHealth(store.path if store is not None else None)
        self.runs.finished_callbacks.append(self._unkept)
        self._admission: Admission | None = None
        self.draining = False
        for agent in self.agents.values():
            if agent.model is None and model is None:
                raise UsageError(
                    f"agent {agent.name!r} has no model: give it one (Agent(model=...)) or "
                    "pass --model NAME (with --base-url URL or OPENAI_BASE_URL)"
                )

    @property
    def admission(self) -> Admission:
        # Made on first use, inside the server's event loop (asyncio primitives bind to it).
        if self._admission is None:
            self._admission = Admission(self.settings.concurrency, self.settings.queue)
        return self._admission

    def agent(self, name: str | None) -> Agent:
        """The agent a request names; the only one when it names none. KeyError otherwise."""
        if name is None or name not in self.agents:
            if name is None and len(self.agents) == 1:
                return next(iter(self.agents.values()))
            raise KeyError(name)
        return self.agents[name]

    def start(
        self,
        agent: Agent,
        conversation: str | list[dict[str, Any]],
        *,
        ticket: Ticket,
        caller: Caller,
        context: dict[str, Any] | None = None,
        request_id: str | None = None,
        conversation_id: str | None = None,
    ) -> ServedRun:
        store = self.store
        if store is not None:
            store = store.with_labels(
                request_id=request_id,
                conversation_id=conversation_id,
                agent_ref=self.agent_refs.get(agent.name),
                caller=caller.name,
            )
        # The runner's model serves every agent of the conversation (handoff targets too).
        model = self.model or agent.model
        limit = self.settings.timeout_s
        deadline = None if limit is None else Deadline.after(limit, "the server's --timeout")
        launch = Launch(model=model, store=store, deadline=deadline, redaction=self.redaction)
        return self.runs.start(
            agent,
            conversation,
            ticket=ticket,
            launch=launch,
            caller=caller,
            context=context,
            request_id=request_id,
            conversation_id=conversation_id,
        )

    @staticmethod
    def missing_variable(agent: Agent, context: dict[str, Any]) -> InstructionsError | None:
        """Why the agent's instructions cannot be written with `context` (a variable they
        use that it lacks), found before a run starts; None when they can."""
        if not agent.template.variables:
            return None  # plain text: nothing to lack (and no render per request)
        variables = RunContext("", agent.name, Context.of(context)).variables  # as a run's
        try:
            agent.template.render(variables)
        except InstructionsError as exc:
            return exc
        return None

    def _count(self, run: ServedRun) -> None:
        self.metrics.runs.labels(run.agent, run.stop_reason or "unknown").inc()
        if run.run_seconds is not None:
            self.metrics.run_seconds.labels(run.agent).observe(run.run_seconds)
        self.metrics.tokens.labels(run.agent, "input").inc(run.usage.input_tokens)
        self.metrics.tokens.labels(run.agent, "output").inc(run.usage.output_tokens)

    def _unkept(self, run: ServedRun) -> None:
        if run.unkept is not None:
            self.store_health.saw(run.unkept)

    def begin_shutdown(self) -> None:
        """From now on new requests are refused (503); running ones get `drain_s` to finish,
        then they are cancelled — answered 503 and stored as cancelled — so the server's own
        wait for open connections ends with every client answered. Call it in the loop."""
        if self.draining:
            return
        self.draining = True
        asyncio.get_running_loop().call_later(self.settings.drain_s, self._cancel_active)

    def _cancel_active(self) -> None:
        for run in self.runs.active:
            run.cancel()

    async def shutdown(self) -> None:
        """After the server stopped: what still runs (background runs) finishes or is cancelled
        when the drain runs out (the timer `begin_shutdown` set); then every row is committed
        and the models' connections are closed."""
        self.begin_shutdown()
        await self.runs.settled()
        if self.store is not None:
            self.store.close()  # commits every row still queued (blocking: we are stopping)
        models = {id(m): m for m in [self.model, *(a.model for a in self.agents.values())] if m}
        for model in models.values():
            closer = getattr(model, "aclose", None)
            if closer is not None:
                await closer()
