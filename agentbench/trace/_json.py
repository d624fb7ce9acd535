"""JSON encoding for traces: one place that decides how values become JSON text.

Everything stored in a JSON column, written to the spool or hashed goes through these
functions, so the bytes are the same wherever a value is written. `canonical` sorts keys: it
is what request hashes and message comparisons are computed over.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
from typing import Any

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


def dumps(value: Any) -> str:
    """Compact JSON text, key order preserved."""
    return orjson.dumps(value, default=_fallback, option=_PLAIN).decode()


def dumps_bytes(value: Any) -> bytes:
    return orjson.dumps(value, default=_fallback, option=_PLAIN)


def canonical(value: Any) -> bytes:
    """Compact JSON bytes with sorted keys: equal values give equal bytes."""
    return orjson.dumps(value, default=_fallback, option=_CANONICAL)


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
