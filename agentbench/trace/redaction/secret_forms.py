"""The ways a known secret value is written where redaction may meet it.

A secret learned from a tool argument (`pa"ss\\w0rd!x9`) is met again as it is, but also as
JSON text writes it (`pa\\"ss\\\\w0rd!x9`: a tool call's arguments, a stored request), with
non-ASCII characters as they are or as `\\u` escapes (`\\u00e9`, `\\ud83d\\ude00`: JSON written
ASCII-only), with `<`, `>` and `&` escaped too (JSON in a report's `<script>` tag), and escaped
once more when that JSON is itself inside a JSON string (a tool's result quoting a request).
`spellings` lists them, so a redactor searches for every one in the same single pass.
`leftovers` lists what a key-value rule can have left of a secret it met before the whole was
known: the rule masks a value up to where its kind of value ends (a space after `password:`, a
quote, a backslash), so `my password: correct horse battery staple` became `my password:
[REDACTED] horse battery staple`; once the whole is learned, the mask and the rest (` horse
battery staple`) go too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from functools import lru_cache

import orjson

from agentbench.trace.redaction.json_escapes import widened

_SCRIPT_UNSAFE = {ord(c): f"\\u{ord(c):04x}" for c in "<>&\u2028\u2029"}  # as report.embed
_DEPTH = 2  # text, JSON text, JSON text inside a JSON string
_MIN_LEFT = 4  # letters and digits a leftover holds at least (fewer: ordinary text)


def spellings(secrets: Iterable[str], depth: int = _DEPTH) -> tuple[str, ...]:
    """Each secret as it is written in text, in JSON text, and in JSON text inside JSON text
    (escaped once more) — with `depth` 3, once more still: a document holding such text —
    with non-ASCII characters as they are and as `\\u` escapes; longest first."""
    found: set[str] = set()
    for secret in secrets:
        found.update(_spelled(secret, depth))
    return tuple(sorted(found, key=len, reverse=True))


@lru_cache(maxsize=8_192)
def _spelled(secret: str, depth: int) -> frozenset[str]:
    forms = {secret}
    for _ in range(depth):
        forms |= {spelling for form in forms for spelling in _escaped(form)}
    return frozenset(forms)


def _escaped(text: str) -> tuple[str, ...]:
    """`text` as JSON string text: non-ASCII as it is, as `\\u` escapes, and as JSON for a
    `<script>` tag (and Go) writes it, `<`, `>`, `&`, U+2028 and U+2029 escaped too."""
    ascii_only = json.dumps(text)[1:-1]
    try:
        as_is = orjson.dumps(text).decode()[1:-1]
    except TypeError:  # a lone surrogate, which orjson refuses
        as_is = json.dumps(text, ensure_ascii=False)[1:-1]
    script_safe = as_is.translate(_SCRIPT_UNSAFE)
    if script_safe == as_is:
        return as_is, ascii_only
    return as_is, ascii_only, script_safe, ascii_only.translate(_SCRIPT_UNSAFE)


def leftovers(secrets: Iterable[str], values: Iterable[re.Pattern[str]]) -> tuple[str, ...]:
    """What a key-value rule leaves of each spelling of each secret after masking its first
    part: for each kind of value the rules read (`values`: the pattern of one, from its
    first character), the spelling from where that kind stops — moved to the end of an
    escape sequence it stops inside, as the mask is widened over it. A rest with fewer than
    `_MIN_LEFT` letters and digits is left out: after any mask, it could be ordinary text."""
    kinds = tuple(values)
    found: set[str] = set()
    for secret in secrets:
        found.update(_left(secret, kinds))
    return tuple(sorted(found, key=len, reverse=True))


@lru_cache(maxsize=8_192)
def _left(secret: str, values: tuple[re.Pattern[str], ...]) -> frozenset[str]:
    found: set[str] = set()
    for form in _spelled(secret, _DEPTH):
        for value in values:
            taken = value.match(form)
            if taken is None or taken.end() == len(form):  # none of it, or all of it
                continue
            rest = form[widened(form, 0, taken.end())[1] :]
            if sum(char.isalnum() for char in rest) >= _MIN_LEFT:
                found.add(rest)
    return frozenset(found)
