"""Reading what changed (issue 34, finding 10): a changed commit SHA or id is shown, not masked.

A window cut around a difference ends in `…`, and the fragment rule masks a run of letters and
digits next to a cut as half a token: a changed 40-hex SHA read `'…[REDACTED]…' →
'…[REDACTED]…'` in `replay` and `run` reasons. Hex ids (SHAs, UUIDs, `run_3f9a…`) are not
secrets unless a configured pattern says so; and where both sides of the first difference are
masked anyway, the message shows the nearest difference that is not.
"""

from __future__ import annotations

import hashlib
import uuid

import pytest

from agentbench.replay.diff import Divergence
from agentbench.replay.drift import Change
from agentbench.trace.redaction.redactor import Redactor
from agentbench.trace.redaction.rules import MASK, RedactionRules

SHA_A = hashlib.sha1(b"a").hexdigest()
SHA_B = hashlib.sha1(b"b").hexdigest()


@pytest.mark.parametrize(
    "fragment",
    [
        SHA_A,
        SHA_A[:12],
        str(uuid.UUID(int=0x9F1C2E4A7B3D4C5E8F6A0B1C2D3E4F5A)),
        "run_3f9a0c2e1b7d",
        SHA_A.upper(),
    ],
)
def test_a_hex_id_next_to_a_cut_is_not_masked(fragment: str) -> None:
    redactor = Redactor(environ={})
    for text in (f"commit {fragment}…", f"…{fragment} was deployed"):
        assert redactor.text(text) == text


def test_a_token_next_to_a_cut_still_is_and_a_pattern_can_mask_ids() -> None:
    assert Redactor(environ={}).text("key Qx7Rt9Lp3Mn8…") == f"key {MASK}…"
    sha_is_secret = RedactionRules.extended(patterns=[r"\b[0-9a-f]{40}\b"])
    assert Redactor(sha_is_secret, environ={}).text(f"deploy {SHA_A}") == f"deploy {MASK}"


def test_a_changed_sha_shows_in_a_change_even_redacted_again() -> None:
    change = Change(
        "messages[0].content",
        "changed",
        f"You are on commit {SHA_A} of the repository; be brief.",
        f"You are on commit {SHA_B} of the repository; be brief.",
    )
    shown = change.describe()
    # As `run` and `replay` write it: every reason is redacted again where it is written.
    written = Redactor().text(shown)
    assert SHA_A[:12] in written and SHA_B[:12] in written, written
    assert MASK not in written


def test_both_sides_masked_shows_the_nearest_difference_that_is_not() -> None:
    old = "prefix text here " + "Qx7Rt9Lp3Mn8Vb2Kd5Wq1Zs4" * 2 + " then go north, and stop"
    new = "prefix text here " + "Ab7Rt9Lp3Mn8Vb2Kd5Wq1Zs4" * 2 + " then go south, and stop"
    for shown in (
        Change("messages[1].content", "changed", old, new).describe(),
        Divergence("text_changed", 1, "agent", 1, "final answer", old, new).describe(),
    ):
        written = Redactor().text(shown)
        assert "north" in written and "south" in written, written
        assert f"{MASK}…' → '" not in written
