"""Scoped context variables and the `RunContext` a tool can ask for.

Three scopes: `global` (read-only configuration), `session` (travels with the conversation,
across handoffs and turns) and `request` (this request only; dropped at a handoff). Writes are
namespaced by the writing agent (`refunds.order_id`), so one agent cannot silently overwrite
another's variables; an agent declares which namespaces it `reads`, and a handoff passes only
those (plus un-namespaced variables the caller supplied). Every write is recorded as a change,
which the runner turns into a `ContextChanged` event.

A tool that declares a parameter annotated `RunContext` receives the live context of the run
that called it; that parameter never appears in the tool's JSON Schema.
"""

from __future__ import annotations

import copy
import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from agentbench.errors import UsageError

_MISSING = object()


class Scope(enum.StrEnum):
    """Where a context variable lives, and so how long it lasts.

    `request`: this request only (dropped at a handoff). `session`: the conversation, across
    handoffs and turns (`RunResult.context` carries it to the next turn); the default for
    writes. `global`: read-only configuration.
    """

    REQUEST = "request"
    SESSION = "session"
    GLOBAL = "global"


@dataclass
class Context:
    """Context variables by scope; pass one to `Runner.run(context=...)`.

    A plain dict passed as `context=` becomes the session scope. `RunResult.context` is a
    `Context` too, so the next turn of a conversation continues where the last one ended.
    """

    session: dict[str, Any] = field(default_factory=dict)
    request: dict[str, Any] = field(default_factory=dict)
    global_: Mapping[str, Any] = field(default_factory=dict)
    pinned: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, value: Context | Mapping[str, Any] | None) -> Context:
        """A private deep copy of `value`, so runs never share mutable state."""
        if value is None:
            return cls()
        if isinstance(value, Context):
            return cls(
                session=copy.deepcopy(value.session),
                request=copy.deepcopy(value.request),
                global_=dict(value.global_),
                pinned=list(value.pinned),
            )
        return cls(session=copy.deepcopy(dict(value)))

    def as_dict(self) -> dict[str, Any]:
        scopes: dict[str, Any] = {
            "global": dict(self.global_),
            "session": dict(self.session),
            "request": dict(self.request),
        }
        # Pinned facts are part of what a turn starts with (memory shows them to the model):
        # a stored run replayed or promoted without them would send a different request.
        if self.pinned:
            scopes["pinned"] = list(self.pinned)
        return scopes


@dataclass(frozen=True)
class ContextChange:
    scope: Scope
    key: str
    op: str  # "add" | "change" | "remove"
    old: Any
    new: Any


def namespace_of(key: str) -> str | None:
    """`refunds` for `refunds.order_id`; None for a caller-supplied, un-namespaced key."""
    head, dot, _ = key.partition(".")
    return head if dot else None


def visible_to(key: str, agent: str, reads: Iterable[str]) -> bool:
    """Whether `agent`, declaring `reads`, may see the session variable `key`."""
    namespace = namespace_of(key)
    if namespace is None or namespace == agent:
        return True
    return any(key.startswith(prefix if prefix.endswith(".") else prefix + ".") for prefix in reads)


class RunContext:
    """What the runner knows about the run a tool is serving, and its variables."""

    def __init__(self, run_id: str, agent: str, context: Context | None = None) -> None:
        self.run_id = run_id
        self.agent = agent
        self.step = 0
        ctx = context or Context()
        self._global = MappingProxyType(dict(ctx.global_))
        self._scopes: dict[Scope, dict[str, Any]] = {
            Scope.SESSION: ctx.session,
            Scope.REQUEST: ctx.request,
        }
        self.changes: list[ContextChange] = []
        self.pinned_facts: list[str] = list(ctx.pinned)
        self.version = 0  # bumped on every write, so readers can cache what they derive

    # -- reading -------------------------------------------------------------------------
    @property
    def variables(self) -> dict[str, Any]:
        """Every visible variable, request over session over global."""
        return {**self._global, **self._scopes[Scope.SESSION], **self._scopes[Scope.REQUEST]}

    def get(self, key: str, default: Any = None) -> Any:
        """Look `key` up in this agent's namespace, then as given; request scope first."""
        for candidate in (self.full_key(key), key):
            for scope in (self._scopes[Scope.REQUEST], self._scopes[Scope.SESSION], self._global):
                if candidate in scope:
                    return scope[candidate]
        return default

    def scope(self, scope: Scope | str) -> Mapping[str, Any]:
        chosen = Scope(scope)
        if chosen is Scope.GLOBAL:
            return self._global
        return MappingProxyType(self._scopes[chosen])

    def snapshot(self) -> Context:
        return Context(
            session=copy.deepcopy(self._scopes[Scope.SESSION]),
            request=copy.deepcopy(self._scopes[Scope.REQUEST]),
            global_=dict(self._global),
            pinned=list(self.pinned_facts),
        )

    # -- writing -------------------------------------------------------------------------
    def full_key(self, key: str, namespace: str | None = None) -> str:
        """Writes land in the writing agent's namespace (a handoff writes for its target)."""
        owner = namespace or self.agent
        return key if key.startswith(f"{owner}.") else f"{owner}.{key}"

    def set(
        self,
        key: str,
        value: Any,
        *,
        scope: Scope | str = Scope.SESSION,
        namespace: str | None = None,
    ) -> str:
        """Set a variable in this agent's namespace (or `namespace`); returns the full key."""
        target = self._writable(scope)
        full = self.full_key(key, namespace)
        old = target.get(full, _MISSING)
        if old is not _MISSING and old == value:
            return full
        target[full] = copy.deepcopy(value)
        self.version += 1
        op = "add" if old is _MISSING else "change"
        self.changes.append(
            ContextChange(Scope(scope), full, op, None if old is _MISSING else old, value)
        )
        return full

    def delete(self, key: str, *, scope: Scope | str = Scope.SESSION) -> bool:
        target = self._writable(scope)
        full = self.full_key(key)
        if full not in target:
            return False
        old = target.pop(full)
        self.version += 1
        self.changes.append(ContextChange(Scope(scope), full, "remove", old, None))
        return True

    def update(
        self,
        values: Mapping[str, Any],
        *,
        scope: Scope | str = Scope.SESSION,
        namespace: str | None = None,
    ) -> None:
        for key, value in values.items():
            self.set(key, value, scope=scope, namespace=namespace)

    def _writable(self, scope: Scope | str) -> dict[str, Any]:
        try:
            chosen = Scope(scope)
        except ValueError:
            raise UsageError(
                f"context scope {scope!r} is not one of: request, session, global"
            ) from None
        if chosen is Scope.GLOBAL:
            raise UsageError(
                f"agent {self.agent!r} tried to write the global scope; it is read-only "
                "configuration (write to 'session' or 'request')"
            )
        return self._scopes[chosen]

    def pin(self, fact: str) -> None:
        """Keep `fact` in front of the model for the rest of the conversation (never dropped)."""
        if fact not in self.pinned_facts:
            self.pinned_facts.append(fact)
            self.version += 1

    def drain_changes(self) -> list[ContextChange]:
        changes, self.changes = self.changes, []
        return changes

    # -- handoff -------------------------------------------------------------------------
    def for_handoff(self, target: str, reads: Iterable[str]) -> Context:
        """What the target agent receives: global, the session it may read, no request scope."""
        reads = tuple(reads)
        session = {
            key: copy.deepcopy(value)
            for key, value in self._scopes[Scope.SESSION].items()
            if visible_to(key, target, reads)
        }
        return Context(
            session=session, request={}, global_=dict(self._global), pinned=list(self.pinned_facts)
        )


def template_namespace(variables: Mapping[str, Any]) -> dict[str, Any]:
    """Variables for a jinja2 template: `billing.order_id` is reachable as written."""
    namespace: dict[str, Any] = {}
    for key, value in variables.items():
        head, dot, rest = key.partition(".")
        if dot:
            group = namespace.setdefault(head, {})
            if isinstance(group, dict):
                group[rest] = value
    for key, value in variables.items():
        if "." not in key:
            namespace[key] = value  # a flat name wins over a namespace of the same name
    return namespace
