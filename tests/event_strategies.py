"""Hypothesis strategies for the event union: any event kind, any field set or left unset.

Strategies are derived from the pydantic models themselves (type hints walked recursively),
so an event kind added to `agentbench.runtime.events.Event` is generated without a change
here; a field of a type this walker does not know fails loudly rather than being skipped.
`runs()` strings events into one valid run as the runner would emit it: `RunStarted` first
at seq 0, `RunFinished` last, a model call's response (and a tool call's finish) carrying the
step, purpose, call id, tool and arguments of its request (start).
"""

from __future__ import annotations

import enum
import functools
import types
import typing
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Union

from hypothesis import strategies as st
from pydantic import BaseModel

from agentbench.runtime.events import Event

BASE_FIELDS = ("run_id", "seq", "ts", "agent", "kind")
EVENT_KINDS: tuple[type[BaseModel], ...] = typing.get_args(typing.get_args(Event)[0])
INT64 = 2**63 - 1

# Text that JSON and DuckDB carry: any character but lone surrogates (not valid UTF-8).
texts = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-INT64, INT64)
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
timestamps = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)


@functools.cache
def for_type(annotation: Any) -> st.SearchStrategy[Any]:
    """A strategy for values of `annotation`, as JSON and the store can hold them."""
    origin = typing.get_origin(annotation)
    if annotation is Any:
        return json_values
    if annotation is type(None):
        return st.none()
    if origin is Literal:
        return st.sampled_from(typing.get_args(annotation))
    if origin in (Union, types.UnionType):
        return st.one_of(*(for_type(member) for member in typing.get_args(annotation)))
    if origin is typing.Annotated:
        return for_type(typing.get_args(annotation)[0])
    if origin is list:
        (item,) = typing.get_args(annotation)
        return st.lists(for_type(item), max_size=3)
    if origin is dict:
        key, value = typing.get_args(annotation)
        return st.dictionaries(for_type(key), for_type(value), max_size=3)
    if isinstance(annotation, type):
        if issubclass(annotation, enum.Enum):
            return st.sampled_from(list(annotation))
        if issubclass(annotation, BaseModel):
            return models(annotation)
        simple = {
            str: texts,
            bool: st.booleans(),
            int: st.integers(-INT64, INT64),
            float: st.floats(allow_nan=False, allow_infinity=False),
            datetime: timestamps,
        }
        if annotation in simple:
            return simple[annotation]
    raise TypeError(f"no strategy for {annotation!r}: teach tests/event_strategies.py about it")


Optional = Literal["some", "all", "none"]


@st.composite
def fields_of(
    draw: st.DrawFn,
    model: type[BaseModel],
    skip: tuple[str, ...] = (),
    optional: Optional = "some",
) -> dict[str, Any]:
    """Keyword arguments for `model`: every required field drawn; the optional ones all set,
    none set (their defaults), or some of them."""
    hints = typing.get_type_hints(model)
    values: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        if name in skip:
            continue
        if not info.is_required():
            unset = optional == "none" or (optional == "some" and draw(st.booleans()))
            if unset:
                continue
        values[name] = draw(for_type(hints[name]))
    return values


def models(model: type[BaseModel]) -> st.SearchStrategy[BaseModel]:
    return fields_of(model).map(lambda values: model(**values))


def _by_kind(name: str) -> type[BaseModel]:
    return next(k for k in EVENT_KINDS if k.model_fields["kind"].default == name)


@st.composite
def runs(
    draw: st.DrawFn,
    run_id: str,
    *,
    max_events: int = 10,
    include: type[BaseModel] | None = None,
    optional: Optional = "some",
) -> list[Any]:
    """One run's events in emission order, consistent the way the runner makes them.

    `include`: a kind the run must contain (its optional fields set as `optional` says).
    """
    ends = ("run_started", "run_finished")
    middle = [k for k in EVENT_KINDS if k.model_fields["kind"].default not in ends]
    agent = draw(st.sampled_from(["triage", "refunds", "weather"]))
    def ends_of(name: str) -> tuple[type[BaseModel], dict[str, Any]]:
        kind = _by_kind(name)
        return kind, draw(fields_of(kind, BASE_FIELDS, optional if kind is include else "some"))

    drafts = [ends_of("run_started")]
    waiting: dict[str, dict[str, Any]] = {}  # model requests without a response, by purpose
    started: dict[str, dict[str, Any]] = {}  # tool calls without a finish, by call id
    kinds = draw(st.lists(st.sampled_from(middle), max_size=max_events))
    if include is not None and include.model_fields["kind"].default not in ends:
        kinds.insert(draw(st.integers(0, len(kinds))), include)
    for kind in kinds:
        fields = draw(fields_of(kind, BASE_FIELDS, optional if kind is include else "some"))
        name = kind.model_fields["kind"].default
        purpose = fields.get("purpose", "agent")
        if name == "model_request":
            fields["request"] = draw(requests())
            waiting[purpose] = fields
        elif name == "model_response" and purpose in waiting:
            fields["step"] = waiting.pop(purpose)["step"]  # the response to that request
        elif name == "tool_started":
            started[fields["call_id"]] = fields
        elif name == "tool_finished":
            if started and draw(st.booleans()):
                first = started.pop(draw(st.sampled_from(sorted(started))))
                fields.update({k: first[k] for k in ("call_id", "tool", "arguments", "step")})
            elif fields["call_id"] in started:
                fields["call_id"] += "-own"
        drafts.append((kind, fields))
    drafts.append(ends_of("run_finished"))
    events = []
    moment = draw(timestamps)
    for seq, (kind, fields) in enumerate(drafts):
        events.append(kind(run_id=run_id, seq=seq, ts=moment, agent=agent, **fields))
        moment += timedelta(microseconds=draw(st.integers(0, 5_000)))
    return events


@st.composite
def requests(draw: st.DrawFn) -> dict[str, Any]:
    """A chat-completions request body: messages plus any parameters."""
    messages = draw(
        st.lists(
            st.fixed_dictionaries(
                {"role": st.sampled_from(["system", "user", "assistant", "tool"])},
                optional={"content": texts | st.none(), "name": texts},
            ),
            max_size=4,
        )
    )
    params = draw(st.dictionaries(texts.filter(lambda k: k != "messages"), json_values, max_size=3))
    return {"model": draw(texts), "messages": messages, **params}
