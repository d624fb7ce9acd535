"""`MessageView`: the messages of one model request, as a window on the run's conversation.

Every request of a run repeats all earlier messages plus a few new ones. Were each request
(kept in its `ModelRequest` event, and by `ScriptedModel`) to hold its own list, a run's
memory would grow with the square of its length. A view holds the system message, the run's
conversation list and how many of its messages the request had, so all requests of a run
share one list. The conversation is append-only (memory compaction replaces the list instead
of editing it; memory cuts only messages no request holds yet), so what a view shows never
changes.

A view is read-only and stands for the list it shows: it compares equal to that list, slices,
copies and pickles to lists, and serializes as a list in pydantic dumps. Consumers that need
a real list (the openai SDK, a cassette body, orjson) call `materialized`.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from itertools import chain, islice
from typing import Any, ClassVar, SupportsIndex, overload

from pydantic_core import SchemaSerializer, core_schema

Message = dict[str, Any]


class MessageView(Sequence[Message]):
    """`[system, *messages[:n]]`, without copying `messages` (n = its length when made)."""

    __slots__ = ("_messages", "_n", "_system")
    __hash__ = None  # type: ignore[assignment]  # equal to a list, so unhashable like one

    def __init__(self, system: Message | None, messages: list[Message]) -> None:
        self._system = system
        self._messages = messages
        self._n = len(messages)

    @classmethod
    def of(cls, system: Message | None, messages: list[Message], shown: int) -> MessageView:
        """The view of `messages[:shown]` (a view made earlier, `window()` giving these)."""
        view = cls.__new__(cls)
        view._system, view._messages, view._n = system, messages, shown
        return view

    def window(self) -> tuple[Message | None, list[Message], int]:
        """What the view is made of: its system message, the conversation, how many of its
        messages it shows."""
        return self._system, self._messages, self._n

    def _lead(self) -> int:
        return 0 if self._system is None else 1

    def __len__(self) -> int:
        return self._lead() + self._n

    @overload
    def __getitem__(self, index: SupportsIndex) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...

    def __getitem__(self, index: SupportsIndex | slice) -> Message | list[Message]:
        if isinstance(index, slice):
            return self.as_list()[index]
        position = index.__index__()
        length = len(self)
        if position < 0:
            position += length
        if not 0 <= position < length:
            raise IndexError("message index out of range")
        lead = self._lead()
        if position < lead:
            return self._system  # type: ignore[return-value]
        return self._messages[position - lead]

    def __iter__(self) -> Iterator[Message]:
        # islice: messages appended to the run after this request was made are not part of it.
        head = () if self._system is None else (self._system,)
        return chain(head, islice(self._messages, self._n))

    def __reversed__(self) -> Iterator[Message]:
        return reversed(self.as_list())

    def as_list(self) -> list[Message]:
        """A new list of the same message dicts (not copies of them)."""
        head = [] if self._system is None else [self._system]
        return [*head, *self._messages[: self._n]]

    @property
    def first(self) -> Message | None:
        """The first message shown (the system message, if any), or None if none is."""
        if self._system is not None:
            return self._system
        return self._messages[0] if self._n else None

    @property
    def has_system(self) -> bool:
        return self._system is not None

    @property
    def conversation_id(self) -> int:
        """The identity of the conversation list this view shows a prefix of."""
        return id(self._messages)

    def extends(self, other: MessageView) -> bool:
        """Whether this view shows `other`'s messages at the same positions, perhaps more
        after them (the system messages may differ), in O(1): the conversation only grows."""
        return (
            self._messages is other._messages
            and self._n >= other._n
            and (self._system is None) == (other._system is None)
        )

    def since(self, other: MessageView) -> list[Message]:
        """The messages this view shows after `other`'s, in O(new), for a view that
        `extends(other)`."""
        return self._messages[other._n : self._n]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, MessageView):
            if (
                other._messages is self._messages
                and other._system is self._system
                and other._n == self._n
            ):
                return True
            return self.as_list() == other.as_list()
        if isinstance(other, list):
            return len(other) == len(self) and self.as_list() == other
        return NotImplemented

    def __add__(self, other: object) -> list[Message]:
        if isinstance(other, list | MessageView):
            return [*self, *other]
        return NotImplemented

    def __radd__(self, other: object) -> list[Message]:
        if isinstance(other, list):
            return [*other, *self]
        return NotImplemented

    def __repr__(self) -> str:
        # Short on purpose: a run's result holds a view per request, so spelling each out
        # would make its repr grow with the square of the run's length — and Python 3.11's
        # `asyncio.run` (so `Runner.run_sync`) builds the repr of the value it returns, in
        # full, when it looks up its SIGINT handler. `list(view)` shows the messages.
        return f"MessageView({len(self)} messages)"

    # A copy is for changing: it is a list, as the view's own contents cannot change.
    def __copy__(self) -> list[Message]:
        return self.as_list()

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Message]:
        return copy.deepcopy(self.as_list(), memo)

    def __reduce__(self) -> tuple[Any, ...]:
        return (list, (self.as_list(),))

    # pydantic serializes a value of a field typed `Any` by looking for this attribute: a
    # dumped event (Python or JSON mode) holds a plain list, as it did before views.
    __pydantic_serializer__: ClassVar[SchemaSerializer] = SchemaSerializer(
        core_schema.any_schema(
            serialization=core_schema.plain_serializer_function_ser_schema(
                lambda view: view.as_list(),
                return_schema=core_schema.list_schema(core_schema.any_schema()),
            )
        )
    )


def materialized(request: dict[str, Any]) -> dict[str, Any]:
    """`request` with a real list of messages: a shallow copy if it held a view, else itself."""
    messages = request.get("messages")
    if isinstance(messages, MessageView):
        return {**request, "messages": messages.as_list()}
    return request


__all__ = ["MessageView", "materialized"]
