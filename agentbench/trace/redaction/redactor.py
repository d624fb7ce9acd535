"""Redaction: one ruleset that masks secrets in every value before a trace is written.

Three kinds of rule, applied to nested values of any depth:

* **key names** — the value under a key such as `Authorization`, `x-api-key`, `password`,
  `github_token` or `client_secret` is masked whole. A key matches when its last words
  (camelCase, `-`, `.` and `_` all split words) are one of the configured names, so
  `max_tokens`, `input_tokens` and `token_budget` are left alone.
* **patterns** in any string: `sk-…` keys, `Bearer …` credentials, GitHub and Slack tokens,
  AWS access key ids, JWTs, plus any extra regexes.
* **known secret values**: the values of environment variables whose names are secret by the
  rule above (`OPENAI_API_KEY`, `DB_PASSWORD`…) are masked wherever they appear, in every
  spelling they can have there: as they are, JSON-escaped once or twice (JSON inside a JSON
  string), non-ASCII characters as they are or `\\u`-escaped (see `secret_forms`).

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
key too; only when something was masked is the text rewritten, and then only the masked values:
separators, spacing and key order stay byte for byte, so a recording still reads as what was
sent. In other text, `"key": "value"` and `key=value` pairs with a secret key have their value
masked (a tool call echoed into the system prompt, a URL's query string).

Text cut before it got here (a tool result the runtime truncated, a summary's head, a window
around a change) may end in half a secret that no rule matches whole. So at a cut — the
runtime's `…[truncated N of M chars]` marker or a bare `…` — the fragment next to it is masked
when it could be part of a secret: a piece of a known secret value, a token that starts like
one of the patterns (`sk-…`, after `Bearer `), or a run of letters and digits that looks like
a key — not a hex id (a commit SHA, a UUID, `run_3f9a…`): those name things, and a window
around a changed one must show it (a configured pattern still masks one that is a secret).
Redaction is idempotent, so every writer can apply it again at its own boundary, and never
leaves invalid JSON: a mask is widened to whole escape sequences (see `json_escapes`), and a
known value in JSON text is masked in the strings it is in, never in a number.

Logs pass the same rules: agentbench's loggers carry a filter that masks each record's message
and traceback before any handler writes them.
"""

from __future__ import annotations

import json
import logging
import os
import re
import string
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

import orjson

from agentbench.trace._json import dumps, plain
from agentbench.trace.redaction.json_escapes import after_escape, ends_escape, opens_escape, widened
from agentbench.trace.redaction.secret_forms import leftovers, spellings

MASK = "[REDACTED]"

DEFAULT_SECRET_KEYS: tuple[str, ...] = (
    "authorization",
    "api_key",
    "apikey",
    "password",
    "passwd",
    "secret",
    "token",
    "cookie",
    "set_cookie",
    "private_key",
    "access_key",
    "secret_key",
    "subscription_key",
    "credential",
    "credentials",
)

# A pattern's group named `secret` is what gets masked; without one, the whole match is.
# (Patterns are combined into one regex, so other group names must not repeat across them.)
# Each default pattern has literals one of which any match contains: a string with none of
# them skips the regex (a substring test is ~25x cheaper than running the alternation).
_DEFAULT_TRIGGERS: dict[str, tuple[str, ...]] = {
    r"\bsk-[A-Za-z0-9_\-]{16,}": ("sk-",),
    r"\b[Bb]earer\s+(?P<secret>[A-Za-z0-9._~+/=\-]{8,})": ("earer",),
    r"\bBasic\s+(?P<secret>[A-Za-z0-9+/]{8,}={0,2})": ("Basic",),
    r"\bgh[pousr]_[A-Za-z0-9]{20,}": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    r"\bxox[abprs]-[A-Za-z0-9\-]{10,}": ("xox",),
    r"\bAKIA[0-9A-Z]{16}\b": ("AKIA",),
    r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}": ("eyJ",),
}
DEFAULT_PATTERNS: tuple[str, ...] = tuple(_DEFAULT_TRIGGERS)
# What `clean` searches for instead: parts of the same literals (any match still contains
# one) chosen to start with uncommon characters. A regex alternation tries its branches at
# every position holding one of their first characters, and `s` and `e` are everywhere in
# text: this one runs ~1.5x faster than the triggers over prose and JSON.
_DEFAULT_TELLS: dict[str, tuple[str, ...]] = {
    r"\bsk-[A-Za-z0-9_\-]{16,}": ("k-",),
    r"\b[Bb]earer\s+(?P<secret>[A-Za-z0-9._~+/=\-]{8,})": ("Bearer", "bearer"),
    r"\bBasic\s+(?P<secret>[A-Za-z0-9+/]{8,}={0,2})": ("Basic",),
    r"\bgh[pousr]_[A-Za-z0-9]{20,}": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    r"\bxox[abprs]-[A-Za-z0-9\-]{10,}": ("xox",),
    r"\bAKIA[0-9A-Z]{16}\b": ("AKIA",),
    r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}": ("yJ",),
}

_MIN_ENV_SECRET_CHARS = 8
# The shortest value learned from a field and then masked wherever it occurs (see `_learn`):
# shorter ones — a four-letter password, a one-character one — would mask every occurrence of
# a common word or letter; they are masked in their own field only.
MIN_LEARNED_CHARS = _MIN_ENV_SECRET_CHARS
MAX_LEARNED = 1_000  # values one redactor learns at most (see `Redactor._learn`)
_SCALARS = (bool, int, float)
_CACHED_TEXT_CHARS = 4_096
_TEXT_CACHE_ENTRIES = 4_096
_KEY_CACHE_ENTRIES = 65_536
_key_caches: dict[tuple[str, ...], dict[str, bool]] = {}  # by `RedactionRules.keys`
_env_name_caches: dict[tuple[str, ...], dict[bytes, bool]] = {}  # likewise, names as bytes
_COMPILED_ENTRIES = 64
_compiled_rules: dict[tuple[Any, frozenset[str]], _CompiledRules] = {}
_rule_words: dict[tuple[str, ...], frozenset[tuple[str, ...]]] = {}  # likewise
_WORD_CHARS = frozenset(string.ascii_lowercase + string.digits)  # what `_WORD_SPLIT` keeps
# The only non-ASCII characters whose lowercase holds ASCII letters (İ → "i̇", the Kelvin sign
# → "k"); a test checks this against the running Python's Unicode tables.
_LOWER_TO_ASCII = ("\u0130", "\u212a")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_WORD_SPLIT = re.compile(r"[^a-z0-9]+")
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
_VALUES = tuple(
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
def _embedded(mask: str) -> tuple[tuple[re.Pattern[str], int, bool], ...]:
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
# Where text was cut before it reached the redactor: the runtime's truncation marker (also as
# it looks inside JSON text), or a bare ellipsis after a head or before a tail.
_ELLIPSIS, _ESCAPED_ELLIPSIS = "…", "\\u2026"
_ELLIPSES = (_ELLIPSIS, _ESCAPED_ELLIPSIS)
_MARKER_REST = re.compile(r"\[truncated [\d,]+ of [\d,]+ chars\]")  # after the ellipsis
_TOKEN_CHARS = r"[A-Za-z0-9_\-.+/=~]"
_TAIL_TOKEN = re.compile(_TOKEN_CHARS + r"+\Z")
_HEAD_TOKEN = re.compile(r"\A" + _TOKEN_CHARS + "+")
_AUTH_BEFORE = re.compile(r"\b(?:[Bb]earer|Basic)\s+\Z")
# The start of a default pattern's match, running to the cut: (part of) a secret. (At the end
# of an escape sequence, where `\b` cannot see the character it stands for: `_PARTIAL_AT`.)
_PARTIAL_AT = re.compile(r"(?:sk-|gh[pousr]_|xox[abprs]-|AKIA|eyJ)" + _TOKEN_CHARS + r"*\Z")
_PARTIAL_SECRET = re.compile(r"\b" + _PARTIAL_AT.pattern)
_NAMED_VALUE_FIELDS = ("value", "old", "new")
_MIN_PARTIAL = 4  # a piece of a known secret this long next to a cut is masked
_MIN_TOKEN_LIKE = 8
_AFTER_ESCAPE = 8_192  # the longest match looked for right after an escape sequence
# Ids that are not secrets: hex in one case, possibly in dashed groups (a UUID), possibly after
# a word and `_` or `-` (`run_3f9a…`, `req-…`).
_HEX_ID = re.compile(r"(?:[A-Za-z]+[_-])?(?:[0-9a-f]+(?:-[0-9a-f]+)*|[0-9A-F]+(?:-[0-9A-F]+)*)")
# One JSON scalar (string, number, literal), in document order: what a rewrite replaces.
# orjson options under which it dumps only what `Redactor.value` passes through unchanged
# (everything else raises TypeError and takes the full path).
_NATIVE_ONLY = (
    orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)
_JSON_SCALAR = re.compile(r'"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null')


def key_words(key: str) -> tuple[str, ...]:
    """`X-Api-Key` → ('x', 'api', 'key'); `githubToken` → ('github', 'token')."""
    return tuple(w for w in _WORD_SPLIT.split(_CAMEL.sub("_", key).lower()) if w)


@dataclass(frozen=True)
class RedactionRules:
    """What counts as a secret. Extend the defaults with `RedactionRules.extended(...)`."""

    keys: tuple[str, ...] = DEFAULT_SECRET_KEYS
    patterns: tuple[str, ...] = DEFAULT_PATTERNS
    secret_values: tuple[str, ...] = ()
    mask_environment: bool = True  # mask values of secret-named environment variables
    mask: str = MASK

    @classmethod
    def extended(
        cls,
        *,
        keys: Iterable[str] = (),
        patterns: Iterable[str] = (),
        secret_values: Iterable[str] = (),
    ) -> RedactionRules:
        """The defaults plus extra key names, regexes and literal secret values."""
        return cls(
            keys=(*DEFAULT_SECRET_KEYS, *keys),
            patterns=(*DEFAULT_PATTERNS, *patterns),
            secret_values=tuple(secret_values),
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
            compiled = _compiled_rules[key] = _compile(self.rules, self._key_rules, values)
        # Values this redactor masked as secrets (see `learned`), and whether some are not yet
        # compiled into the rules it applies.
        self.learned: set[str] = set()
        self._stale = False
        self._use(compiled)

    def _use(self, compiled: _CompiledRules) -> None:
        self._hints = compiled.hints
        self._end_hints = compiled.end_hints
        self._hint_pattern = compiled.hint_pattern
        self._literals = compiled.literals
        self._known_groups = compiled.known_groups
        self._secrets = compiled.secrets
        self._triggers = compiled.triggers
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
        self._use(_compile(self.rules, self._key_rules, set(values)))

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
        spelled, left = _forms([v for v in values if len(v) >= _MIN_ENV_SECRET_CHARS])
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
            if document.isascii():  # what `_clean_text` reads of an ASCII text: its bytes
                return self._scan.search(document) is None
            return self._clean_text(document.decode(), document)
        return self._clean_text(document)

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
        return self._clean_text(text[max(0, start - self._reach) : end + self._reach])

    def _clean_text(self, text: str, data: bytes | None = None) -> bool:
        """`clean` of `text` (`data`: its UTF-8 bytes, when the caller has them)."""
        # Hints are ASCII. Ignoring ASCII case in the text's UTF-8 bytes finds the same ones
        # as lowering the text, each followed by the same kind of character, unless the text
        # holds a character whose lowercase is ASCII. One pass of `_scan` then looks for
        # every tell, cut mark and hint at once.
        if text.isascii() or not (_LOWER_TO_ASCII[0] in text or _LOWER_TO_ASCII[1] in text):
            data = text.encode("utf-8", "surrogatepass") if data is None else data
            return self._scan.search(data) is None
        if self._tells is not None and self._tells.search(text) is not None:
            return False
        if _ELLIPSIS in text or _ESCAPED_ELLIPSIS in text:
            return False
        return not _ends_a_word(text.lower(), self._end_hints, _WORD_CHARS)

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
            if self._clean_text(text, dumped):
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
        if len(text) < _MIN_ENV_SECRET_CHARS:
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
        cut = any(mark in text for mark in _ELLIPSES)
        if not cut and not any(hint in text.lower() for hint in self._hints):
            return text
        if json_like:
            parsed = self._json_text(text)
            if parsed is not None:
                return parsed
        return self._cut_text(text) if cut else self._embedded_pairs(text)

    def _embedded_pairs(self, text: str) -> str:
        """Mask the values of `"key": "value"` and `key=value` pairs whose key is secret. Only
        pairs around a hint are tried: a large document has many pairs, and few hints."""
        mask = self.rules.mask
        spans: list[tuple[int, int]] = []
        done = 0
        for hint_start, hint_end in self._hint_spans(text):
            if hint_start < done:
                continue
            before = text[max(0, hint_start - 63) : hint_start]
            key_start = after_escape(
                text, hint_start - len(before) + len(before.rstrip(_KEY_CHARS))
            )
            for pattern, offset, escaped in _embedded(mask):
                at = key_start + offset
                found = pattern.match(text, at) if at >= 0 else None
                if (
                    found is not None
                    and found.end("key") >= hint_end
                    and found.group("value") != mask  # masked already
                    and self.is_secret_key(found.group("key"))
                ):
                    value = found.group("value")
                    self._learn(_unescaped(value) if escaped else value)
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

    def _hint_spans(self, text: str) -> list[tuple[int, int]]:
        """Where the hints occur, in order (`str.find` over lowered text: a regex alternation
        with IGNORECASE is ~10x slower over a large document)."""
        lowered = text.lower()
        if len(lowered) != len(text):  # lowering changed lengths (rare letters): positions differ
            return [m.span() for m in self._hint_pattern.finditer(text)]
        spans = []
        for hint in self._hints:
            at = lowered.find(hint)
            while at >= 0:
                spans.append((at, at + len(hint)))
                at = lowered.find(hint, at + 1)
        return sorted(spans)

    def _mask_secrets(self, text: str) -> str:
        """Mask pattern matches and known secret values (`text` itself when there are none).
        A pattern's secret is learned. Each mask is widened to whole escape sequences."""
        found = self._secret_matches(text)
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

    def _secret_matches(self, text: str) -> list[tuple[re.Match[str], int]]:
        """The matches of the secret values and patterns, in order, not overlapping, each
        with where its string starts in `text` (a match right after an escape sequence is
        made in a window starting there: a pattern's `\\b` would see the sequence's last
        letter, `e` of `\\u003e`, instead of the `>` it stands for). Every match contains a
        trigger and starts at it (or one character before: `Bearer` is found by `earer`), so
        the combined regex is tried only there, not at every position of the text."""
        if self._triggers is None:
            return [(m, 0) for m in self._secrets.finditer(text) if m.end() > m.start()]
        found: list[tuple[re.Match[str], int]] = []
        done = 0
        for trigger in self._triggers.finditer(text):
            for at in (trigger.start() - 1, trigger.start()):
                if at < done:
                    continue
                match, offset = self._secrets.match(text, at), 0
                if match is None and ends_escape(text, at):
                    match, offset = self._secrets.match(text[at : at + _AFTER_ESCAPE]), at
                if match is not None and match.end() > match.start():
                    found.append((match, offset))
                    done = offset + match.end()
                    break
        return found

    def _secret_span(self, match: re.Match[str]) -> tuple[int, int]:
        """What a match masks, in its string: a pattern's `secret` group, else all of it."""
        name = match.lastgroup or ""
        secret = f"s{name}"  # the alternative `p3` keeps its secret in `sp3`
        if secret in match.re.groupindex and match.group(secret) is not None:
            span = match.span(secret)
        else:
            span = match.span()
        if int(name[1:] or 0) >= self._known_groups:  # a pattern's, not a known value
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
        return _rewritten(text, parsed, redacted)

    # -- text that was cut before it got here ----------------------------------------------
    def _cut_text(self, text: str) -> str:
        """Each piece between cuts redacted on its own (a `"key": "value` pair ends at the
        cut, the marker itself stays), then the fragments touching a cut."""
        pieces = _cut_pieces(text)
        out: list[str] = []
        for index in range(0, len(pieces), 2):
            piece = self._embedded_pairs(pieces[index])
            if index > 0 and pieces[index - 1] in _ELLIPSES:  # a tail: `…` + the rest
                piece = self._cut_head(piece)
            if index + 1 < len(pieces):
                piece = self._cut_tail(piece)
                out.extend((piece, pieces[index + 1]))
            else:
                out.append(piece)
        return "".join(out)

    def _cut_tail(self, piece: str) -> str:
        """`piece` ends where the text was cut: mask a secret's first part there."""
        mask = self.rules.mask
        for secret in self._literals:
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

    def _cut_head(self, piece: str) -> str:
        """`piece` starts where the text was cut: mask a secret's last part there."""
        mask = self.rules.mask
        for secret in self._literals:
            for length in range(min(len(secret) - 1, len(piece)), _MIN_PARTIAL - 1, -1):
                if piece.startswith(secret[-length:]):
                    return mask + piece[widened(piece, 0, length)[1] :]
        token = _HEAD_TOKEN.match(piece)
        if token is not None and _token_like(token.group()):
            return mask + piece[token.end() :]
        return piece

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
            for match, _ in self._secret_matches(value):  # `Bearer …`: its token bare, too
                self._secret_span(match)
        return self.rules.mask


@dataclass(frozen=True)
class _CompiledRules:
    """What a `Redactor` compiles from its rules and the secret values it knows."""

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


def _compile(
    rules: RedactionRules, key_rules: frozenset[tuple[str, ...]], values: set[str]
) -> _CompiledRules:
    # A secret key ends with a rule's words, so its text holds the rule's last word: where
    # none occurs (most strings, most of a large document), no key can be secret.
    hints = tuple(sorted({words[-1] for words in key_rules}))
    end_hints = tuple(h for h in hints if not any(o != h and h.endswith(o) for o in hints))
    hint_pattern = re.compile("|".join(map(re.escape, hints)) or r"(?!)", re.IGNORECASE)
    known = [v for v in values if len(v) >= _MIN_ENV_SECRET_CHARS]
    # A known value is searched for in every spelling it can be met in (JSON-escaped, twice,
    # `\u` escapes), and what a key-value rule left of it after a mask: all in one pass.
    literals, left = _forms(known)
    alternatives = [re.escape(v) for v in literals]
    if left:
        rest = "|".join(map(re.escape, left))
        alternatives.append(f"{re.escape(rules.mask)}(?:{rest})+")  # repeated: idempotent
    secrets = _one_pattern(alternatives, list(rules.patterns))
    groups = [_DEFAULT_TRIGGERS.get(p) for p in rules.patterns]
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
            *(t for p in rules.patterns for t in _DEFAULT_TELLS[p]),
        )
        tells = re.compile("|".join(map(re.escape, told)))
    scannable = triggers is not None or (not rules.patterns and not literals)
    # A hint is read with the character after it; a trigger, a tell or a cut mark whole.
    tell_lengths = (len(t) for p in rules.patterns for t in _DEFAULT_TELLS.get(p, ()))
    reach = max((len(t) for t in (*starts, *told, *_ELLIPSES)), default=0)
    reach = max((reach, *tell_lengths, *(len(h) + 1 for h in hints)))
    return _CompiledRules(
        hints,
        end_hints,
        hint_pattern,
        literals,
        len(alternatives),
        secrets,
        triggers,
        tells,
        _scan_pattern((*told, *_ELLIPSES), end_hints),
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


def _cut_pieces(text: str) -> list[str]:
    """`text` split at its cuts, the cuts kept: piece, mark, piece, mark, …, piece. A mark is
    the runtime's `\\n…[truncated N of M chars]` (the newline possibly escaped, the ellipsis
    possibly `\\u2026`) or a bare ellipsis. (Found with `str.find`: a regex split scans every
    position of a large document, ~10x slower.)"""
    found = sorted(at for mark in _ELLIPSES for at in _positions(text, mark))
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


def _rewritten(text: str, original: Any, redacted: Any) -> str:
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


def _forms(values: list[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The spellings of these secret values, and what the key-value rules (`_VALUES`) can
    leave of one after masking its first part (see `secret_forms`)."""
    return spellings(values), leftovers(values, _VALUES)


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


class RedactingLogFilter(logging.Filter):
    """Masks secrets in a log record — its message and its traceback — before any handler
    writes it: an exception from a tool or a provider can quote a key."""

    def filter(self, record: logging.LogRecord) -> bool:
        redactor = Redactor()  # per record: the environment may have changed; logs are rare
        try:
            message = record.getMessage()
        except Exception:  # a malformed record is logging's to report, not ours
            return True
        clean = redactor.document(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            # Formatters print `exc_text` when it is set, so the traceback is masked too.
            trace = logging.Formatter().formatException(record.exc_info)
            record.exc_text = redactor.document(trace)
        return True


# A logger's filters see only records logged on that logger itself, so each of agentbench's
# named loggers gets one (the runtime's too: it logs provider errors, yet must not import us).
LOGGERS = ("agentbench", "agentbench.trace", "agentbench.model", "agentbench.events")


def redact_logs() -> None:
    """Put the redacting filter on agentbench's loggers (idempotent)."""
    for name in LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactingLogFilter) for f in logger.filters):
            logger.addFilter(RedactingLogFilter())


redact_logs()  # on import: whatever records or replays anything imports this module
