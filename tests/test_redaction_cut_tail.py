"""The end of a cut piece is searched from its last run of token characters only: that must
find exactly what a search of the whole piece finds (what `_cut_tail` did before)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentbench.trace.redaction import cuts as redact
from agentbench.trace.redaction.redactor import Redactor

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

# Token characters, the secret prefixes' letters, and the separators around them.
_ALPHABET = st.sampled_from(list("sk-ghpxoAKIAeyJ_./+=~ab09 \"':,\n…é"))
_PIECES = st.lists(
    st.one_of(
        _ALPHABET,
        st.sampled_from(["sk-", "ghp_", "xoxb-", "AKIA", "eyJ", "Bearer ", "Basic ", "token="]),
    ),
    max_size=40,
).map("".join)


def _whole_search_cut_tail(redactor: Redactor, piece: str) -> str:
    """`_cut_tail` as it was, searching the whole piece."""
    mask = redactor.rules.mask
    for secret in redactor._literals:
        for length in range(min(len(secret) - 1, len(piece)), redact._MIN_PARTIAL - 1, -1):
            if piece.endswith(secret[:length]):
                return piece[:-length] + mask
    partial = redact._PARTIAL_SECRET.search(piece)
    if partial is not None:
        return piece[: partial.start()] + mask
    token = redact._TAIL_TOKEN.search(piece)
    if token is not None and (
        redact._AUTH_BEFORE.search(piece, 0, token.start()) is not None
        or redact._token_like(token.group())
    ):
        return piece[: token.start()] + mask
    return piece


@settings(max_examples=600, deadline=None)
@given(_PIECES)
def test_cut_tail_matches_a_search_of_the_whole_piece(piece: str) -> None:
    redactor = Redactor()
    assert redactor._cut_tail(piece) == _whole_search_cut_tail(redactor, piece)


def test_a_secret_cut_at_the_end_of_a_long_text_is_masked() -> None:
    piece = "word " * 2_000 + 'config: {"key": "sk-' + "A1b2" * 10
    assert Redactor()._cut_tail(piece).endswith('"key": "' + Redactor().rules.mask)
