"""Where JSON text's escape sequences are, so that a mask never splits one.

Redaction rewrites text that is often JSON, or holds JSON (an HTML report's embedded data, a
tool result that is a JSON document cut short): there `>` is `\\u003e`, a newline `\\n`, a
quote `\\"`. A rule that masks from the middle of such a sequence leaves a backslash before
the mask (`\\[REDACTED]`), which no JSON parser accepts. Every span a rule masks is therefore
widened to whole escape sequences, and a fragment found next to a cut starts after one (the
`u003e` of `\\u003e` is not part of a token).

JSON inside a JSON string escapes its escapes: an inner `\\n` is `\\\\n` outside, an inner
`\\"` is `\\\\\\"`. So a sequence here is a whole run of backslashes with the letter (or `u` and
four hex digits) that follows it, whatever the run's length: splitting it anywhere would break
the document at some level. (A run before any other character is a sequence on its own.)
"""

from __future__ import annotations

_LETTERS = frozenset('"/bfnrtu')  # what may follow a backslash (`\\\\` is a longer run)
_HEX = frozenset("0123456789abcdefABCDEF")
_TAIL = 5  # the longest part of a sequence after its backslashes: `u` and four hex digits


def opens_escape(text: str, at: int) -> bool:
    """Does the backslash at `at` open an escape at this level of the document (an even
    number of backslashes before it), rather than end an escaped backslash (`\\\\`)?"""
    run = at
    while run > 0 and text[run - 1] == "\\":
        run -= 1
    return (at - run) % 2 == 0


def escape_around(text: str, at: int) -> tuple[int, int] | None:
    """The escape sequence that position `at` falls strictly inside (after its first
    backslash, before its end), as (start, end); None when `at` is inside none."""
    if at <= 0 or at >= len(text):
        return None
    back = text.rfind("\\", max(0, at - _TAIL - 1), at)
    if back < 0:
        return None
    start = back
    while start > 0 and text[start - 1] == "\\":
        start -= 1
    last = back
    while last + 1 < len(text) and text[last + 1] == "\\":
        last += 1
    end = _sequence_end(text, last)
    return (start, end) if start < at < end else None


def _sequence_end(text: str, last: int) -> int:
    """Where the sequence whose last backslash is at `last` ends."""
    kind = text[last + 1 : last + 2]
    if kind == "u":
        digits = text[last + 2 : last + 2 + 4]
        return last + 6 if len(digits) == 4 and all(c in _HEX for c in digits) else last + 1
    return last + 2 if kind and kind in _LETTERS else last + 1


def ends_escape(text: str, at: int) -> bool:
    """Does an escape sequence end right before position `at`?"""
    inside = escape_around(text, at - 1) if at > 1 else None
    return inside is not None and inside[1] == at


def widened(text: str, start: int, end: int) -> tuple[int, int]:
    """`start` and `end` moved outwards to the edges of any escape sequence they fall inside,
    so that replacing `text[start:end]` cannot leave part of one. A span that ends with
    backslashes in pairs (`…\\\\`, a secret ending in a backslash, escaped) ends after
    whole sequences already: widened, it would take the quote that closes its string."""
    inside = escape_around(text, start)
    if inside is not None:
        start = inside[0]
    if not _ends_in_pairs(text, start, end):
        inside = escape_around(text, end)
        if inside is not None:
            end = inside[1]
    return start, end


def _ends_in_pairs(text: str, start: int, end: int) -> bool:
    """Does `text[start:end]` end with an even, non-zero run of backslashes?"""
    run = end
    while run > start and text[run - 1] == "\\":
        run -= 1
    return run < end and (end - run) % 2 == 0


def after_escape(text: str, start: int) -> int:
    """`start`, or the end of the escape sequence it falls inside: where a fragment that
    begins at `start` really begins."""
    inside = escape_around(text, start)
    return start if inside is None else inside[1]
