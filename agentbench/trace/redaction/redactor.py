"""`Redactor`: applies `RedactionRules` (see `rules`) to values, text and JSON, and remembers.

**A secret seen once is masked everywhere.** A value a redactor masks because of where it was
— under a secret key (`{"password": "…"}`, a header), as a pattern's secret (the token after
`Bearer`), as the value of a `password=…` pair — is learned (`learned`): from then on it is a
known secret value too, masked wherever it appears, and within one call to `value`, `text` or
`json` the places before it as well. A key-value rule that met a value before the whole of it
was known masked it only as far as that kind of value runs (`my password: correct horse
battery staple` to the first space): once the whole is learned, a mask followed by the rest
(`[REDACTED] horse battery staple`) is masked too, the rest repeated or not, so masking stays
idempotent; a value that holds a mask already (`password: <[REDACTED]>`) is masked whole.
A recorder builds one redactor per run (a trial's turns and a conversation's handoffs share
one), and masks the rows it made before a value was learned when the run ends (see `remask`);
whoever writes about the run — results, a cassette, an answer — masks with the same redactor
(`LabelledStore.redactor`). A value is learned only if it could not be ordinary text: at least
`MIN_LEARNED_CHARS` (8) characters, the minimum the environment rule uses too — a one-character
password must not mask every `a` in the store — not only digits, not the mask, not a secret
key's own name; such a value is still masked in its own field.

Strings that hold JSON (tool-call arguments, tool observations) are parsed and redacted by
key too; only when something was masked is the text rewritten, and then only the masked values
(see `json_rewrite`). In other text, `"key": "value"` and `key=value` pairs with a secret key
have their value masked (see `pairs`), and the fragments next to a cut are masked when they
could be part of a secret (see `cuts`). Finding the secrets is the compiled rules' job (see
`detector`). Redaction is idempotent, so every writer can apply it again at its own boundary,
and never leaves invalid JSON: a mask is widened to whole escape sequences (see
`json_escapes`), and a known value in JSON text is masked in the strings it is in, never in a
number. Importing this module puts the redacting filter on agentbench's loggers (see `logs`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from agentbench.trace._json import dumps, plain
from agentbench.trace.redaction.cuts import ELLIPSES, cut_pieces, masked_head, masked_tail
from agentbench.trace.redaction.detector import CompiledRules, compile_rules, forms, secret_span
from agentbench.trace.redaction.json_escapes import widened
from agentbench.trace.redaction.json_rewrite import rewritten
from agentbench.trace.redaction.logs import redact_logs
from agentbench.trace.redaction.pairs import masked_pairs
from agentbench.trace.redaction.rules import (
    MAX_LEARNED,
    MIN_LEARNED_CHARS,
    MIN_SECRET_CHARS,
    RedactionRules,
    key_words,
)

_SCALARS = (bool, int, float)
_CACHED_TEXT_CHARS = 4_096
_TEXT_CACHE_ENTRIES = 4_096
_KEY_CACHE_ENTRIES = 65_536
_key_caches: dict[tuple[str, ...], dict[str, bool]] = {}  # by `RedactionRules.keys`
_env_name_caches: dict[tuple[str, ...], dict[bytes, bool]] = {}  # likewise, names as bytes
_COMPILED_ENTRIES = 64
_compiled_rules: dict[tuple[Any, frozenset[str]], CompiledRules] = {}
_rule_words: dict[tuple[str, ...], frozenset[tuple[str, ...]]] = {}  # likewise
_NAMED_VALUE_FIELDS = ("value", "old", "new")
# orjson options under which it dumps only what `Redactor.value` passes through unchanged
# (everything else raises TypeError and takes the full path).
_NATIVE_ONLY = (
    orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)


@dataclass
class Redactor:
    """Applies `RedactionRules` to values; build one per run (it reads the environment)."""

    rules: RedactionRules = field(default_factory=RedactionRules)
    environ: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        self._key_rules = _rule_words.get(self.rules.keys)
        if self._key_rules is None:
            words = (key_words(k) for k in self.rules.keys)
            self._key_rules = _rule_words[self.rules.keys] = frozenset(w for w in words if w)
        # Shared by every redactor with these key rules: one is built per run, and each reads
        # the environment's names through it.
        self._key_cache = _key_caches.setdefault(self.rules.keys, {})
        values = set(self.rules.secret_values)
        if self.rules.mask_environment:
            values.update(self._environment_secrets())
        # What the rules and secret values compile to is shared too: a run's recorder builds
        # its redactor at the start of every run, and compiling is most of what that costs.
        self._values = frozenset(values)
        key = (self.rules, self._values)
        compiled = _compiled_rules.get(key)
        if compiled is None:
            if len(_compiled_rules) >= _COMPILED_ENTRIES:
                _compiled_rules.clear()
            compiled = _compiled_rules[key] = compile_rules(self.rules, self._key_rules, values)
        # Values this redactor masked as secrets (see `learned`), and whether some are not yet
        # compiled into the rules it applies.
        self.learned: set[str] = set()
        self._stale = False
        self._use(compiled)

    def _use(self, compiled: CompiledRules) -> None:
        self._compiled = compiled
        # Read on every value (a test of `clean` reads the end hints and tells too).
        self._hints = compiled.hints
        self._end_hints = compiled.end_hints
        self._literals = compiled.literals
        self._tells = compiled.tells
        self._scan = compiled.scan
        self._scannable = compiled.scannable
        self._reach = compiled.reach
        self._texts: dict[str, str] = {}  # the same strings recur across a run's events

    def portable_rules(self) -> RedactionRules:
        """These rules with the secret values this redactor found in the environment, and
        those it learned, made literal: what another process (the recording process, whose
        environment may differ from this one's) redacts with to mask exactly what this
        redactor masks."""
        values = tuple(sorted(self._values | self.learned))
        return replace(self.rules, secret_values=values, mask_environment=False)

    def with_secrets(self, values: Iterable[str]) -> Redactor:
        """A redactor applying these rules plus `values` (a run's learned secrets) as known
        secret values: masked verbatim wherever they occur (those long enough, see `learned`)."""
        rules = self.portable_rules()
        extra = set(values) - set(rules.secret_values)
        if not extra:
            return self if not self.learned else Redactor(rules, environ={})
        values = tuple(sorted({*rules.secret_values, *extra}))
        return Redactor(replace(rules, secret_values=values), environ={})

    # -- what a run taught it ----------------------------------------------------------------
    def learn(self, values: Iterable[str]) -> None:
        """Take `values` as secrets met elsewhere — what a replayed recording had masked,
        what the recording process learned — to be masked from now on, as if this redactor
        had masked them itself (the same rules for what is too short apply)."""
        for value in values:
            if isinstance(value, str):
                self._learn(value)

    def _learn(self, value: str) -> None:
        """Remember a value masked as a secret — under a secret key, a pattern's secret, the
        value of a `key=value` pair — to mask it wherever it occurs from now on. Too short
        (under `MIN_LEARNED_CHARS`), only digits (a count or a time as often as a secret), the
        mask itself, or a secret key's own name (`{"password": "password"}`: every key named
        so would go): then it stays masked in its field only. So does every value past the
        first `MAX_LEARNED` (a tool listing a vault's keys): each one learned is one more
        alternative every later string is searched for."""
        if (
            len(value) < MIN_LEARNED_CHARS
            or len(self.learned) >= MAX_LEARNED
            or value in self.learned
            or value in self._values
            or self.rules.mask in value
            or value in self.rules.mask
            or value.isdigit()
            or (not any(c.isspace() for c in value) and self.is_secret_key(value))
        ):
            return
        self.learned.add(value)
        self._stale = True

    def _refresh(self) -> None:
        """Compile what was learned into the rules, before the next value is redacted (not in
        the middle of one: a tool result holding many tokens compiles once)."""
        self._stale = False
        values = self._values | self.learned
        self._use(compile_rules(self.rules, self._key_rules, set(values)))

    def _environment_secrets(self) -> list[str]:
        """Values of the environment variables whose names are secret."""
        env = os.environ if self.environ is None else self.environ
        data = getattr(env, "_data", None) if env is os.environ and os.name == "posix" else None
        if not isinstance(data, dict):
            return [v for k, v in env.items() if self.is_secret_key(k)]
        # os.environ's own bytes: going through the mapping decodes every name and value in
        # Python, which costs more than all the rest of building a redactor.
        names = _env_name_caches.setdefault(self.rules.keys, {})
        found = []
        for name, value in data.items():
            secret = names.get(name)
            if secret is None:
                if len(names) >= _KEY_CACHE_ENTRIES:
                    names.clear()
                secret = names[name] = self.is_secret_key(os.fsdecode(name))
            if secret:
                found.append(os.fsdecode(value))
        return found

    def spelled(self, values: Iterable[str]) -> tuple[str, ...]:
        """What these values (secrets) can be met as in text this redactor masks: each one's
        spellings (`secret_forms`), and the mask followed by what a key-value rule left of
        one. A text holding none of them holds none of the values."""
        spelled, left = forms([v for v in values if len(v) >= MIN_SECRET_CHARS])
        return (*spelled, *(self.rules.mask + rest for rest in left))

    def is_secret_key(self, key: str) -> bool:
        known = self._key_cache.get(key)
        if known is None:
            words = key_words(key)
            known = any(words[-len(rule) :] == rule for rule in self._key_rules)
            if len(self._key_cache) >= _KEY_CACHE_ENTRIES:
                self._key_cache.clear()
            self._key_cache[key] = known
        return known

    def value(self, value: Any) -> Any:
        """A redacted copy of `value` (containers are rebuilt; the input is never changed)."""
        if self._stale:
            self._refresh()
        known = len(self.learned)
        redacted = self._value(value)
        if len(self.learned) > known:  # it taught a secret: mask it where it came earlier too
            self._refresh()
            redacted = self._value(value)
        return redacted

    def _value(self, value: Any) -> Any:
        kind = type(value)
        if kind is str:
            return self._cached_text(value)
        if kind is dict:
            return self._dict(value)
        if kind is list or kind is tuple:
            return [self._value(v) for v in value]
        if value is None or kind in _SCALARS:
            return value
        if isinstance(value, str):  # subclasses (enums) from here on: the slow path
            return self._cached_text(str(value))
        if isinstance(value, dict):
            return self._dict(value)
        if isinstance(value, list | tuple):
            return [self._value(v) for v in value]
        converted = plain(value)
        return value if converted is value else self._value(converted)

    def clean(self, document: bytes | str) -> bool:
        """Would redaction leave every value in this JSON document as it is? True only when
        no secret pattern's literal, known secret value or cut mark occurs anywhere in it,
        nor a secret key's last word at the end of a word: every rule needs one of those
        inside some key or string, and each key and string is in the document verbatim
        (escapes only add backslashes, which end words too). `input_tokens` is no hint:
        a key is secret when its last word is a rule's, and `token` is not its last word.
        (False means: redact to find out.)
        """
        if self._stale:
            self._refresh()
        if not self._scannable:
            return False
        if isinstance(document, bytes):
            if document.isascii():  # what `clean_text` reads of an ASCII text: its bytes
                return self._scan.search(document) is None
            return self._compiled.clean_text(document.decode(), document)
        return self._compiled.clean_text(document)

    def clean_change(self, text: str, start: int, end: int) -> bool:
        """`clean` for a string that is one `clean` said yes to (inside its JSON document)
        with only `text[start:end]` changed — a re-rendered system prompt: only the change
        and as much around it as any test reads is looked at. Every test needs a literal, a
        mark or a hint and the character after it inside the string; one that lies wholly
        outside the change was in the old string too, and the old string had none."""
        if self._stale:
            self._refresh()
        if not self._scannable:
            return False
        return self._compiled.clean_text(text[max(0, start - self._reach) : end + self._reach])

    def json(self, value: Any) -> str:
        """`value` redacted, as compact JSON text: the same text as dumping `self.value(value)`.

        Most values hold no secret and no hint of one: those are dumped once and the text
        checked (`clean`), instead of being rebuilt key by key. Values orjson would dump
        differently from what `value` makes of them (subclasses, dataclasses, dates, non-str
        keys) take the full path.
        """
        if self._stale:
            self._refresh()
        try:
            dumped = orjson.dumps(value, option=_NATIVE_ONLY)
        except TypeError:
            dumped = None
        if dumped is not None and self._scannable:
            text = dumped.decode()  # once: `clean` reads text, and text is what is returned
            if self._compiled.clean_text(text, dumped):
                return text
        return dumps(self.value(value))

    def _dict(self, value: dict[Any, Any]) -> dict[Any, Any]:
        redacted = {}
        for key, item in value.items():
            # A key is data too (a dict keyed by tokens): masked as any text is, so a secret
            # seen elsewhere is not kept in a key.
            shown = self._cached_text(key) if type(key) is str else key
            if self.is_secret_key(key if type(key) is str else str(key)):
                redacted[shown] = self._masked(item)
            elif type(item) is str:
                redacted[shown] = self._cached_text(item)
            elif item is None or type(item) in _SCALARS:
                redacted[shown] = item
            else:
                redacted[shown] = self._value(item)
        named = value.get("key", value.get("name"))
        if type(named) is str and self.is_secret_key(named):
            # A named value — a context change `{key, old, new}`, a header `{name, value}`:
            # the name is the secret key, its values are the secrets.
            for field_name in _NAMED_VALUE_FIELDS:
                if field_name in redacted:
                    redacted[field_name] = self._masked(value[field_name])
        return redacted

    def keyed(self, key: str, value: Any) -> Any:
        """`value` stored under `key` (a context variable, say): masked whole if the key is."""
        return self._masked(value) if self.is_secret_key(key) else self.value(value)

    def text(self, text: str) -> str:
        """Mask secret patterns and known secret values in a string (and in JSON inside it)."""
        if self._stale:
            self._refresh()
        known = len(self.learned)
        redacted = self._cached_text(text)
        if len(self.learned) > known:  # as in `value`
            self._refresh()
            redacted = self._cached_text(text)
        return redacted

    def _cached_text(self, text: str) -> str:
        if len(text) < MIN_SECRET_CHARS:
            return text
        done = self._texts.get(text)
        if done is None:
            done = self._text(text)
            if len(text) <= _CACHED_TEXT_CHARS:
                if len(self._texts) >= _TEXT_CACHE_ENTRIES:
                    self._texts.clear()
                self._texts[text] = done
        return done

    def document(self, text: str) -> str:
        """Mask secrets in a whole rendered file (HTML, XML, Markdown, a log line): patterns,
        known values, `key: value` pairs and cut fragments, without parsing it as JSON. Masks
        never split an escape sequence (see `json_escapes`), so JSON in the file stays JSON."""
        if self._stale:
            self._refresh()
        known = len(self.learned)
        redacted = self._text(text, parse_json=False)
        if len(self.learned) > known:  # as in `value`
            self._refresh()
            redacted = self._text(text, parse_json=False)
        return redacted

    def _text(self, text: str, *, parse_json: bool = True) -> str:
        masked = self._mask_secrets(text)
        json_like = parse_json and text.lstrip()[:1] in ("{", "[")
        if json_like and masked is not text:
            # A known value or a pattern in JSON text: masked in the strings it is in, so a
            # number or a key's quotes are never replaced, and the rest keeps its bytes.
            parsed = self._json_text(text)
            if parsed is not None:
                return parsed
        text = masked
        cut = any(mark in text for mark in ELLIPSES)
        if not cut and not any(hint in text.lower() for hint in self._hints):
            return text
        if json_like:
            parsed = self._json_text(text)
            if parsed is not None:
                return parsed
        return self._cut_text(text) if cut else self._embedded_pairs(text)

    def _embedded_pairs(self, text: str) -> str:
        """Mask the values of `"key": "value"` and `key=value` pairs whose key is secret."""
        return masked_pairs(
            text, self._compiled.hint_spans(text), self.rules.mask, self.is_secret_key, self._learn
        )

    def _mask_secrets(self, text: str) -> str:
        """Mask pattern matches and known secret values (`text` itself when there are none).
        A pattern's secret is learned. Each mask is widened to whole escape sequences."""
        found = self._compiled.matches(text)
        if not found:
            return text
        out: list[str] = []
        done = 0
        for match, offset in found:
            start, end = self._secret_span(match)
            start, end = widened(text, start + offset, end + offset)
            out += (text[done : max(start, done)], self.rules.mask)
            done = max(done, end)
        out.append(text[done:])
        return "".join(out)

    def _secret_span(self, match: re.Match[str]) -> tuple[int, int]:
        """What a match masks, in its string; a pattern's secret is learned."""
        span = secret_span(match)
        if self._compiled.is_pattern(match):
            self._learn(match.string[span[0] : span[1]])
        return span

    def json_text(self, text: str) -> str:
        """JSON text (a stored JSON column) with its strings and keys redacted, the rest byte
        for byte: a secret is masked where it is in a string, never in a number or across
        an escape sequence. Text that does not parse is redacted as text."""
        if self._stale:
            self._refresh()
        redacted = self._json_text(text)
        return self.text(text) if redacted is None else redacted

    def _json_text(self, text: str) -> str | None:
        """A string holding JSON, redacted by key; None if it is not JSON after all."""
        try:
            parsed = orjson.loads(text)
        except orjson.JSONDecodeError:
            return None
        redacted = self._value(parsed)
        if redacted == parsed:
            return text  # nothing masked: keep the exact original text
        return rewritten(text, parsed, redacted)

    # -- text that was cut before it got here ----------------------------------------------
    def _cut_text(self, text: str) -> str:
        """Each piece between cuts redacted on its own (a `"key": "value` pair ends at the
        cut, the marker itself stays), then the fragments touching a cut."""
        pieces = cut_pieces(text)
        out: list[str] = []
        for index in range(0, len(pieces), 2):
            piece = self._embedded_pairs(pieces[index])
            if index > 0 and pieces[index - 1] in ELLIPSES:  # a tail: `…` + the rest
                piece = self._cut_head(piece)
            if index + 1 < len(pieces):
                piece = self._cut_tail(piece)
                out.extend((piece, pieces[index + 1]))
            else:
                out.append(piece)
        return "".join(out)

    def _cut_tail(self, piece: str) -> str:
        """`piece` ends where the text was cut: mask a secret's first part there."""
        return masked_tail(piece, self._literals, self.rules.mask)

    def _cut_head(self, piece: str) -> str:
        """`piece` starts where the text was cut: mask a secret's last part there."""
        return masked_head(piece, self._literals, self.rules.mask)

    def _masked(self, value: Any) -> Any:
        """The value under a secret key: scalars are masked (text learned); a dict is still
        searched by key, so a JSON Schema property named `token` keeps its schema."""
        if value is None or value == "" or isinstance(value, bool):
            return value
        if isinstance(value, dict):
            return self._value(value)
        if isinstance(value, list | tuple):
            return [self._masked(v) for v in value]
        if isinstance(value, str):
            self._learn(value)
            for match, _ in self._compiled.matches(value):  # `Bearer …`: its token bare, too
                self._secret_span(match)
        return self.rules.mask


redact_logs(Redactor)  # on import: whatever records or replays anything imports this module
