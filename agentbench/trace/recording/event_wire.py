"""Events on the wire to the recording process: packed, pickled, their messages sent once.

A recorded run's events are encoded where they happen (`WireWriter`, on the run's thread) and
turned into trace rows in another process (`WireReader`, see `recording.process`). What
crosses is a stream of pickled items, each taken when its event happens, so a value the run
changes later is recorded as it was, as the in-process recorder records it:

* an event as its packed tuple (`runtime.packed`: its field values, no pydantic object), with
  its run id, agent, position and time. Packed shapes are numbered per process, so every
  shape is described once (class and field names) before it is first used, and the reader
  adopts the writer's numbers;
* a request's `MessageView` as the messages its conversation gained since that
  conversation's last request: the reader keeps its own copy of each conversation, so a
  step costs its new messages, and views made there share their list as views do here;
* values that are not plain data (a tool's own object, a user's model or enum) as the JSON
  data the recorder would have made of them: the reader never imports user code, and what
  it stores is what the recorder in this process would store.

An event kept whole (not packable: a class of the user's) goes as a stand-in carrying its
fields and the payload the recorder stores for events it has no table for.

The stream is frames: the item's length and the hook it belongs to (0: the channel's own
items: shapes, results, flushes), then the item pickled. A hook's conversations are its own,
so the reader unpickles a frame with its hook's copies.
"""

from __future__ import annotations

import io
import pickle
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import IO, Any

import orjson
from pydantic import BaseModel

from agentbench.runtime import packed
from agentbench.runtime.message_view import Message, MessageView
from agentbench.trace import _json

# Modules whose classes the reader imports by name: everything else is sent as JSON data.
_KNOWN_MODULES = frozenset({"builtins", "datetime", "decimal", "uuid", "enum", "collections"})
# Fields every event has; the rest of an unknown event is its payload (as the recorder says).
_BASE_FIELDS = {"run_id", "seq", "ts", "agent", "kind", "step"}
_FRAME = struct.Struct("<II")  # the item's length, its hook
CHANNEL = 0  # the hook number of the channel's own items

# `.lists` and `.systems`: the conversations, and their last system messages, of the hook
# whose item is read.
_reading = threading.local()


def frame(hook: int, item: bytes) -> bytes:
    return _FRAME.pack(len(item), hook) + item


def frames(stream: IO[bytes]) -> Iterator[tuple[int, bytes]]:
    """(hook, item bytes) for each frame in `stream` until its end; a frame cut off (its
    writer killed while writing) ends it too."""
    while True:
        head = stream.read(_FRAME.size)
        if len(head) < _FRAME.size:
            return
        length, hook = _FRAME.unpack(head)
        item = stream.read(length)
        if len(item) < length:
            return
        yield hook, item


def frames_in(buffer: bytearray) -> list[tuple[int, bytes]]:
    """The whole frames at the start of `buffer`, taken out of it (a partial one stays)."""
    found = []
    at = 0
    while len(buffer) - at >= _FRAME.size:
        length, hook = _FRAME.unpack_from(buffer, at)
        end = at + _FRAME.size + length
        if end > len(buffer):
            break
        found.append((hook, bytes(buffer[at + _FRAME.size : end])))
        at = end
    del buffer[:at]
    return found


def _known(cls: type) -> bool:
    module = cls.__module__
    return module in _KNOWN_MODULES or module.startswith("agentbench.")


class _WirePickler(pickle.Pickler):
    """Plain data as pickle does; views as their new messages; anything else as JSON data."""

    def __init__(self, file: io.BytesIO) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        # id(list) -> [the list, its number, how many of its messages were sent]; each list
        # kept until the hook ends, so its id cannot be reused meanwhile.
        self.sent: dict[int, list[Any]] = {}
        # id(list) -> how many of its messages the item being pickled sends: counted as sent
        # once it pickled (an item that fails to leaves the counts as they were).
        self.sending: dict[int, int] = {}

    # Called only for values that are not exactly a builtin scalar or container.
    def reducer_override(self, obj: Any) -> Any:
        cls = type(obj)
        if cls is MessageView:
            return self._view(obj)
        if cls is type:
            return NotImplemented if _known(obj) else (_from_json, (_json.dumps_bytes(obj),))
        if not _known(cls):
            return _from_json, (_json.dumps_bytes(obj),)
        if isinstance(obj, BaseModel):
            # One of ours kept whole: rebuilt from its fields, each of which goes through
            # here (pydantic's own pickling would take any value as it is).
            return _model, (cls, obj.__dict__, obj.__pydantic_fields_set__)
        return NotImplemented

    def _view(self, view: MessageView) -> Any:
        system, messages, shown = view.window()
        sent = self.sent.get(id(messages))
        if sent is None:
            sent = self.sent[id(messages)] = [messages, len(self.sent), 0]
        start = self.sending.get(id(messages), sent[2])
        if shown <= start:  # messages a request holds never change: none is sent twice
            return _view, (sent[1], system, (), start, shown)
        self.sending[id(messages)] = shown
        return _view, (sent[1], system, messages[start:shown], start, shown)


def _view(number: int, system: Message | None, new: Any, start: int, shown: int) -> MessageView:
    lists = _reading.lists
    messages = lists.get(number)
    if messages is None:
        messages = lists[number] = []
    # The system message comes with every request (it may change at any step): one equal to
    # the conversation's last is that object again, as it is where the run made it, so the
    # recorder sees a request that only appended (`request_diff._only_appends`) and records
    # it in the time of what it appended, not of the whole conversation.
    systems = _reading.systems
    last = systems.get(number)
    if last is not None and system is not None and last == system:
        system = last
    else:
        systems[number] = system
    if new:
        if len(messages) != start:
            raise ValueError(
                f"conversation {number}: {len(new)} messages sent at {start}, "
                f"{len(messages)} received before"
            )
        messages.extend(new)
    return MessageView.of(system, messages, shown)


def _from_json(data: bytes) -> Any:
    return orjson.loads(data)


def _model(cls: type[BaseModel], fields: dict[str, Any], names: set[str]) -> BaseModel:
    made = cls.__new__(cls)
    object.__setattr__(made, "__dict__", fields)
    object.__setattr__(made, "__pydantic_fields_set__", set(names))
    object.__setattr__(made, "__pydantic_extra__", None)
    object.__setattr__(made, "__pydantic_private__", None)
    return made


@dataclass
class ForeignEvent:
    """An event of a class the recording process does not import: its fields, and what the
    recorder stores of it (`model_dump`)."""

    kind: str
    run_id: str
    seq: int
    ts: datetime
    agent: str
    fields: dict[str, Any]
    payload: dict[str, Any]

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["fields"][name]
        except KeyError:
            raise AttributeError(name) from None

    def model_dump(self, **_: Any) -> dict[str, Any]:
        return self.payload


def _foreign(event: Any) -> ForeignEvent:
    return ForeignEvent(
        kind=event.kind,
        run_id=event.run_id,
        seq=event.seq,
        ts=event.ts,
        agent=event.agent,
        fields={name: getattr(event, name) for name in type(event).model_fields},
        payload=event.model_dump(mode="json", exclude=_BASE_FIELDS),
    )


class WireWriter:
    """Encodes one hook's items (its conversations are its own). Not thread-safe: a hook is
    called from its run's loop."""

    __slots__ = ("_buffer", "_packers", "_pickler", "_times")

    def __init__(self) -> None:
        self._buffer = io.BytesIO()
        self._pickler = _WirePickler(self._buffer)
        self._times: list[float] = []
        self._packers: dict[type, Any] = {}

    def item(self, value: Any) -> bytes:
        """`value` pickled; each item stands alone (values may change between events)."""
        buffer = self._buffer
        buffer.seek(0)
        buffer.truncate()
        pickler = self._pickler
        try:
            pickler.dump(value)
            for key, shown in pickler.sending.items():
                pickler.sent[key][2] = shown
        finally:
            pickler.clear_memo()
            pickler.sending.clear()
        return buffer.getvalue()

    def event(self, event: Any) -> bytes:
        """An event's item: (run id, agent, seq, time, packed tuple) — or, for an event that
        cannot be packed, the event itself (or its stand-in) and no time."""
        cls = type(event)
        pack = self._packers.get(cls)
        if pack is None:
            pack = self._packers[cls] = packed.packer(cls)
        run_id, agent, seq = event.run_id, event.agent, event.seq
        entry = pack(event, run_id, agent, seq, self._times)
        if type(entry) is tuple:
            return self.item(("event", run_id, agent, seq, self._times.pop(), entry))
        whole = entry if _known(cls) else _foreign(event)
        return self.item(("event", run_id, agent, seq, None, whole))


def new_shapes(described: int) -> list[tuple[int, type, frozenset[str]]]:
    """The packed shapes this process numbered from `described` on (see `adopt_shape`)."""
    return [(n, *packed.describe_shape(n)) for n in range(described, packed.shape_count())]


class WireReader:
    """Decodes what `WireWriter`s encoded, each hook's conversations kept apart."""

    def __init__(self, *, adopt_shapes: bool) -> None:
        # In the writers' own process (recording after the recording process died) their
        # shape numbers are this process's already.
        self.adopt_shapes = adopt_shapes
        self._conversations: dict[int, dict[int, list[Message]]] = {}
        self._systems: dict[int, dict[int, Message | None]] = {}  # each one's last

    def item(self, hook: int, data: bytes) -> Any:
        """One item, read with `hook`'s conversations."""
        _reading.lists = self._conversations.setdefault(hook, {})
        _reading.systems = self._systems.setdefault(hook, {})
        try:
            return pickle.loads(data)
        finally:
            _reading.lists = _reading.systems = None

    @staticmethod
    def event(item: tuple[Any, ...]) -> Any:
        """The event an ("event", ...) item carries, made again."""
        _, run_id, agent, seq, ts, entry = item
        if ts is None:
            return entry
        return packed.unpack(entry, run_id, agent, seq, datetime.fromtimestamp(ts, UTC))

    def adopt(self, shapes: list[tuple[int, type, frozenset[str]]]) -> None:
        if self.adopt_shapes:
            for number, cls, names in shapes:
                packed.adopt_shape(number, cls, names)

    def forget(self, hook: int) -> None:
        """The hook ended: its conversations are not referred to again."""
        self._conversations.pop(hook, None)
        self._systems.pop(hook, None)
