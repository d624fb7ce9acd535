"""Text cut before it got here, which may end or start in half a secret no rule matches whole.

A tool result the runtime truncated, a summary's head, a window around a change: at a cut —
the runtime's `…[truncated N of M chars]` marker or a bare `…` — the fragment next to it is
masked when it could be part of a secret: a piece of a known secret value, a token that starts
like one of the patterns (`sk-…`, after `Bearer `), or a run of letters and digits that looks
like a key — not a hex id (a commit SHA, a UUID, `run_3f9a…`): those name things, and a window
around a changed one must show it (a configured pattern still masks one that is a secret).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from agentbench.trace.redaction.json_escapes import after_escape, opens_escape, widened

# Where text was cut before it reached the redactor: the runtime's truncation marker (also as
# it looks inside JSON text), or a bare ellipsis after a head or before a tail.
ELLIPSIS, ESCAPED_ELLIPSIS = "…", "\\u2026"
ELLIPSES = (ELLIPSIS, ESCAPED_ELLIPSIS)
_MARKER_REST = re.compile(r"\[truncated [\d,]+ of [\d,]+ chars\]")  # after the ellipsis
_TOKEN_CHARS = r"[A-Za-z0-9_\-.+/=~]"
_TAIL_TOKEN = re.compile(_TOKEN_CHARS + r"+\Z")
_HEAD_TOKEN = re.compile(r"\A" + _TOKEN_CHARS + "+")
_AUTH_BEFORE = re.compile(r"\b(?:[Bb]earer|Basic)\s+\Z")
# The start of a default pattern's match, running to the cut: (part of) a secret. (At the end
# of an escape sequence, where `\b` cannot see the character it stands for: `_PARTIAL_AT`.)
_PARTIAL_AT = re.compile(r"(?:sk-|gh[pousr]_|xox[abprs]-|AKIA|eyJ)" + _TOKEN_CHARS + r"*\Z")
_PARTIAL_SECRET = re.compile(r"\b" + _PARTIAL_AT.pattern)
_MIN_PARTIAL = 4  # a piece of a known secret this long next to a cut is masked
_MIN_TOKEN_LIKE = 8
# Ids that are not secrets: hex in one case, possibly in dashed groups (a UUID), possibly after
# a word and `_` or `-` (`run_3f9a…`, `req-…`).
_HEX_ID = re.compile(r"(?:[A-Za-z]+[_-])?(?:[0-9a-f]+(?:-[0-9a-f]+)*|[0-9A-F]+(?:-[0-9A-F]+)*)")


def cut_pieces(text: str) -> list[str]:
    """`text` split at its cuts, the cuts kept: piece, mark, piece, mark, …, piece. A mark is
    the runtime's `\\n…[truncated N of M chars]` (the newline possibly escaped, the ellipsis
    possibly `\\u2026`) or a bare ellipsis. (Found with `str.find`: a regex split scans every
    position of a large document, ~10x slower.)"""
    found = sorted(at for mark in ELLIPSES for at in _positions(text, mark))
    pieces: list[str] = []
    last = 0
    for at in found:
        if at < last or (text.startswith("\\", at) and not opens_escape(text, at)):
            continue  # an escaped backslash, then `u2026`: no ellipsis
        start, end = at, at + (1 if text.startswith("…", at) else len("\\u2026"))
        rest = _MARKER_REST.match(text, end)
        newline = next(
            (n for n in ("\n", "\\n") if at >= len(n) and text.startswith(n, at - len(n))), None
        )
        if rest is not None and newline is not None and at - len(newline) >= last:
            start, end = at - len(newline), rest.end()
        pieces += (text[last:start], text[start:end])
        last = end
    pieces.append(text[last:])
    return pieces


def _positions(text: str, part: str) -> Iterable[int]:
    at = text.find(part)
    while at >= 0:
        yield at
        at = text.find(part, at + 1)


def _token_like(fragment: str) -> bool:
    """A run of letters and digits long enough to be (part of) a key or token — and not a
    hex id: a commit SHA, a UUID or `run_3f9a…` cut in a window names a thing, and masking it
    hid what changed (a configured pattern still masks one that is a secret)."""
    return (
        len(fragment) >= _MIN_TOKEN_LIKE
        and any(c.isdigit() for c in fragment)
        and any(c.isalpha() for c in fragment)
        and _HEX_ID.fullmatch(fragment) is None
    )


def masked_tail(piece: str, literals: Iterable[str], mask: str) -> str:
    """`piece` ends where the text was cut: mask a secret's first part there (`literals`: the
    known secrets' spellings, longest first)."""
    for secret in literals:
        for length in range(min(len(secret) - 1, len(piece)), _MIN_PARTIAL - 1, -1):
            if piece.endswith(secret[:length]):
                start, _ = widened(piece, len(piece) - length, len(piece))
                return piece[:start] + mask
    # Both patterns match only token characters running to the end, so searching from
    # the start of that last run finds what a search of the whole piece finds, without
    # trying every earlier position (quadratic over long runs). A run that begins in an
    # escape sequence (`\u003eline2`) begins after it.
    run = _HEAD_TOKEN.match(piece[::-1])
    start = len(piece) - (run.end() if run is not None else 0)
    tail = after_escape(piece, start)
    partial = _PARTIAL_SECRET.search(piece, tail)
    if partial is None and tail != start:
        partial = _PARTIAL_AT.match(piece, tail)
    if partial is not None:
        return piece[: partial.start()] + mask
    token = _TAIL_TOKEN.search(piece, tail)
    if token is not None and (
        _AUTH_BEFORE.search(piece, 0, token.start()) is not None or _token_like(token.group())
    ):
        return piece[: token.start()] + mask
    return piece


def masked_head(piece: str, literals: Iterable[str], mask: str) -> str:
    """`piece` starts where the text was cut: mask a secret's last part there."""
    for secret in literals:
        for length in range(min(len(secret) - 1, len(piece)), _MIN_PARTIAL - 1, -1):
            if piece.startswith(secret[-length:]):
                return mask + piece[widened(piece, 0, length)[1] :]
    token = _HEAD_TOKEN.match(piece)
    if token is not None and _token_like(token.group()):
        return mask + piece[token.end() :]
    return piece
