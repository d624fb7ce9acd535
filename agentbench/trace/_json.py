"""JSON encoding for traces: one place that decides how values become JSON text.

Everything stored in a JSON column, written to the spool or hashed goes through these
functions, so the bytes are the same wherever a value is written. `canonical` sorts keys: it
is what request hashes and message comparisons are computed over.

Python text can hold what UTF-8 cannot: a lone surrogate, half of a UTF-16 pair (a tool or
model that cut an emoji in two, JSON's `"\\ud83d"` read by Python's parser). orjson, Arrow
and DuckDB refuse such text, so each function here that meets one stores the value
`storable` makes of it — every lone surrogate replaced by U+FFFD, an integer beyond 64 bits
written as its digits — rather than failing, and counts the repair per thread
(`repair_mark`, `Repairs.since`), so that the recorder can flag the run instead of losing it.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import re
import threading
from typing import Any, NamedTuple

import orjson
from pydantic import BaseModel

_CANONICAL = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS
_PLAIN = orjson.OPT_NON_STR_KEYS
# Under these options orjson refuses (TypeError) what `_fallback` or a subclass would turn
# into something else, so what it does dump is dumped as itself.
_NATIVE_ONLY = (
    orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)


# A surrogate code point in a Python str is always a lone one: a whole pair is one code point.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"
_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1  # what orjson (and DuckDB's JSON) take as numbers


class Repairs(NamedTuple):
    """How many texts and integers were changed to be stored (see `storable`)."""

    surrogates: int = 0  # strings (and keys) holding lone surrogates, each made well-formed
    big_integers: int = 0  # integers beyond 64 bits, stored as their decimal digits

    @classmethod
    def since(cls, mark: tuple[int, int]) -> Repairs:
        """The repairs this thread made after `repair_mark()` returned `mark`."""
        return cls(_counts.surrogates - mark[0], _counts.big_integers - mark[1])


class _Counts(threading.local):
    surrogates = 0
    big_integers = 0


_counts = _Counts()


def repair_mark() -> tuple[int, int]:
    """This thread's repairs so far, as a plain tuple (cheap: the recorder takes one before
    each event, and `Repairs.since(mark)` after it says what encoding the event changed)."""
    return (_counts.surrogates, _counts.big_integers)


def well_formed(text: str, *, counted: bool = True) -> str:
    """`text` as UTF-8 can hold it (counted as a repair when it changes, unless not
    `counted`): the two halves of a pair that arrived apart (an emoji split over two streamed
    chunks, then joined) become the one character they stand for, and each lone surrogate
    becomes U+FFFD. The same object when nothing needed changing."""
    if text.isascii() or _LONE_SURROGATE.search(text) is None:
        return text
    if counted:
        _counts.surrogates += 1
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def storable(value: Any, *, counted: bool = True) -> Any:
    """`value` as JSON-compatible data that UTF-8 JSON can hold: `plain(value)` with every lone
    surrogate in its strings and keys replaced by U+FFFD and integers beyond 64 bits as their
    decimal text. Each change is counted (`repair_mark`), unless not `counted` (a value made
    storable only to compare it with a stored one)."""
    kind = type(value)
    if kind is str:
        return well_formed(value, counted=counted)
    if kind is int:
        if _INT_MIN <= value <= _INT_MAX:
            return value
        if counted:
            _counts.big_integers += 1
        return str(value)
    if kind is dict:
        return {
            storable(k, counted=counted): storable(v, counted=counted) for k, v in value.items()
        }
    if kind is list or kind is tuple:
        return [storable(v, counted=counted) for v in value]
    converted = plain(value)
    if converted is not value:
        return storable(converted, counted=counted)
    if isinstance(value, str):  # a subclass plain() keeps (a str enum member is one above)
        return well_formed(str(value), counted=counted)
    if isinstance(value, int) and not isinstance(value, bool):
        return storable(int(value), counted=counted)
    return value


def plain(value: Any) -> Any:
    """`value` as JSON-compatible Python data (models dumped, tuples and sets as lists)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        return {k if isinstance(k, str) else str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [plain(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return plain(dataclasses.asdict(value))
    if isinstance(value, enum.Enum):
        return value.value
    return value


def _fallback(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return str(value)  # anything else is stored as its text rather than lost


def _dumped(value: Any, option: int) -> bytes:
    """orjson's bytes of `value`; of `storable(value)` when orjson refuses text or an integer
    it holds (the repair walks the value only then, so well-formed values cost nothing)."""
    try:
        return orjson.dumps(value, default=_fallback, option=option)
    except TypeError as refused:
        try:
            repaired = storable(value)
        except RecursionError:  # nested past what orjson takes anyway: its own error says so
            raise refused from None
        return orjson.dumps(repaired, default=_storable_fallback, option=option)


def _storable_fallback(value: Any) -> Any:
    return storable(_fallback(value))


def dumps(value: Any) -> str:
    """Compact JSON text, key order preserved."""
    return _dumped(value, _PLAIN).decode()


def dumps_bytes(value: Any) -> bytes:
    return _dumped(value, _PLAIN)


def canonical(value: Any) -> bytes:
    """Compact JSON bytes with sorted keys: equal values give equal bytes."""
    return _dumped(value, _CANONICAL)


def kept(value: Any) -> bytes:
    """`canonical(value)` for bytes that are kept (a request's messages, for the next diff):
    orjson's output holds a buffer of at least 4 KB (or up to twice its length), so it is
    copied to its own size (0.3 µs for a message) rather than kept at 4 KB — the two messages
    a step adds would cost 8 KB a step."""
    return memoryview(canonical(value)).tobytes()


def kept_native(value: Any) -> bytes | None:
    """`kept(value)` when `value` is plain JSON data all the way down (dicts, lists, str,
    numbers, bool, None — tuples, enums and UUIDs are also taken, orjson's own types); None
    when anything in it would need converting (a model, a dataclass, a date, a subclass of a
    builtin). One pass in C decides it, instead of walking the value in Python."""
    try:
        return memoryview(orjson.dumps(value, option=_CANONICAL | _NATIVE_ONLY)).tobytes()
    except TypeError:
        return None


def loads(text: str | bytes | None) -> Any:
    return None if text is None else orjson.loads(text)
