"""JSON that other programs wrote, read within bounds: OTLP files and the JSON in attributes.

`loads` parses with orjson where orjson reads the text as JSON means it (fast), and with
Python's parser where only Python's does: a lone surrogate escape (`"\\ud83d"`, half an
emoji, which Python keeps and the store repairs and flags) and integers too long for orjson
to keep as integers (it turns them into floats without a word). Every integer must fit in 64
bits — OTLP's int64 and fixed64, and what the store keeps as a number — and nesting is
bounded by `MAX_DEPTH` levels (the bound suite and cassette files have). Anything else is a
`JsonBoundsError` (a ValueError) saying what is wrong; the caller says where.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from agentbench.yaml_source import MAX_DEPTH

INT_MIN, INT_MAX = -(2**63), 2**64 - 1
# A text's bytes with every digit made "0" and everything else but "-" made "a": a run of 20
# zeros is an integer orjson might not keep (past u64), "-" and 19 zeros one below i64. Digits
# in a string match too; they only send that text the slower way. (A translation and two
# substring searches run at memory speed, where a regex for digit runs crawls.)
_DIGIT_RUNS = bytes(48 if 48 <= i <= 57 else 45 if i == 45 else 97 for i in range(256))
_LONG_RUNS = (b"0" * 20, b"-" + b"0" * 19)


class JsonBoundsError(ValueError):
    """JSON beyond a bound: nesting, or an integer's size."""


def too_deep() -> JsonBoundsError:
    return JsonBoundsError(f"nested deeper than {MAX_DEPTH} levels of lists and objects")


def loads(text: str | bytes, *, walked: bool = False) -> Any:
    """The JSON value of `text`, within bounds: ValueError (`JsonBoundsError` for a bound,
    `UnicodeDecodeError` for bytes that are not UTF-8) when it is not.

    `walked=True` is for a caller that checks each part it uses as it walks the value (an OTLP
    document: a number where an integer belongs is refused there, a float or not), so nesting
    and integers are left to it and only the parsers' own limits apply (1,024 levels for
    orjson, Python's recursion).
    """
    data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    if not walked:
        runs = data.translate(_DIGIT_RUNS)
        if _LONG_RUNS[0] in runs or _LONG_RUNS[1] in runs:
            value = _python(text)
            _check_depth(value)
            return value
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        value = _python(text)  # its words for what is wrong, or a lone surrogate it keeps
    if not walked and data.count(b"[") + data.count(b"{") > MAX_DEPTH:
        _check_depth(value)
    return value


def _python(text: str | bytes) -> Any:
    if isinstance(text, bytes):
        text = text.decode("utf-8")  # strict: json.loads would guess UTF-16 from the bytes
    try:
        return json.loads(text, parse_int=_integer, parse_float=_finite, parse_constant=_not_json)
    except RecursionError:
        raise too_deep() from None


def _integer(digits: str) -> int:
    if len(digits.lstrip("-")) > 20:
        raise JsonBoundsError(f"the integer {_shown(digits)} does not fit in 64 bits")
    value = int(digits)
    if not INT_MIN <= value <= INT_MAX:
        raise JsonBoundsError(f"the integer {_shown(digits)} does not fit in 64 bits")
    return value


def _finite(digits: str) -> float:
    value = float(digits)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"the number {_shown(digits)} is beyond what a float holds")
    return value


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (Python's parser would take it)")


def _shown(digits: str) -> str:
    return digits if len(digits) <= 24 else f"{digits[:12]}…{digits[-6:]} ({len(digits)} digits)"


def _check_depth(value: Any) -> None:
    """Refuse containers nested deeper than MAX_DEPTH (the outermost is level 1)."""
    if type(value) is not dict and type(value) is not list:
        return
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise too_deep()
        for child in node.values() if type(node) is dict else node:
            if type(child) is dict or type(child) is list:
                stack.append((child, depth + 1))
