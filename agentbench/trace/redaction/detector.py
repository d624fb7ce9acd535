"""The rules compiled: one pass that finds every secret in a text, and a quick "holds none".

`compile_rules` turns `RedactionRules` and the secret values a redactor knows (configured,
from the environment, learned) into `CompiledRules`: every known value in each of its
spellings (see `secret_forms`) and every pattern as one alternation, tried only where one of
its literal triggers occurs; the secret keys' last words as hints, where a key/value pair may
be; and one regex over UTF-8 bytes that finds any tell, cut mark or hint, so that a document
with none of them is known clean without being parsed (`clean_text`). Compiling is most of
what building a redactor costs, so the redactor shares the result between runs.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable
from dataclasses import dataclass

from agentbench.trace.redaction.cuts import ELLIPSES, ELLIPSIS, ESCAPED_ELLIPSIS
from agentbench.trace.redaction.json_escapes import ends_escape
from agentbench.trace.redaction.pairs import VALUES
from agentbench.trace.redaction.rules import (
    MIN_SECRET_CHARS,
    PATTERN_TELLS,
    PATTERN_TRIGGERS,
    RedactionRules,
)
from agentbench.trace.redaction.secret_forms import leftovers, spellings

_WORD_CHARS = frozenset(string.ascii_lowercase + string.digits)  # what `key_words` keeps
# The only non-ASCII characters whose lowercase holds ASCII letters (İ → "i̇", the Kelvin sign
# → "k"); a test checks this against the running Python's Unicode tables.
_LOWER_TO_ASCII = ("\u0130", "\u212a")
_AFTER_ESCAPE = 8_192  # the longest match looked for right after an escape sequence


@dataclass(frozen=True)
class CompiledRules:
    """What a `Redactor` compiles from its rules and the secret values it knows: where the
    secrets are in a text, where secret keys' hints are, and whether a document holds none."""

    hints: tuple[str, ...]
    # The hints `clean` looks for at the end of a word: those ending in another hint are
    # left out (`apikey` ends a word only where `key` does).
    end_hints: tuple[str, ...]
    hint_pattern: re.Pattern[str]
    literals: tuple[str, ...]  # each known value's spellings, longest first
    known_groups: int  # the alternatives of `secrets` that are known values, not patterns
    secrets: re.Pattern[str]
    triggers: re.Pattern[str] | None
    tells: re.Pattern[str] | None  # what `clean` searches for (None when `triggers` is)
    # One pass over UTF-8 bytes finding any of `tells`, a cut mark or an end hint.
    scan: re.Pattern[bytes]
    scannable: bool
    reach: int  # the longest text one of `clean`'s tests reads past a position

    def matches(self, text: str) -> list[tuple[re.Match[str], int]]:
        """The matches of the secret values and patterns, in order, not overlapping, each
        with where its string starts in `text` (a match right after an escape sequence is
        made in a window starting there: a pattern's `\\b` would see the sequence's last
        letter, `e` of `\\u003e`, instead of the `>` it stands for). Every match contains a
        trigger and starts at it (or one character before: `Bearer` is found by `earer`), so
        the combined regex is tried only there, not at every position of the text."""
        if self.triggers is None:
            return [(m, 0) for m in self.secrets.finditer(text) if m.end() > m.start()]
        found: list[tuple[re.Match[str], int]] = []
        done = 0
        for trigger in self.triggers.finditer(text):
            for at in (trigger.start() - 1, trigger.start()):
                if at < done:
                    continue
                match, offset = self.secrets.match(text, at), 0
                if match is None and ends_escape(text, at):
                    match, offset = self.secrets.match(text[at : at + _AFTER_ESCAPE]), at
                if match is not None and match.end() > match.start():
                    found.append((match, offset))
                    done = offset + match.end()
                    break
        return found

    def is_pattern(self, match: re.Match[str]) -> bool:
        """Did a pattern make this match (not a known value)? Its secret is to be learned."""
        return int((match.lastgroup or "")[1:] or 0) >= self.known_groups

    def hint_spans(self, text: str) -> list[tuple[int, int]]:
        """Where the hints occur, in order (`str.find` over lowered text: a regex alternation
        with IGNORECASE is ~10x slower over a large document)."""
        lowered = text.lower()
        if len(lowered) != len(text):  # lowering changed lengths (rare letters): positions differ
            return [m.span() for m in self.hint_pattern.finditer(text)]
        spans = []
        for hint in self.hints:
            at = lowered.find(hint)
            while at >= 0:
                spans.append((at, at + len(hint)))
                at = lowered.find(hint, at + 1)
        return sorted(spans)

    def clean_text(self, text: str, data: bytes | None = None) -> bool:
        """`Redactor.clean` of `text` (`data`: its UTF-8 bytes, when the caller has them)."""
        # Hints are ASCII. Ignoring ASCII case in the text's UTF-8 bytes finds the same ones
        # as lowering the text, each followed by the same kind of character, unless the text
        # holds a character whose lowercase is ASCII. One pass of `scan` then looks for
        # every tell, cut mark and hint at once.
        if text.isascii() or not (_LOWER_TO_ASCII[0] in text or _LOWER_TO_ASCII[1] in text):
            data = text.encode("utf-8", "surrogatepass") if data is None else data
            return self.scan.search(data) is None
        if self.tells is not None and self.tells.search(text) is not None:
            return False
        if ELLIPSIS in text or ESCAPED_ELLIPSIS in text:
            return False
        return not _ends_a_word(text.lower(), self.end_hints, _WORD_CHARS)


def secret_span(match: re.Match[str]) -> tuple[int, int]:
    """What a match masks, in its string: a pattern's `secret` group, else all of it."""
    secret = f"s{match.lastgroup or ''}"  # the alternative `p3` keeps its secret in `sp3`
    if secret in match.re.groupindex and match.group(secret) is not None:
        return match.span(secret)
    return match.span()


def compile_rules(
    rules: RedactionRules, key_rules: frozenset[tuple[str, ...]], values: set[str]
) -> CompiledRules:
    # A secret key ends with a rule's words, so its text holds the rule's last word: where
    # none occurs (most strings, most of a large document), no key can be secret.
    hints = tuple(sorted({words[-1] for words in key_rules}))
    end_hints = tuple(h for h in hints if not any(o != h and h.endswith(o) for o in hints))
    hint_pattern = re.compile("|".join(map(re.escape, hints)) or r"(?!)", re.IGNORECASE)
    known = [v for v in values if len(v) >= MIN_SECRET_CHARS]
    # A known value is searched for in every spelling it can be met in (JSON-escaped, twice,
    # `\u` escapes), and what a key-value rule left of it after a mask: all in one pass.
    literals, left = forms(known)
    alternatives = [re.escape(v) for v in literals]
    if left:
        rest = "|".join(map(re.escape, left))
        alternatives.append(f"{re.escape(rules.mask)}(?:{rest})+")  # repeated: idempotent
    secrets = _one_pattern(alternatives, list(rules.patterns))
    groups = [PATTERN_TRIGGERS.get(p) for p in rules.patterns]
    found = (*literals, *(rules.mask + rest for rest in left))
    starts = (*found, *(t for group in groups if group for t in group))
    # None: a pattern we know nothing about, so the full regex always runs.
    triggers = re.compile("|".join(map(re.escape, starts))) if all(groups) and starts else None
    tells = None
    told: tuple[str, ...] = ()
    if triggers is not None:
        # `clean` reads JSON text, where each spelling can be escaped once more.
        told = (
            *spellings(known, depth=3),
            *(rules.mask + rest for rest in spellings(left, depth=1)),
            *(t for p in rules.patterns for t in PATTERN_TELLS[p]),
        )
        tells = re.compile("|".join(map(re.escape, told)))
    scannable = triggers is not None or (not rules.patterns and not literals)
    # A hint is read with the character after it; a trigger, a tell or a cut mark whole.
    tell_lengths = (len(t) for p in rules.patterns for t in PATTERN_TELLS.get(p, ()))
    reach = max((len(t) for t in (*starts, *told, *ELLIPSES)), default=0)
    reach = max((reach, *tell_lengths, *(len(h) + 1 for h in hints)))
    return CompiledRules(
        hints,
        end_hints,
        hint_pattern,
        literals,
        len(alternatives),
        secrets,
        triggers,
        tells,
        _scan_pattern((*told, *ELLIPSES), end_hints),
        scannable,
        reach,
    )


# Bytes by how often they occur in text and JSON, commonest first (others: rarer still).
_COMMON_BYTES = b' "_-:,.{}[]0123456789\\etaoinsrhldcumfpgwybvkxjqz'


def _scan_pattern(tells: Iterable[str], end_hints: Iterable[str]) -> re.Pattern[bytes]:
    """One regex over UTF-8 bytes that finds any of `tells` (as written) and any end hint
    in any case not followed by an ASCII letter or digit: what `_ends_a_word` finds in the
    lowered bytes (a bytes regex ignores only ASCII case, as `bytes.lower` lowers only
    ASCII). A regex alternation is tried wherever a branch's first byte occurs (if each
    branch starts with a plain byte: so a hint has a branch per case of it), so each needle
    is found from its rarest byte on, the bytes before it checked by a lookbehind: with rare
    first bytes the single pass costs ~2x less than a regex of the tells and a `find` per
    hint."""

    def anchored(needle: bytes, cased: bool) -> list[tuple[bytes, bytes]]:
        rank = [_COMMON_BYTES.find(byte) if byte in _COMMON_BYTES else 99 for byte in needle]
        at = max(range(len(needle)), key=lambda i: (rank[i], -i))
        spell = re.escape if cased else _any_case
        behind = b"(?<=" + spell(needle) + b")" if at else b""
        first = needle[at : at + 1]
        firsts = (first,) if cased else tuple(dict.fromkeys((first.lower(), first.upper())))
        after = b"" if cased else b"(?![A-Za-z0-9])"
        return [(f, spell(needle[at + 1 :]) + behind + after) for f in firsts]

    branches = [b for t in tells if t for b in anchored(t.encode("utf-8", "surrogatepass"), True)]
    branches += [b for h in end_hints if h for b in anchored(h.encode(), False)]
    alternatives = dict.fromkeys(re.escape(first) + rest for first, rest in branches)
    return re.compile(b"|".join(alternatives) or rb"(?!)")


def _any_case(text: bytes) -> bytes:
    """A regex matching `text` in any ASCII case (classes: cheaper than a scoped flag)."""
    return b"".join(
        b"[" + c + c.upper() + b"]" if c.isalpha() else re.escape(c)
        for c in (text[i : i + 1].lower() for i in range(len(text)))
    )


def _ends_a_word(lowered: str, hints: tuple[str, ...], word: frozenset[str]) -> bool:
    """Does a hint occur in `lowered` not followed by a letter or digit (where `key_words`
    would end a word: it splits at anything else, and lowering made every letter lower)?"""
    for hint in hints:
        at = lowered.find(hint)
        while at >= 0:
            end = at + len(hint)
            if end == len(lowered) or lowered[end] not in word:
                return True
            at = lowered.find(hint, at + 1)
    return False


def forms(values: list[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The spellings of these secret values, and what the key-value rules (`pairs.VALUES`) can
    leave of one after masking its first part (see `secret_forms`)."""
    return spellings(values), leftovers(values, VALUES)


def _one_pattern(known: list[str], patterns: list[str]) -> re.Pattern[str]:
    """Every secret value (`known`: regexes of their spellings) and pattern as one
    alternation: one pass over each string.

    Alternative i is the group `p{i}`; a pattern's `secret` group becomes `sp{i}`.
    """
    parts = [f"(?P<p{i}>{value})" for i, value in enumerate(known)]
    for index, pattern in enumerate(patterns, start=len(known)):
        re.compile(pattern)  # a bad extra regex fails here, naming itself
        parts.append(f"(?P<p{index}>{pattern.replace('(?P<secret>', f'(?P<sp{index}>')})")
    return re.compile("|".join(parts)) if parts else re.compile(r"(?!)")
