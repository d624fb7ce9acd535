"""Redaction never breaks JSON: a mask never splits an escape sequence (issue 34, finding 3).

An HTML report embeds its data as JSON with `<`, `>` and `&` written `\\u003c`…; output holding
HTML that was cut left `\\u003e…` there, and the fragment rule masked `u003eline2` as if it were
half a token: `\\[REDACTED]`, invalid JSON, so the report's data block did not parse and no case
opened. The property: whatever the text, with secrets planted at cuts and next to escape
sequences, every way it is written as JSON (plain, ASCII-escaped, for a script tag, inside
another JSON string) redacts to JSON that parses and holds no secret; and text with no secret
in it comes back unchanged.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agentbench.report.embed import script_json
from agentbench.trace.redaction.redactor import Redactor

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

ENV_SECRET = "Kt7EnvSecretValue42"  # holds `k` and `t`: the clean alphabet below cannot spell it
SK_KEY = "sk-" + "Ab3Cd4Ef5Gh6Ij7Kl8Mn9"
BEARER = "Zy9Xw8Vu7Ts6Rq5Po4"
PASSWORD = "Pw8Qr7St6Uv5Wx4"
SECRETS = (ENV_SECRET, SK_KEY, BEARER, PASSWORD)
CUT = "\n…[truncated 1,204 of 3,204 chars]"

# What JSON escapes, and what the report's script tags escape besides.
ESCAPED = ["<", ">", "&", '"', "\\", "\n", "\t", "\x00", "\x1f", "\u2028", "/", "\\u2026"]
CUTS = ["…", CUT]
# Secrets as they are met, set apart from what is around them (a pattern's token glued to
# other letters is no token; a key glued to other letters is another key): whole, after their
# scheme or key (the password is a secret only there), and half of the environment's at a cut
# (its first half before one, its last half after one).
PLANTED = [
    f" {ENV_SECRET} ",
    f" {SK_KEY} ",
    f" Bearer {BEARER} ",
    f" password={PASSWORD} ",
    f' {{"password": "{PASSWORD}"}} ',
    f" {ENV_SECRET[:9]}…",
    f"…{ENV_SECRET[-9:]} ",
]
_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
_PIECE = st.one_of(_TEXT, st.sampled_from(ESCAPED), st.sampled_from(CUTS), st.sampled_from(PLANTED))
WITH_SECRETS = st.lists(_PIECE, max_size=14).map("".join).map(lambda t: t + " " + SK_KEY)

# No letter of any rule's name, pattern or scheme (`key`, `token`, `secret`, `password`,
# `cookie`, `credential`, `authorization`, `sk-`, `ghp_`, `xox`, `AKIA`, `eyJ`, `Bearer`,
# `Basic`): nothing a rule could find, so nothing may change — cut marks aside, which make
# any run of letters and digits next to them suspect; beside cuts only hex and digits.
_CLEAN_CHARS = st.characters(blacklist_categories=("Cs",), blacklist_characters="bdhjktxBDHJKTX…")
CLEAN = st.lists(
    st.one_of(st.text(alphabet=_CLEAN_CHARS, max_size=12), st.sampled_from(ESCAPED)), max_size=14
).map("".join)
_HEX_AND_MARKS = st.sampled_from(list('0123456789acef <>&"\\\n\t\u2028{}[]:,')) | st.sampled_from(
    [*CUTS, "86f7e437faa5a7fce15d1ddcb9eaeaea377667b8", "9f1c2e4a-7b3d-4c5e-8f6a-0b1c2d3e4f5a"]
)
CLEAN_WITH_CUTS = st.lists(_HEX_AND_MARKS, max_size=30).map("".join)


def documents(text: str) -> list[str]:
    """`text` in a JSON document every way one is written: compact, ASCII-escaped, for a
    `<script>` block, and as a string inside another document (a tool's JSON result)."""
    value: dict[str, Any] = {"out": text, "list": [text, 1, None]}
    plain = orjson.dumps(value).decode()
    return [
        plain,
        json.dumps(value),
        str(script_json(value)),
        orjson.dumps({"result": plain}).decode(),
    ]


def strings(value: Any) -> list[str]:
    """Every string in a parsed document, and in JSON documents inside its strings."""
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (k, *strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    if isinstance(value, str):
        try:
            inner = json.loads(value)
        except ValueError:
            return [value]
        return [value, *strings(inner)] if isinstance(inner, dict | list) else [value]
    return []


def redactor() -> Redactor:
    return Redactor(environ={"ACME_SERVICE_TOKEN": ENV_SECRET})


def test_a_cut_html_output_keeps_the_report_json_parseable() -> None:
    """The review's case: HTML output cut after a tag, embedded in the report's data block."""
    output = "<ul><li>first</li><li>line2 of the answer</li></ul><br>line2…"
    block = str(script_json({"output": output}))
    redacted = redactor().document(block)
    assert "\\[REDACTED]" not in redacted
    assert json.loads(redacted) == {"output": output}


@settings(max_examples=400, deadline=None)
@given(WITH_SECRETS)
@example("<br>line2…" + SK_KEY)
@example("\n" + ENV_SECRET + "\\" + SK_KEY + "\\n password=" + PASSWORD)
@example(f"<b>password={PASSWORD}</b>…<i>Bearer {BEARER}")
@example(f"{ENV_SECRET[:9]}…{ENV_SECRET[-9:]} {SK_KEY}")
def test_redacted_json_parses_and_holds_no_secret(text: str) -> None:
    for document in documents(text):
        for redacted in (redactor().document(document), redactor().text(document)):
            parsed = json.loads(redacted)  # never raises
            shown = strings(parsed)
            for secret in SECRETS:
                assert not any(secret in s for s in shown), (secret, document, redacted)
            assert not any(ENV_SECRET[:9] in s or ENV_SECRET[-9:] in s for s in shown)


@settings(max_examples=400, deadline=None)
@given(st.one_of(CLEAN, CLEAN_WITH_CUTS))
@example("\\u2026abc123456789")  # a backslash, then `u2026`: no cut
@example("86f7e437faa5a7fce15d1ddcb9eaeaea377667b8…")
def test_text_without_secrets_is_unchanged(text: str) -> None:
    for document in documents(text):
        assert redactor().document(document) == document
        assert redactor().text(document) == document
