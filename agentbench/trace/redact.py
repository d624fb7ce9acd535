"""Redaction: one ruleset that masks secrets in every value before a trace is written.

Three kinds of rule, applied to nested values of any depth:

* **key names** — the value under a key such as `Authorization`, `x-api-key`, `password`,
  `github_token` or `client_secret` is masked whole. A key matches when its last words
  (camelCase, `-`, `.` and `_` all split words) are one of the configured names, so
  `max_tokens`, `input_tokens` and `token_budget` are left alone.
* **patterns** in any string: `sk-…` keys, `Bearer …` credentials, GitHub and Slack tokens,
  AWS access key ids, JWTs, plus any extra regexes.
* **known secret values**: the values of environment variables whose names are secret by the
  rule above (`OPENAI_API_KEY`, `DB_PASSWORD`…) are masked wherever they appear verbatim.

Strings that hold JSON (tool-call arguments, tool observations) are parsed and redacted by
key too, and re-encoded only when something was masked; in other text, `"key": "value"` and
`key=value` pairs with a secret key have their value masked (a tool call echoed into the
system prompt, a URL's query string).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from agentbench.trace._json import plain

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

_MIN_ENV_SECRET_CHARS = 8
_SCALARS = (bool, int, float)
_CACHED_TEXT_CHARS = 4_096
_TEXT_CACHE_ENTRIES = 4_096
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_WORD_SPLIT = re.compile(r"[^a-z0-9]+")
# Cheap gate before looking for keys inside a string: does it mention a secret-ish key at all?
_KEY_HINTS = ("pass", "secret", "token", "key", "auth", "cookie", "credential")
# Key/value pairs inside free text, e.g. a tool call echoed into the system prompt as
# `login({"password": "…"})` (quotes possibly backslash-escaped), or `?api_key=…` in a URL.
_EMBEDDED = (
    re.compile(r'"(?P<key>[A-Za-z0-9_.\-]{1,64})\\?"\s*:\s*\\?"(?P<value>[^"\\]+)'),
    re.compile(r"\b(?P<key>[A-Za-z0-9_.\-]{1,64})=(?P<value>[^\s&\"',;)\]}]+)"),
)


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
        self._key_rules = {key_words(k) for k in self.rules.keys if key_words(k)}
        self._key_cache: dict[str, bool] = {}
        values = set(self.rules.secret_values)
        if self.rules.mask_environment:
            env = os.environ if self.environ is None else self.environ
            values.update(v for k, v in env.items() if self.is_secret_key(k))
        literal = sorted((v for v in values if len(v) >= _MIN_ENV_SECRET_CHARS), key=len)
        self._secrets = _one_pattern(
            [re.escape(v) for v in reversed(literal)], list(self.rules.patterns)
        )
        triggers = [_DEFAULT_TRIGGERS.get(p) for p in self.rules.patterns]
        known = (*literal, *(t for group in triggers if group for t in group))
        # None: a pattern we know nothing about, so the full regex always runs.
        self._triggers = (
            re.compile("|".join(re.escape(t) for t in known)) if all(triggers) and known else None
        )
        self._texts: dict[str, str] = {}  # the same strings recur across a run's events

    def is_secret_key(self, key: str) -> bool:
        known = self._key_cache.get(key)
        if known is None:
            words = key_words(key)
            known = any(words[-len(rule) :] == rule for rule in self._key_rules)
            self._key_cache[key] = known
        return known

    def value(self, value: Any) -> Any:
        """A redacted copy of `value` (containers are rebuilt; the input is never changed)."""
        kind = type(value)
        if kind is str:
            return self.text(value)
        if kind is dict:
            return self._dict(value)
        if kind is list or kind is tuple:
            return [self.value(v) for v in value]
        if value is None or kind in _SCALARS:
            return value
        if isinstance(value, str):  # subclasses (enums) from here on: the slow path
            return self.text(str(value))
        if isinstance(value, dict):
            return self._dict(value)
        if isinstance(value, list | tuple):
            return [self.value(v) for v in value]
        converted = plain(value)
        return value if converted is value else self.value(converted)

    def _dict(self, value: dict[Any, Any]) -> dict[Any, Any]:
        redacted = {}
        for key, item in value.items():
            if self.is_secret_key(key if type(key) is str else str(key)):
                redacted[key] = self._masked(item)
            elif type(item) is str:
                redacted[key] = self.text(item)
            elif item is None or type(item) in _SCALARS:
                redacted[key] = item
            else:
                redacted[key] = self.value(item)
        return redacted

    def keyed(self, key: str, value: Any) -> Any:
        """`value` stored under `key` (a context variable, say): masked whole if the key is."""
        return self._masked(value) if self.is_secret_key(key) else self.value(value)

    def text(self, text: str) -> str:
        """Mask secret patterns and known secret values in a string (and in JSON inside it)."""
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

    def _text(self, text: str) -> str:
        if self._triggers is None or self._triggers.search(text):
            text = self._secrets.sub(self._replace, text)
        lowered = text.lower()
        for hint in _KEY_HINTS:
            if hint in lowered:
                break
        else:
            return text
        if text.lstrip()[:1] in ("{", "["):
            parsed = self._json_text(text)
            if parsed is not None:
                return parsed
        for embedded in _EMBEDDED:
            text = embedded.sub(self._embedded, text)
        return text

    def _json_text(self, text: str) -> str | None:
        """A string holding JSON, redacted by key; None if it is not JSON after all."""
        try:
            parsed = orjson.loads(text)
        except orjson.JSONDecodeError:
            return None
        redacted = self.value(parsed)
        if redacted == parsed:
            return text  # nothing masked: keep the exact original text
        return orjson.dumps(redacted).decode()

    def _embedded(self, match: re.Match[str]) -> str:
        if not self.is_secret_key(match.group("key")) or match.group("value") == self.rules.mask:
            return match.group(0)
        start, end = match.span("value")
        offset = match.start()
        whole = match.group(0)
        return whole[: start - offset] + self.rules.mask + whole[end - offset :]

    def _masked(self, value: Any) -> Any:
        """The value under a secret key: scalars are masked; a dict is still searched by key,
        so a JSON Schema property named `token` keeps its schema."""
        if value is None or value == "" or isinstance(value, bool):
            return value
        if isinstance(value, dict):
            return self.value(value)
        if isinstance(value, list | tuple):
            return [self._masked(v) for v in value]
        return self.rules.mask

    def _replace(self, match: re.Match[str]) -> str:
        secret = f"s{match.lastgroup}"  # the alternative `p3` keeps its secret in `sp3`
        if secret in match.re.groupindex and match.group(secret) is not None:
            start, end = match.span(secret)
            offset = match.start()
            whole = match.group(0)
            return whole[: start - offset] + self.rules.mask + whole[end - offset :]
        return self.rules.mask


def _one_pattern(literals: list[str], patterns: list[str]) -> re.Pattern[str]:
    """Every secret value and pattern as one alternation: one pass over each string.

    Alternative i is the group `p{i}`; a pattern's `secret` group becomes `sp{i}`.
    """
    parts = [f"(?P<p{i}>{literal})" for i, literal in enumerate(literals)]
    for index, pattern in enumerate(patterns, start=len(literals)):
        re.compile(pattern)  # a bad extra regex fails here, naming itself
        parts.append(f"(?P<p{index}>{pattern.replace('(?P<secret>', f'(?P<sp{index}>')})")
    return re.compile("|".join(parts)) if parts else re.compile(r"(?!)")
