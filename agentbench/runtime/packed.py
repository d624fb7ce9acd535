"""Records packed as tuples of their field values, and made into pydantic records again.

A pydantic v2 record carries its own `__dict__` (pydantic models cannot use CPython's
key-sharing dicts) and a handful of slots: ~350 bytes before any value, ~2 KB for the records
one step of a run keeps. Packed, a record is one tuple: the number of its *shape* (its class
and its set of fields given), then its field values, the very objects (nothing copied), with
the records nested in it (a response's usage and tool calls) packed too. A tuple of numbers,
strings and other such tuples is also one the garbage collector stops tracking, so a long
run's kept records cost it nothing. `unpack` makes the record again, field for field: same
values, same `model_fields_set`.

A record is packed only when that loses nothing: its class exactly one of `PACKABLE`, no
extra or private attributes, every field in its `__dict__`, nested records packable too. For
an event, the run's id, agent, kind and the event's position must be what the caller
(`EventLog`) knows, since they are left out; its time (UTC) goes to the caller's array of
times. Anything else is returned as it is, and a caller keeps it whole.
"""

from __future__ import annotations

import threading
import time
import types
import typing
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeAlias

from pydantic import BaseModel

from agentbench.runtime import events as ev
from agentbench.runtime.models import ChatResponse, ToolCall, Usage
from agentbench.runtime.records import SharedFieldNames, built, field_sources, shared_names
from agentbench.runtime.tools import ToolResult

# The records a run keeps per step, and the events.
PACKABLE: frozenset[type[BaseModel]] = frozenset(
    {
        ChatResponse,
        ToolCall,
        Usage,
        ToolResult,
        ev.ErrorInfo,
        *typing.get_args(typing.get_args(ev.Event)[0]),
    }
)
# An event's fields its log keeps apart (its time) or knows (the others).
_STAMP = ("run_id", "seq", "ts", "agent", "kind")


class _Shape(typing.NamedTuple):
    """What a packed tuple's first item stands for: the class and the fields it was given."""

    cls: type[BaseModel]
    names: frozenset[str] | SharedFieldNames  # the record's `model_fields_set`
    unpack: Callable[..., Any]


_SHAPES: list[_Shape | None] = []  # None: a place kept for a shape adopted later
_PACKERS: dict[type[BaseModel], Callable[..., Any]] = {}
_SHAPE_OF: dict[type[BaseModel], Callable[[set[str]], int]] = {}
_WIDTHS: dict[type[BaseModel], int] = {}  # items of a class's packed tuples
_UNPACKERS: dict[type[BaseModel], Callable[..., Any]] = {}
_NUMBERING = threading.Lock()  # held while a shape is given its number
EventMaker: TypeAlias = Callable[[dict[str, Any], str, str, list[Any], Any], Any]
# Per event class and names given (in the order given), its `event_maker`: read directly by
# the log, since it is looked up for every event of every run.
EVENT_MAKERS: dict[tuple[type[BaseModel], tuple[str, ...]], EventMaker] = {}


def packer(cls: type) -> Callable[..., Any]:
    """The function packing records of class `cls`: `pack(record)` gives a packed tuple, or
    `record` itself if it cannot be packed. For an event, `pack(event, run_id, agent, seq,
    times)` leaves out the fields its log knows and appends its time to `times` (its POSIX
    timestamp) — or appends nothing, and gives `event` itself."""
    return _PACKERS.get(cls) or (_packer(cls) if cls in PACKABLE else _kept_whole)


def unpack(
    packed: tuple[Any, ...],
    run_id: str | None = None,
    agent: str | None = None,
    seq: int | None = None,
    ts: datetime | None = None,
) -> Any:
    """The record `packed` was made from (an event given what its log left out)."""
    shape = _SHAPES[packed[0]]
    assert shape is not None
    return shape.unpack(packed, shape.names, run_id, agent, seq, ts)


def shape_count() -> int:
    """How many packed shapes this process has numbered (see `describe_shape`)."""
    return len(_SHAPES)


def describe_shape(number: int) -> tuple[type[BaseModel], frozenset[str]]:
    """What shape `number` (a packed tuple's first item) stands for in this process: the
    class and the field names given, as another process adopts it (`adopt_shape`)."""
    shape = _SHAPES[number]
    if shape is None:
        raise ValueError(f"no packed shape {number} in this process")
    return shape.cls, frozenset(shape.names)


def adopt_shape(number: int, cls: type[BaseModel], names: frozenset[str]) -> None:
    """Read packed tuples of another process's shape `number` (what `describe_shape` said
    there) here. Shape numbers are given in order of first use, so they differ between
    processes: a process reading another's packed records (the recording process) adopts
    its numbers, and must not pack records of its own with them. Raises ValueError if this
    process numbered a different shape `number`."""
    if cls not in PACKABLE:
        raise ValueError(f"{cls.__qualname__} records are never packed")
    if number < len(_SHAPES) and _SHAPES[number] is not None:
        known = _SHAPES[number]
        assert known is not None
        if known.cls is cls and frozenset(known.names) == names:
            return
        raise ValueError(f"packed shape {number} is {known.cls.__qualname__} here")
    packer(cls)
    if cls not in _UNPACKERS:
        raise ValueError(f"{cls.__qualname__} records are never packed")
    with _NUMBERING:
        _SHAPES.extend([None] * (number + 1 - len(_SHAPES)))
        _SHAPES[number] = _Shape(cls, names, _UNPACKERS[cls])


def event_maker(cls: type[BaseModel], given: tuple[str, ...]) -> EventMaker:
    """`make(fields, run_id, agent, entries, times)`: the event `built(cls, fields)` gives,
    with it packed appended to `entries` (its time to `times`) — or, if it cannot be
    packed, the event itself (and 0.0). One function, so an event made by the loop is not
    made and then read back to be packed. `fields` are the `given` names, run_id, seq and
    agent among them."""
    make = EVENT_MAKERS.get((cls, given))
    if make is None:
        make = EVENT_MAKERS[(cls, given)] = _event_maker(cls, given)
    return make


def _event_maker(cls: type[BaseModel], given: tuple[str, ...]) -> EventMaker:
    names = list(cls.model_fields)
    pack = _PACKERS.get(cls) or packer(cls)
    if not set(_STAMP) <= set(names) or pack is _kept_whole:

        def whole(
            fields: dict[str, Any], run_id: str, agent: str, entries: list[Any], times: Any
        ) -> Any:
            made = built(cls, fields)
            entries.append(made)
            times.append(0.0)
            return made

        return whole
    scope: dict[str, Any] = {
        "new": cls.__new__,
        "cls": cls,
        "setattr": object.__setattr__,
        "datetime": datetime,
        "utc": UTC,
        "read": unpack,
    }
    sources = dict(field_sources(cls, given, scope))
    scope["names"] = shared_names(cls, given)
    scope["shape"] = _SHAPE_OF[cls](scope["names"])
    clock = _reads_the_clock(cls, given)
    if clock:
        # The time now, as the field's factory (`events.utc_now`) gives it, made from the
        # POSIX timestamp the log keeps: no `timestamp()` worked out from it again (a
        # datetime made from a timestamp gives it back, and reads back the same).
        scope.update(clock=time.time, from_timestamp=datetime.fromtimestamp)
        sources["ts"] = "from_timestamp(f_time, utc)"
    # Each field's value in a local `f_<name>`, used by both the event and its packed form.
    values = "".join(f"    f_{name} = {source}\n" for name, source in sources.items())
    if clock:
        values = "    f_time = clock()\n" + values
    fail = "return whole(made, entries, times)"
    checks, packed = [], []
    kept = [name for name in names if name not in _STAMP]
    position = 1
    for name in kept:
        check, value, _, width = _field_code(cls, name, position, scope, f"f_{name}", fail)
        checks.append(check)
        packed.append(value)
        position += width
    exec(_WHOLE, scope)
    source = (
        "def make(fields, run_id, agent, entries, times):\n"
        f"{values}"
        "    made = new(cls)\n"
        f"    setattr(made, '__dict__', {{{', '.join(f'{n!r}: f_{n}' for n in names)}}})\n"
        "    setattr(made, '__pydantic_fields_set__', names)\n"
        "    setattr(made, '__pydantic_extra__', None)\n"
        "    setattr(made, '__pydantic_private__', None)\n"
        # What the log will know instead of the event must be what the event says (a time
        # from the field's own factory is a UTC datetime of now).
        "    if f_run_id is not run_id or f_agent is not agent or f_seq != len(entries):\n"
        f"        {fail}\n"
        f"{_TS_CHECK.format(fail=fail) if _ts_checked(cls, given) else ''}"
        f"{''.join(checks)}"
        f"    entries.append((shape, {', '.join(packed)}))\n"
        f"    times.append({'f_time' if clock else 'f_ts.timestamp()'})\n"
        "    return made\n"
    )
    exec(compile(source, f"<made {cls.__name__}>", "exec"), scope)
    made: EventMaker = scope["make"]
    return made


def _reads_the_clock(cls: type[BaseModel], given: tuple[str, ...]) -> bool:
    """Whether a made event's time is the time now, from events.py's own factory."""
    return "ts" not in given and cls.model_fields["ts"].default_factory is ev.utc_now


def _ts_checked(cls: type[BaseModel], given: tuple[str, ...]) -> bool:
    """Whether a made event's time needs checking: it was given, or the field's factory
    does not make UTC datetimes (events.py's makes `datetime.now(UTC)`)."""
    factory = cls.model_fields["ts"].default_factory
    if "ts" in given or factory is None:
        return True
    if factory is ev.utc_now:  # made by the maker itself, from the clock
        return False
    probe = factory()  # type: ignore[call-arg]
    return type(probe) is not datetime or probe.tzinfo is not UTC


_TS_CHECK = (
    "    if type(f_ts) is not datetime or f_ts.tzinfo is not utc or not 1900 < f_ts.year < 2100:\n"
    "        {fail}\n"
)
_WHOLE = (
    "def whole(made, entries, times):\n"
    "    entries.append(made)\n"
    "    times.append(0.0)\n"
    "    return made\n"
)


def shapes_of(cls: type) -> frozenset[int]:
    """The shapes (first items of packed tuples) of records of class `cls` or a subclass."""
    return frozenset(
        n for n, shape in enumerate(_SHAPES) if shape is not None and issubclass(shape.cls, cls)
    )


def _nested(annotation: Any) -> tuple[str, type[BaseModel]] | None:
    """("inline", cls) for a field holding a packable record (its packed items go inline
    in the record's own tuple: one tuple fewer), ("one", cls) for a record or None,
    ("list", cls) for a list of them; None for any other field, whose value is kept as it
    is."""
    if annotation in PACKABLE:
        return "inline", annotation
    origin = typing.get_origin(annotation)
    arguments = typing.get_args(annotation)
    if origin in (types.UnionType, typing.Union):
        records = [a for a in arguments if a in PACKABLE]
        if len(records) == 1 and set(arguments) == {records[0], type(None)}:
            return "one", records[0]
    if origin is list and len(arguments) == 1 and arguments[0] in PACKABLE:
        return "list", arguments[0]
    return None


def _shape_registry(
    cls: type[BaseModel], unpack_record: Callable[..., Any], by_id: dict[int, int]
) -> Callable[..., int]:
    """The function numbering `cls`'s shapes: one number per set of fields given. A shared
    set is known by identity (`by_id`, which the packer reads first): it lives as long as
    the process. Any other set is known by its contents."""
    by_names: dict[frozenset[str], int] = {}

    def shape_of(names: set[str]) -> int:
        # Under a lock: two threads numbering shapes at once must not take the same number.
        with _NUMBERING:
            if type(names) is SharedFieldNames:
                number = by_id.get(id(names))
                if number is None:
                    number = by_id[id(names)] = len(_SHAPES)
                    _SHAPES.append(_Shape(cls, names, unpack_record))
                return number
            key = frozenset(names)
            number = by_names.get(key)
            if number is None:
                number = by_names[key] = len(_SHAPES)
                _SHAPES.append(_Shape(cls, key, unpack_record))
            return number

    return shape_of


def _packer(cls: type[BaseModel]) -> Callable[..., Any]:
    """Write out `cls`'s pack and unpack functions, as `records.built` writes its makers:
    one tuple display and one dict display, no loop over fields."""
    names = list(cls.model_fields)
    if cls.model_config.get("extra") == "allow" or cls.__private_attributes__:
        # Extra or private attributes live outside `__dict__`: such records stay whole.
        _PACKERS[cls] = _kept_whole
        return _kept_whole
    stamped = set(_STAMP) <= set(names)
    scope: dict[str, Any] = {
        "cls": cls,
        "new": cls.__new__,
        "setattr": object.__setattr__,
        "shared": SharedFieldNames,
        "read": unpack,
        "read_at": _read_at,
        "datetime": datetime,
        "utc": UTC,
        "kind": cls.model_fields["kind"].default if stamped else None,
    }
    checks, packed, unpacked = [], [], {}
    kept = [name for name in names if not (stamped and name in _STAMP)]
    position = 1
    for name in kept:
        check, value, unpacked[name], width = _field_code(
            cls, name, position, scope, f"d[{name!r}]", "return record"
        )
        checks.append(check)
        packed.append(value)
        position += width
    _WIDTHS[cls] = position
    if stamped:
        unpacked.update(run_id="run_id", seq="seq", ts="ts", agent="agent", kind="kind")
        checks.insert(0, _STAMP_CHECK)
        checks.append("    times.append(ts.timestamp())\n")
    entries = ", ".join(f"{name!r}: {unpacked[name]}" for name in names)
    source = (
        "def pack(record, run_id=None, agent=None, seq=None, times=None):\n"
        "    if type(record) is not cls:\n"
        "        return record\n"
        "    d = record.__dict__\n"
        f"    if len(d) != {len(names)}:\n"
        "        return record\n"
        f"{''.join(checks)}"
        "    names = record.__pydantic_fields_set__\n"
        "    shape = by_id.get(id(names))\n"
        "    if shape is None:\n"
        "        shape = shape_of(names)\n"
        f"    return (shape, {', '.join(packed)})\n"
        "\n"
        "def unpack(p, names, run_id, agent, seq, ts, o=0):\n"
        "    made = new(cls)\n"
        f"    setattr(made, '__dict__', {{{entries}}})\n"
        # A record validated, not built, had a set of its own: it gets one again (an
        # assignment to the record read adds to its set, which must not reach the shape's).
        "    setattr(made, '__pydantic_fields_set__', names if type(names) is shared"
        " else set(names))\n"
        "    setattr(made, '__pydantic_extra__', None)\n"
        "    setattr(made, '__pydantic_private__', None)\n"
        "    return made\n"
    )
    exec(compile(source, f"<packed {cls.__name__}>", "exec"), scope)
    scope["by_id"] = {}
    _UNPACKERS[cls] = scope["unpack"]
    scope["shape_of"] = _SHAPE_OF[cls] = _shape_registry(cls, scope["unpack"], scope["by_id"])
    made: Callable[..., Any] = scope["pack"]
    _PACKERS[cls] = made
    return made


# What the log knows of an event must be what the event says; its time goes to the log's
# array of times (as a POSIX timestamp, a double: exact to the microsecond for times between
# 1834 and 2106), appended last, once nothing can fail.
_STAMP_CHECK = (
    "    if d['run_id'] is not run_id or d['agent'] is not agent or d['seq'] != seq"
    " or d['kind'] != kind:\n"
    "        return record\n"
    "    ts = d['ts']\n"
    "    if type(ts) is not datetime or ts.tzinfo is not utc or not 1900 < ts.year < 2100:\n"
    "        return record\n"
)


def _kept_whole(record: Any, *context: Any) -> Any:
    return record


def _field_code(
    cls: type[BaseModel], name: str, position: int, scope: dict[str, Any], source: str, fail: str
) -> tuple[str, str, str, int]:
    """For one field kept at `position` of the packed tuple, its value read by `source`:
    the code packing it (running `fail` if it cannot be), the packed value, the code
    unpacking it, and how many items of the packed tuple it takes."""
    nested = _nested(cls.model_fields[name].annotation)
    at = f"p[o + {position}]"
    if nested is None:
        return "", source, at, 1
    shape, inner = nested
    # The nested class's own packer: it returns a value of any other type as it is.
    scope[f"pack_{position}"] = _PACKERS.get(inner) or _packer(inner)
    value = f"v{position}"
    if shape == "inline":
        check = (
            f"    {value} = pack_{position}({source})\n"
            f"    if type({value}) is not tuple:\n"
            f"        {fail}\n"
        )
        # Its items one by one (its width is fixed): a plain tuple display, no splice.
        items = ", ".join(f"{value}[{index}]" for index in range(_WIDTHS[inner]))
        return check, items, f"read_at(p, o + {position})", _WIDTHS[inner]
    if shape == "one":
        check = (
            f"    {value} = pack_{position}({source})\n"
            f"    if type({value}) is not tuple and {value} is not None:\n"
            f"        {fail}\n"
        )
        return check, value, f"None if {at} is None else read({at})", 1
    # A list of records packs to a tuple of packed ones; a list of one (a turn's single
    # tool call, the common case) to that one's packed tuple, told apart by its first item.
    check = (
        f"    {value} = {source}\n"
        f"    if type({value}) is not list:\n"
        f"        {fail}\n"
        f"    if len({value}) == 1:\n"
        f"        {value} = pack_{position}({value}[0])\n"
        f"        if type({value}) is not tuple:\n"
        f"            {fail}\n"
        "    else:\n"
        f"        {value} = tuple(map(pack_{position}, {value}))\n"
        f"        for item in {value}:\n"
        "            if type(item) is not tuple:\n"
        f"                {fail}\n"
    )
    unpacked = f"[read({at})] if {at} and type({at}[0]) is int else list(map(read, {at}))"
    return check, value, unpacked, 1


def _read_at(packed: tuple[Any, ...], at: int) -> Any:
    """The record packed inline in `packed`, its shape at position `at`."""
    shape = _SHAPES[packed[at]]
    assert shape is not None
    return shape.unpack(packed, shape.names, None, None, None, None, at)


__all__ = [
    "EVENT_MAKERS",
    "PACKABLE",
    "adopt_shape",
    "describe_shape",
    "event_maker",
    "packer",
    "shape_count",
    "shapes_of",
    "unpack",
]
