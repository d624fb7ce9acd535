"""Frozen events: a long run's older events kept as bytes, not as objects.

Packed (`runtime/packed.py`), a step's events still hold ~1.5 KB of Python objects — the
parsed arguments, the tool's data, the model's message and tool calls, their dicts — and
the garbage collector walks every container among them at each full collection, so a
1,000-step run spends ~20 µs a step just being walked. An `EventLog` therefore freezes its
events in chunks once they are well behind the run: one pickle of the chunk's packed
tuples, compressed (zlib's fastest level: a third of the size for ~0.5 µs an event), ~20
bytes an event which the collector never looks into. Reading a frozen event thaws its chunk
(~0.5 µs an event), and the last chunk thawed is kept for the next read.

Only plain data is frozen, so what is thawed equals what was frozen: the builtin
containers and scalars, enum members, dates and times, decimals, UUIDs, and classes by
name. A chunk holding anything else (a tool's own object, an event kept whole) stays as it
is. A request's messages (`MessageView`) are a window on the run's conversation, which
stays alive for the run anyway: a frozen view keeps its place in the conversation by
reference, so freezing never copies the conversation, and a thawed view shows the very
same list (`MessageView.extends` still holds between the two).
"""

from __future__ import annotations

import datetime
import decimal
import enum
import io
import pickle
import threading
import uuid
import zlib
from typing import Any

from agentbench.runtime.message_view import Message, MessageView

# Values pickled as they are: a class by its name, and values that reduce to their class and
# plain data and are rebuilt equal.
_PLAIN = (
    type,
    enum.Enum,
    datetime.date,
    datetime.time,
    datetime.timedelta,
    datetime.tzinfo,
    decimal.Decimal,
    uuid.UUID,
)
_thawing = threading.local()  # the conversations of the log being thawed, for `_view`


class NotPlainDataError(Exception):
    """A value that is not plain data: its chunk is not frozen."""


class Conversations:
    """The conversation lists a log's frozen views show, each kept once, by identity."""

    __slots__ = ("_at", "lists")

    def __init__(self) -> None:
        self.lists: list[list[Message]] = []
        self._at: dict[int, int] = {}  # id of a kept list -> its index (kept: ids stay unique)

    def index(self, messages: list[Message]) -> int:
        at = self._at.get(id(messages))
        if at is None:
            at = self._at[id(messages)] = len(self.lists)
            self.lists.append(messages)
        return at


class _Freezer(pickle.Pickler):
    """A pickler that refuses anything but plain data, and keeps views by reference."""

    def __init__(self, file: io.BytesIO, conversations: Conversations) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.conversations = conversations

    # Called only for values that are not exactly a builtin scalar or container: those
    # (nearly everything in an event) are pickled without a call back into Python.
    def reducer_override(self, obj: Any) -> Any:
        if type(obj) is MessageView:
            system, messages, shown = obj.window()
            return _view, (system, self.conversations.index(messages), shown)
        if obj is _view or isinstance(obj, _PLAIN):
            return NotImplemented  # the default: a class or function by its name
        raise NotPlainDataError(type(obj).__qualname__)


def freeze(entries: list[Any], conversations: Conversations) -> bytes | None:
    """`entries` as bytes, or None if any of them is not plain data (or cannot be pickled)."""
    buffer = io.BytesIO()
    try:
        _Freezer(buffer, conversations).dump(entries)
    except Exception:  # NotPlainDataError, or a class pickle cannot find by its name
        return None
    return zlib.compress(buffer.getbuffer(), 1)


def thaw(frozen: bytes, conversations: Conversations) -> list[Any]:
    """The entries `freeze` was given: equal values, new objects (views aside)."""
    previous = getattr(_thawing, "lists", None)
    _thawing.lists = conversations.lists
    try:
        return pickle.loads(zlib.decompress(frozen))  # type: ignore[no-any-return]
    finally:
        _thawing.lists = previous


def _view(system: Message | None, conversation: int, shown: int) -> MessageView:
    return MessageView.of(system, _thawing.lists[conversation], shown)


__all__ = ["Conversations", "NotPlainDataError", "freeze", "thaw"]
