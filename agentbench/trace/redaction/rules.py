"""What counts as a secret: `RedactionRules` and its defaults.

Three kinds of rule, applied to nested values of any depth:

* **key names** — the value under a key such as `Authorization`, `x-api-key`, `password`,
  `github_token` or `client_secret` is masked whole. A key matches when its last words
  (camelCase, `-`, `.` and `_` all split words) are one of the configured names, so
  `max_tokens`, `input_tokens` and `token_budget` are left alone.
* **patterns** in any string: `sk-…` keys, `Bearer …` credentials, GitHub and Slack tokens,
  AWS access key ids, JWTs, plus any extra regexes.
* **known secret values**: the values of environment variables whose names are secret by the
  rule above (`OPENAI_API_KEY`, `DB_PASSWORD`…) are masked wherever they appear, in every
  spelling they can have there (see `secret_forms`), as are literal values given in the rules
  and those a redactor learns (see `redactor`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

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
PATTERN_TRIGGERS: dict[str, tuple[str, ...]] = {
    r"\bsk-[A-Za-z0-9_\-]{16,}": ("sk-",),
    r"\b[Bb]earer\s+(?P<secret>[A-Za-z0-9._~+/=\-]{8,})": ("earer",),
    r"\bBasic\s+(?P<secret>[A-Za-z0-9+/]{8,}={0,2})": ("Basic",),
    r"\bgh[pousr]_[A-Za-z0-9]{20,}": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    r"\bxox[abprs]-[A-Za-z0-9\-]{10,}": ("xox",),
    r"\bAKIA[0-9A-Z]{16}\b": ("AKIA",),
    r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}": ("eyJ",),
}
DEFAULT_PATTERNS: tuple[str, ...] = tuple(PATTERN_TRIGGERS)
# What `clean` searches for instead: parts of the same literals (any match still contains
# one) chosen to start with uncommon characters. A regex alternation tries its branches at
# every position holding one of their first characters, and `s` and `e` are everywhere in
# text: this one runs ~1.5x faster than the triggers over prose and JSON.
PATTERN_TELLS: dict[str, tuple[str, ...]] = {
    r"\bsk-[A-Za-z0-9_\-]{16,}": ("k-",),
    r"\b[Bb]earer\s+(?P<secret>[A-Za-z0-9._~+/=\-]{8,})": ("Bearer", "bearer"),
    r"\bBasic\s+(?P<secret>[A-Za-z0-9+/]{8,}={0,2})": ("Basic",),
    r"\bgh[pousr]_[A-Za-z0-9]{20,}": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    r"\bxox[abprs]-[A-Za-z0-9\-]{10,}": ("xox",),
    r"\bAKIA[0-9A-Z]{16}\b": ("AKIA",),
    r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}": ("yJ",),
}

# The shortest secret searched for in text: a shorter string is not searched at all, and an
# environment variable's shorter value is not taken for a secret.
MIN_SECRET_CHARS = 8
# The shortest value learned from a field and then masked wherever it occurs (see
# `Redactor._learn`): shorter ones — a four-letter password, a one-character one — would mask
# every occurrence of a common word or letter; they are masked in their own field only.
MIN_LEARNED_CHARS = MIN_SECRET_CHARS
MAX_LEARNED = 1_000  # values one redactor learns at most (see `Redactor._learn`)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_WORD_SPLIT = re.compile(r"[^a-z0-9]+")


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
