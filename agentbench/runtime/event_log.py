"""`EventLog`: a run's events, kept packed and made into pydantic events again when read.

A long run keeps every event it yields (`RunResult.events`). As pydantic models, one step's
four events and the records inside them (the model's `ChatResponse`, its `Usage` and
`ToolCall`s, the tool's `ToolResult`) cost ~3 KB, and ~20 objects the garbage collector
keeps walking. The log keeps each event packed (`runtime/packed.py`: one tuple of its field
values, the very objects, nothing copied; ~0.6 KB a step), without what it knows itself: the
run's id and agent, the event's kind, and its sequence number, which is its position; its
time goes to an array of doubles. Reading an event makes it again, field for field what was
appended. The loop's own events are packed as they are made (`make`), others when appended.

Reading makes a new object each time: an event is a value, and a change made to one read does
not show on the next (the events a run yields to its hooks are the objects built; the log
holds what they were when appended). An event that cannot be packed is kept as it is.

A long run's older events are frozen (`runtime/frozen_events.py`): once `KEPT_LIVE` newer
events follow a chunk of `FROZEN_CHUNK`, the chunk's packed tuples become one compressed
pickle, ~20 bytes an event and nothing for the garbage collector to walk. A run of fewer than
`KEPT_LIVE + FROZEN_CHUNK` events (a golden case's dozens) never freezes one. A frozen
event reads back equal, its values new objects rather than the run's own.
"""

from __future__ import annotations

import copy
from array import array
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from itertools import repeat
from typing import Any, SupportsIndex, TypeVar, overload

from agentbench.runtime.frozen_events import Conversations, freeze, thaw
from agentbench.runtime.packed import EVENT_MAKERS, event_maker, packer, shapes_of, unpack

E = TypeVar("E")
_PACKERS: dict[type, Any] = {}  # by event class, its `packed.packer`
# Events are frozen this many at a time (one pickle: the more, the less each costs), once
# this many newer ones follow them: the run's hooks and guards read the recent events.
FROZEN_CHUNK = 256
KEPT_LIVE = 256


class EventLog(Sequence[Any]):
    """The events of one run, in order; `log[i].seq == i`. Read-only to everyone but the
    run, which `append`s each event as it is made."""

    __slots__ = (
        "_agent",
        "_chunks",
        "_conversations",
        "_entries",
        "_run_id",
        "_settled",
        "_thawed",
        "_times",
    )
    __hash__ = None  # type: ignore[assignment]  # equal to a list, so unhashable like one

    def __init__(self, run_id: str, agent: str) -> None:
        self._run_id = run_id
        self._agent = agent
        self._entries: list[Any] = []
        # Each packed event's time as its POSIX timestamp: 8 bytes, not a 48-byte datetime;
        # 0 for an event kept whole. A double has the microseconds exactly (it reads back
        # as the same datetime) for times between 1834 and 2106; others are kept whole.
        self._times = array("d")
        # Entries before `_settled` are in `_chunks`, a chunk each FROZEN_CHUNK of them:
        # frozen bytes (their places in `_entries` None), or None if they could not be.
        self._settled = 0
        self._chunks: list[bytes | None] = []
        self._conversations: Conversations | None = None
        self._thawed: tuple[int, list[Any]] | None = None  # the chunk last read

    def append(self, event: Any) -> None:
        pack = _PACKERS.get(type(event))
        if pack is None:
            pack = _PACKERS[type(event)] = packer(type(event))
        entry = pack(event, self._run_id, self._agent, len(self._entries), self._times)
        if type(entry) is not tuple:
            self._times.append(0.0)
        self._entries.append(entry)
        if len(self._entries) - self._settled >= KEPT_LIVE + FROZEN_CHUNK:
            self._freeze_next()

    def make(self, cls: type[E], fields: dict[str, Any]) -> E:
        """Build the next event (what `records.built(cls, fields)` gives, so for values the
        run made itself: not validated) and append it, packed as it is made."""
        given = tuple(fields)
        make = EVENT_MAKERS.get((cls, given)) or event_maker(cls, given)
        made = make(fields, self._run_id, self._agent, self._entries, self._times)
        if len(self._entries) - self._settled >= KEPT_LIVE + FROZEN_CHUNK:
            self._freeze_next()
        return made  # type: ignore[no-any-return]

    def _freeze_next(self) -> None:
        start = self._settled
        end = start + FROZEN_CHUNK
        if self._conversations is None:
            self._conversations = Conversations()
        frozen = freeze(self._entries[start:end], self._conversations)
        self._chunks.append(frozen)
        if frozen is not None:
            self._entries[start:end] = repeat(None, FROZEN_CHUNK)  # places, holding nothing
        self._settled = end

    def _entry(self, position: int) -> Any:
        """The entry at `position`: packed or whole, thawed if it was frozen."""
        entry = self._entries[position]
        if entry is not None:
            return entry
        chunk, at = divmod(position, FROZEN_CHUNK)
        thawed = self._thawed
        if thawed is None or thawed[0] != chunk:
            frozen = self._chunks[chunk]
            assert frozen is not None and self._conversations is not None
            thawed = self._thawed = (chunk, thaw(frozen, self._conversations))
        return thawed[1][at]

    def _read(self, position: int) -> Any:
        entry = self._entry(position)
        if type(entry) is tuple:
            ts = datetime.fromtimestamp(self._times[position], UTC)
            return unpack(entry, self._run_id, self._agent, position, ts)
        return entry

    def __len__(self) -> int:
        return len(self._entries)

    @overload
    def __getitem__(self, index: SupportsIndex) -> Any: ...

    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...

    def __getitem__(self, index: SupportsIndex | slice) -> Any:
        if isinstance(index, slice):
            return [self._read(position) for position in range(len(self))[index]]
        position = index.__index__()
        if position < 0:
            position += len(self._entries)
        if not 0 <= position < len(self._entries):
            raise IndexError("event index out of range")
        return self._read(position)

    def __iter__(self) -> Iterator[Any]:
        return map(self._read, range(len(self._entries)))

    def __reversed__(self) -> Iterator[Any]:
        return map(self._read, reversed(range(len(self._entries))))

    def of_kind(self, cls: type[E]) -> Iterator[E]:
        """The events of class `cls` (or a subclass), without making the others again."""
        shapes = shapes_of(cls)
        for position in range(len(self._entries)):
            entry = self._entry(position)
            if type(entry) is tuple:
                if entry[0] in shapes:
                    yield self._read(position)
            elif isinstance(entry, cls):
                yield entry

    def __eq__(self, other: object) -> bool:
        if isinstance(other, EventLog | list):
            return len(self) == len(other) and list(self) == list(other)
        return NotImplemented

    def __add__(self, other: object) -> list[Any]:
        if isinstance(other, list | EventLog):
            return [*self, *other]
        return NotImplemented

    def __radd__(self, other: object) -> list[Any]:
        if isinstance(other, list):
            return [*other, *self]
        return NotImplemented

    def __repr__(self) -> str:
        # Short for the reason `MessageView.__repr__` gives: a long run's result is repr'd
        # whole by Python 3.11's `asyncio.run`.
        return f"EventLog({len(self)} events of {self._run_id})"

    # A copy is for changing, or for elsewhere: a list of the events.
    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return copy.deepcopy(list(self), memo)

    def __reduce__(self) -> tuple[Any, ...]:
        return (list, (list(self),))


__all__ = ["EventLog"]
