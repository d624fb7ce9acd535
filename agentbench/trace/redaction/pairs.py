"""Secret key/value pairs inside free text: `"password": "…"`, `api_key=…`, `token: …`.

Text that is not JSON, or not only JSON (a system prompt with a tool call echoed into it, a
URL, a log or YAML line, a Python repr), can still name a secret by its key. `masked_pairs`
tries the pair rules only where a secret key's last word occurs (a redactor's hints), masks
the values whose key is secret, and hands each value to the redactor to learn.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Callable, Iterable
from functools import lru_cache

from agentbench.trace.redaction.json_escapes import after_escape, widened

# Key/value pairs inside free text, e.g. a tool call echoed into the system prompt as
# `login({"user": "ada", "password": "…"})` (the value runs to its closing quote, past `\"`;
# with the quotes backslash-escaped, once or more — JSON in JSON — to the first backslash),
# the same as Python shows a dict (`{'password': '…'}`: a tool's result given to the model as
# its text), `?api_key=…` in a URL, a quoted assignment (`api_key='…'` in a Python repr,
# `TOKEN="…"` in a shell line), or a log or YAML line (`password: …`). Each is tried where a
# secret key's name starts (where its characters do, after any escape sequence:
# `\u003epassword=`), the quoted keys one character before it. An unquoted value runs through
# a mask in it (`password: <[REDACTED]>`, a known secret inside): the whole value goes, once.
_KEY = r"(?P<key>[A-Za-z0-9_.\-]{1,64})"
_QUOTED_VALUE = r'(?:[^"\\]|\\.)+'  # to the closing quote, escapes included
_SINGLE_QUOTED_VALUE = r"(?:[^'\\]|\\.)+"
_ESCAPED_QUOTED_VALUE = r'[^"\\]+'  # to the first backslash: the closing quote is escaped
_ASSIGNED_VALUE = r"[^'\"\\]+"
_UNQUOTED_CHAR = r"[^\s&\"',;)\]}]"
# Each kind of value above, for what a rule leaves of a secret it masked a part of
# (`secret_forms.leftovers`): where it stops in a secret's spelling, the rest is left.
VALUES = tuple(
    re.compile(value)
    for value in (
        _QUOTED_VALUE,
        _SINGLE_QUOTED_VALUE,
        _ESCAPED_QUOTED_VALUE,
        _ASSIGNED_VALUE,
        _UNQUOTED_CHAR + "+",
    )
)


@lru_cache(maxsize=8)
def _rules(mask: str) -> tuple[tuple[re.Pattern[str], int, bool], ...]:
    """The key/value rules for values masked with `mask`: (pattern, where it starts from the
    key, whether its value may hold escape sequences)."""
    unquoted = f"(?:{re.escape(mask)}|{_UNQUOTED_CHAR})+"
    return (
        (re.compile(rf'"{_KEY}"\s*:\s*"(?P<value>{_QUOTED_VALUE})'), -1, True),
        (re.compile(rf'"{_KEY}\\*"\s*:\s*\\*"(?P<value>{_ESCAPED_QUOTED_VALUE})'), -1, False),
        (re.compile(rf"'{_KEY}'\s*:\s*'(?P<value>{_SINGLE_QUOTED_VALUE})"), -1, True),
        (re.compile(rf"'{_KEY}'\s*:\s*\"(?P<value>{_QUOTED_VALUE})"), -1, True),
        (re.compile(rf"{_KEY}=(?P<value>{unquoted})"), 0, False),
        (re.compile(rf"{_KEY} ?= ?\\*(?P<q>['\"])(?P<value>{_ASSIGNED_VALUE})"), 0, False),
        (
            # An authorization scheme's name is not its secret: the patterns mask its token.
            re.compile(rf"{_KEY}:[ \t]*(?!(?:[Bb]earer|Basic)\s)(?P<value>{unquoted})"),
            0,
            False,
        ),
    )


def _unescaped(value: str) -> str:
    """A quoted value as the string it stands for (`pa\\"ss` is `pa"ss`), when it reads as
    JSON string text: what is learned, so that its every spelling is masked from then on."""
    if "\\" not in value:
        return value
    try:
        decoded = json.loads(f'"{value}"')
    except ValueError:
        return value
    return decoded if isinstance(decoded, str) else value


_KEY_CHARS = string.ascii_letters + string.digits + "_.-"  # what `key` above is made of


def masked_pairs(
    text: str,
    hints: Iterable[tuple[int, int]],
    mask: str,
    is_secret_key: Callable[[str], bool],
    learn: Callable[[str], None],
) -> str:
    """Mask the values of `"key": "value"` and `key=value` pairs whose key is secret. Only
    pairs around a hint (`hints`: where they occur, in order) are tried: a large document has
    many pairs, and few hints. Each masked value is given to `learn`."""
    spans: list[tuple[int, int]] = []
    done = 0
    for hint_start, hint_end in hints:
        if hint_start < done:
            continue
        before = text[max(0, hint_start - 63) : hint_start]
        key_start = after_escape(text, hint_start - len(before) + len(before.rstrip(_KEY_CHARS)))
        for pattern, offset, escaped in _rules(mask):
            at = key_start + offset
            found = pattern.match(text, at) if at >= 0 else None
            if (
                found is not None
                and found.end("key") >= hint_end
                and found.group("value") != mask  # masked already
                and is_secret_key(found.group("key"))
            ):
                value = found.group("value")
                learn(_unescaped(value) if escaped else value)
                spans.append(widened(text, *found.span("value")))
                done = found.end()
                break
    if not spans:
        return text
    out: list[str] = []
    last = 0
    for start, end in spans:
        out += (text[last : max(start, last)], mask)
        last = max(last, end)
    out.append(text[last:])
    return "".join(out)
