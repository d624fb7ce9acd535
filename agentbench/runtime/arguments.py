"""Tolerant parsing of the argument JSON a model sends with a tool call.

Models wrap JSON in code fences, prefix it with prose, or emit an empty string for a call
with no parameters. We accept those shapes and nothing looser: if no JSON object can be
found, the caller gets a precise reason to feed back to the model.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

_LONG_DIGITS = re.compile(r"\d{19}")
_NOT_READ = object()
_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)


class ArgumentsParseError(ValueError):
    """The arguments text holds no JSON object; the message says why, for the model."""


def parse_arguments(raw: str | dict[str, Any] | None, *, what: str = "arguments") -> dict[str, Any]:
    """Return the JSON object in `raw` as a dict, or raise ArgumentsParseError saying why."""
    if isinstance(raw, dict):
        return raw
    text = (raw or "").strip()
    if not text:
        return {}
    fenced = _FENCE.match(text) if text[0] == "`" else None  # stripped: a fence starts it
    if fenced:
        text = fenced.group(1).strip()
    value = _fast_loads(text)
    if value is _NOT_READ:
        value = _loads(text, what)
    if not isinstance(value, dict):
        raise ArgumentsParseError(
            f"{what} must be a JSON object, got {type(value).__name__}: {text[:80]}"
        )
    return value


def _fast_loads(text: str) -> Any:
    """What `json.loads` reads `text` to, read by orjson in a tenth of the time, or _NOT_READ.

    orjson refuses what json may still read (NaN, lone surrogates, prose around the JSON),
    and reads integers past 64 bits as floats, so text with 19 digits in a row goes to json.
    """
    if _LONG_DIGITS.search(text):
        return _NOT_READ
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return _NOT_READ


def _loads(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as first_error:
        value = _first_object(text)
        if value is None:
            raise ArgumentsParseError(
                f"{what} are not valid JSON: {first_error.msg} at line {first_error.lineno} "
                f"column {first_error.colno}"
            ) from None
        return value


def _first_object(text: str) -> dict[str, Any] | None:
    """The first decodable JSON object embedded in `text`, if any."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
            continue
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    return None
