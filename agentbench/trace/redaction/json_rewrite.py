"""JSON text with only the values redaction changed rewritten, the rest byte for byte.

A tool call's arguments or a stored JSON column is parsed to be redacted by key; when something
was masked, the text is not dumped again (which would change separators, spacing, key order
and escapes) but patched where the masked scalars are, so a recording still reads as what was
sent (`{"user": "ada", "password": "[REDACTED]"}`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

import orjson

# One JSON scalar (string, number, literal), in document order: what a rewrite replaces.
_JSON_SCALAR = re.compile(r'"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null')


def rewritten(text: str, original: Any, redacted: Any) -> str:
    """`text` (the JSON `original` was parsed from) with only the values redaction changed
    rewritten: separators, spacing, key order and escapes stay byte for byte, so a masked tool
    call still reads as the model wrote it (`{"user": "ada", "password": "[REDACTED]"}`)."""
    try:
        pairs = list(_scalar_pairs(original, redacted))
    except (KeyError, ValueError, TypeError):  # not the same shape: nothing to keep
        return orjson.dumps(redacted).decode()
    tokens = list(_JSON_SCALAR.finditer(text))
    if len(tokens) != len(pairs):  # duplicate keys, say: the parse lost a value
        return orjson.dumps(redacted).decode()
    out: list[str] = []
    last = 0
    for token, (before, after) in zip(tokens, pairs, strict=True):
        if type(before) is type(after) and before == after:
            continue
        out += (text[last : token.start()], _encoded(after, ascii_only=token.group().isascii()))
        last = token.end()
    out.append(text[last:])
    return "".join(out)


def _scalar_pairs(original: Any, redacted: Any) -> Iterable[tuple[Any, Any]]:
    """(original, redacted) of every scalar, keys included, in document order (redaction
    keeps the shape: it only replaces scalars and keys, in place)."""
    if isinstance(original, dict):
        pairs = zip(original.items(), redacted.items(), strict=True)
        for (key, value), (new_key, new_value) in pairs:
            yield key, new_key
            yield from _scalar_pairs(value, new_value)
    elif isinstance(original, list):
        for before, after in zip(original, redacted, strict=True):
            yield from _scalar_pairs(before, after)
    else:
        yield original, redacted


def _encoded(value: Any, *, ascii_only: bool) -> str:
    return json.dumps(value, ensure_ascii=ascii_only)
