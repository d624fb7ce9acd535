"""A run's `EventLog`: events kept packed, read back as the very records the run yielded.

`RunResult.events` holds every event of a run, packed (`runtime/packed.py`) so a long run's
memory stays small. Whatever was appended must read back field for field: same values,
`model_fields_set`, field order and time; an event that cannot be packed is kept whole; a
read is an independent record; and the log behaves as the list it replaced.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import enum
import gc
import operator
import pickle
import tracemalloc
import uuid
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest
from event_strategies import runs
from hypothesis import HealthCheck, given, settings

from agentbench import Agent, Context, Limits, RunContext, Runner, ScriptedModel, ToolCall, tool
from agentbench.runtime import event_log
from agentbench.runtime.event_log import EventLog
from agentbench.runtime.events import (
    ContextChanged,
    ModelRequest,
    ModelResponse,
    ToolFinished,
    ToolStarted,
)
from agentbench.runtime.message_view import MessageView
from agentbench.runtime.models import ChatResponse, Usage
from agentbench.runtime.tools import ToolResult

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop


@tool(effect="read_only")
def lookup(n: int) -> dict[str, Any]:
    """Look up item n."""
    return {"n": n, "name": f"item {n}"}


def _same(read: Any, made: Any) -> None:
    """`read` is `made` again: equal, the same dump, fields set, field order and time."""
    assert type(read) is type(made)
    assert read == made
    assert read.model_dump(mode="json") == made.model_dump(mode="json")
    assert read.model_fields_set == made.model_fields_set
    assert type(read.model_fields_set) is type(made.model_fields_set)
    assert list(read.__dict__) == list(made.__dict__)
    assert read.ts == made.ts and read.ts.tzinfo is made.ts.tzinfo


async def _run(hooked: list[Any]) -> Any:
    script = [
        ToolCall("lookup", {"n": 1}),
        [ToolCall("lookup", {"n": 1}), ToolCall("missing", {})],  # repeated; rejected
        ToolCall("lookup", '{"n": '),  # unparseable arguments
        "done",
    ]
    agent = Agent(name="shop", tools=[lookup], limits=Limits(repeat_warn_at=2))
    result = await Runner.run(agent, "go", model=ScriptedModel(script), hooks=[hooked.append])
    assert result.completed
    return result


async def test_a_runs_events_read_back_as_the_run_made_them() -> None:
    hooked: list[Any] = []
    result = await _run(hooked)
    assert isinstance(result.events, EventLog)
    assert len(result.events) == len(hooked)
    for read, made in zip(result.events, hooked, strict=True):
        _same(read, made)
    # Records nested in events too: a response's usage and tool calls, a tool's result.
    response = next(e for e in result.events if isinstance(e, ModelResponse)).response
    assert type(response) is ChatResponse and type(response.usage) is Usage
    assert all(type(call) is ToolCall for call in response.tool_calls)
    started = next(e for e in result.events if e.kind == "tool_started")
    finished = next(e for e in result.events if e.kind == "tool_finished")
    assert type(finished.result) is ToolResult
    assert finished.result.data == {"n": 1, "name": "item 1"}
    # One arguments dict shared by a call's start and finish, as the run made them.
    assert finished.arguments is started.arguments


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=runs("run_prop", max_events=8))
def test_any_event_appended_reads_back_the_same(events: list[Any]) -> None:
    log = EventLog("run_prop", events[0].agent)
    for event in events:
        log.append(event)
    for read, made in zip(log, events, strict=True):
        _same(read, made)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=runs("run_prop", max_events=12))
def test_any_event_frozen_reads_back_the_same(events: list[Any]) -> None:
    with pytest.MonkeyPatch.context() as patch:  # freeze in chunks of 2, behind the last 2
        patch.setattr(event_log, "FROZEN_CHUNK", 2)
        patch.setattr(event_log, "KEPT_LIVE", 2)
        log = EventLog("run_prop", events[0].agent)
        for event in events:
            log.append(event)
        for read, made in zip(log, events, strict=True):
            _same(read, made)
        for read, made in zip(reversed(log), reversed(events), strict=True):
            _same(read, made)


def test_what_cannot_be_packed_is_kept_whole() -> None:
    class Tagged(ToolStarted):
        pass

    ts = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    fields = {"agent": "a", "step": 1, "call_id": "c", "tool": "t", "arguments": {}}
    odd = [
        Tagged(run_id="r", seq=0, ts=ts, **fields),  # a subclass
        ToolStarted(run_id="other", seq=1, ts=ts, **fields),  # another run's
        ToolStarted(run_id="r", seq=7, ts=ts, **fields),  # not at its position
        ToolStarted(run_id="r", seq=3, ts=ts.astimezone(timezone(timedelta(hours=2))), **fields),
        ToolStarted(run_id="r", seq=4, ts=datetime(2200, 1, 1, tzinfo=UTC), **fields),
    ]
    log = EventLog("r", "a")
    for event in odd:
        log.append(event)
    assert all(read is made for read, made in zip(log, odd, strict=True))


async def test_a_read_event_is_independent_of_the_log() -> None:
    result = await _run([])
    first = result.events[3]
    assert isinstance(first, ToolStarted)
    first.tool = "renamed"
    first.arguments["n"] = first.arguments["n"]  # values are the run's objects, not copies
    assert result.events[3].tool == "lookup"
    assert "kind" not in result.events[3].model_fields_set
    started = result.events[0]  # validated, not built: a set of its own each read
    started.model = "changed"
    assert result.events[0].model == "scripted"
    assert result.events[0].model_fields_set is not started.model_fields_set


async def test_the_log_behaves_as_the_list_it_replaced() -> None:
    hooked: list[Any] = []
    log = (await _run(hooked)).events
    assert log == hooked and hooked == log and log != hooked[:-1]
    assert log[-1] == hooked[-1] and log[-1].kind == "run_finished"
    assert log[2:5] == hooked[2:5] and log[::-3] == hooked[::-3]
    assert list(reversed(log)) == hooked[::-1]
    assert operator.add(log, hooked[:1]) == [*hooked, hooked[0]]
    assert operator.add(hooked[:1], log) == [hooked[0], *hooked]
    assert [e.seq for e in log] == list(range(len(log)))
    assert log.index(hooked[4]) == 4 and hooked[4] in log
    for copied in (copy.copy(log), copy.deepcopy(log), pickle.loads(pickle.dumps(log))):
        assert type(copied) is list and copied == hooked
    assert repr(log).startswith("EventLog(") and len(repr(log)) < 80
    assert list(log.of_kind(ContextChanged)) == [e for e in hooked if isinstance(e, ContextChanged)]
    assert list(log.of_kind(ToolStarted)) == [e for e in hooked if e.kind == "tool_started"]
    try:
        log[len(log)]
    except IndexError:
        pass
    else:
        raise AssertionError("reading past the end must raise IndexError")


def test_a_long_runs_events_cost_little_memory() -> None:
    """What a step's events keep (four events, a response with its usage and tool call, a
    tool result, and what only they hold: the request, the parsed arguments, the tool's data)
    is ~1.5 KB packed; it was ~4 KB as pydantic records. The conversation (~1 KB a step) is
    not counted. Sizes, not times."""
    steps = 300
    script = [ToolCall("lookup", {"n": i}) for i in range(steps)] + ["done"]
    agent = Agent(
        name="bench",
        tools=[lookup],
        state_summary=False,
        limits=Limits(max_iterations=steps + 1),
    )
    gc.collect()
    tracemalloc.start()
    try:
        result = asyncio.run(Runner.run(agent, "go", model=ScriptedModel(script)))
        gc.collect()
        with_events = tracemalloc.get_traced_memory()[0]
        result.events = []  # what the events alone kept
        gc.collect()
        events = with_events - tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert result.completed
    assert events / steps < 2_000, f"{events / steps:.0f} bytes of events a step"


@tool
def empty_cart(ctx: RunContext) -> str:
    """Empty the cart."""
    ctx.delete("cart")
    return "emptied"


async def test_a_session_variable_removed_in_one_run_is_gone_for_the_next() -> None:
    # The conversation reads the removals back from the first run's packed events.
    shop = Agent(name="shop", tools=[empty_cart])
    model = ScriptedModel([ToolCall("empty_cart", {}), "cart emptied", "nothing to pay"])
    result = await Runner.run_chain(
        [shop, Agent(name="checkout")],
        "empty it",
        model=model,
        context=Context(session={"shop.cart": "3 items", "shop.user": "ann"}),
    )
    assert result.completed
    removed = [e for e in result.runs[0].events if e.kind == "context_changed"]
    assert [(e.op, e.key) for e in removed] == [("remove", "shop.cart")]
    assert result.context.session == {"shop.user": "ann"}


# A long run's older events are frozen (`runtime/frozen_events.py`) once enough newer ones
# follow them; these runs are long enough that most of their events are.
LONG = 400


def _long_run(tool: Any, steps: int = LONG) -> tuple[Any, list[Any]]:
    hooked: list[Any] = []
    agent = Agent(
        name="long",
        tools=[tool],
        limits=Limits(max_iterations=steps + 1, repeat_warn_at=steps + 2, repeat_stop_at=steps + 3),
    )
    script = [ToolCall(tool.name, {"n": i}) for i in range(steps)] + ["done"]
    result = Runner.run_sync(agent, "go", model=ScriptedModel(script), hooks=[hooked.append])
    assert result.completed, result.error
    assert len(result.events) > 4 * steps
    return result, hooked


class Grade(enum.Enum):
    GOOD = "good"


@tool(effect="read_only")
def dated(n: int) -> dict[str, Any]:
    """Item n, with values pickle must rebuild as they were."""
    return {
        "n": n,
        "at": datetime(2026, 1, 2, tzinfo=UTC) + timedelta(seconds=n),
        "price": Decimal("4.50"),
        "grade": Grade.GOOD,
        "pair": (n, [n]),
        "id": uuid.UUID(int=n),
        "raw": b"\x00" * (n % 3),
    }


def test_a_long_runs_frozen_events_read_back_as_the_run_made_them() -> None:
    result, hooked = _long_run(dated)
    log = result.events
    for read, made in zip(log, hooked, strict=True):
        _same(read, made)
    first = next(log.of_kind(ToolFinished))
    assert first.result.data == next(e for e in hooked if e.kind == "tool_finished").result.data
    assert type(first.result.data["at"]) is datetime and first.result.data["grade"] is Grade.GOOD
    assert type(first.result.data["pair"]) is tuple
    # Read in any order, and by kind, without making the other events.
    assert list(reversed(log)) == hooked[::-1]
    assert log[5:900:7] == hooked[5:900:7]
    assert list(log.of_kind(ToolFinished)) == [e for e in hooked if e.kind == "tool_finished"]
    # A frozen request's messages are still a window on the run's one conversation.
    read, made = log[1], hooked[1]
    assert isinstance(read, ModelRequest) and read.request == made.request
    view, original = read.request["messages"], made.request["messages"]
    assert isinstance(view, MessageView) and view.extends(original) and original.extends(view)
    assert list(view) == list(original)


@dataclasses.dataclass
class Item:
    n: int


@tool(effect="read_only")
def object_lookup(n: int) -> Item:
    """Item n, as the tool's own object."""
    return Item(n)


def test_events_holding_a_tools_own_objects_stay_as_they_are() -> None:
    result, hooked = _long_run(object_lookup)
    finished = [e for e in result.events if e.kind == "tool_finished"]
    made = next(e for e in hooked if e.kind == "tool_finished")
    assert finished[0].result.data is made.result.data  # not frozen: the very object
    assert [e.result.data for e in finished] == [Item(n) for n in range(LONG)]
    for read, made in zip(result.events, hooked, strict=True):
        _same(read, made)


def test_a_long_runs_frozen_events_cost_the_collector_nothing() -> None:
    """Frozen, a step's events are ~250 bytes of bytes objects the garbage collector does
    not track; live, ~1.5 KB holding ~8 containers it walks at every full collection."""
    steps = 1_200
    result, hooked = _long_run(lookup, steps=steps)
    hooked.clear()
    gc.collect()
    tracked = len(gc.get_objects())
    result.events = []  # what only the events held
    gc.collect()
    freed = tracked - len(gc.get_objects())
    # Left live: the last 256 to 511 events, ~2 containers each.
    assert freed < 2 * 512 + steps // 10, f"{freed / steps:.2f} tracked objects a step"
