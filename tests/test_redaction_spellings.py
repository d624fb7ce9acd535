"""A learned secret is masked in every spelling it is written in (issue 34, finding 2).

A redactor that learned `Corp\\svc-backup99` (a tool's `password` argument) masked it where
it stood as it is, and nowhere it stood JSON-escaped: `{"q": "Corp\\\\svc-backup99"}` kept it,
as did `\\u00e9` for an `é` (JSON written ASCII-only), `\\ud83d\\ude00` for an emoji, and the
doubled escapes of JSON inside a JSON string. A run that met the password `pa"ss\\w0rd!x9` in
its input, a `login(password=…)` and a `lookup(query=…)` kept it in clear in its stored
requests and responses (so in reports, Parquet, cassettes and the OTel export), and its "State
so far" line masked its first two characters only: `"password": "[REDACTED]\\"ss\\\\w0rd!x9"`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_redaction_json_escapes import documents as written
from test_redaction_json_escapes import strings
from test_redaction_learned import text_cells

from agentbench import Agent, Limits, Runner, ScriptedModel, ToolCall, tool
from agentbench.trace import TraceStore
from agentbench.trace.redaction.redactor import Redactor
from agentbench.trace.redaction.rules import MASK

SECRETS = {
    "backslash": "Corp\\svc-backup99",
    "quote and backslash": 'pa"ss\\w0rd!x9',
    "tab": "tab\there-pass-77",
    "accent": "caf\u00e9-au-lait-42",
    "emoji": "grin\U0001f600-face-42",
    "ends in a backslash": "trailing-slash-9\\",
}


def spelled(secret: str) -> list[str]:
    """How `secret` can be written: as it is, JSON-escaped (non-ASCII as it is or escaped),
    and JSON-escaped twice (JSON inside a JSON string)."""
    once = {secret, json.dumps(secret)[1:-1], orjson.dumps(secret).decode()[1:-1]}
    twice = {json.dumps(form)[1:-1] for form in once} | {
        orjson.dumps(form).decode()[1:-1] for form in once
    }
    return sorted(once | twice, key=len, reverse=True)


def holds(text: str, secret: str) -> bool:
    return any(form in text for form in spelled(secret))


def documents(secret: str) -> dict[str, str]:
    """`secret` inside text every way a writer puts it there."""
    value = {"q": f"look up {secret} please", "s": secret, "n": 1}
    inner = json.dumps(value)
    return {
        "json.dumps": json.dumps(value),
        "json.dumps, not ASCII-only": json.dumps(value, ensure_ascii=False),
        "orjson": orjson.dumps(value).decode(),
        "JSON in JSON": json.dumps({"result": inner}),
        "JSON in JSON, orjson": orjson.dumps({"result": orjson.dumps(value).decode()}).decode(),
        "a line quoting JSON": f"tool said {inner} and stopped",
        "a line quoting JSON in JSON": f"log: {json.dumps({'result': inner})}",
    }


def learned(secret: str) -> Redactor:
    redactor = Redactor(environ={})
    assert redactor.value({"password": secret}) == {"password": MASK}
    assert secret in redactor.learned
    return redactor


@pytest.mark.parametrize("name", SECRETS)
def test_a_learned_secret_is_masked_in_every_spelling(name: str) -> None:
    secret = SECRETS[name]
    redactor = learned(secret)
    for how, document in documents(secret).items():
        assert holds(document, secret), how  # the probe holds the secret to begin with
        for redact in (redactor.text, redactor.document):
            masked = redact(document)
            assert not holds(masked, secret), (how, masked)
            assert MASK in masked, (how, masked)
            assert redact(masked) == masked, how  # redaction is idempotent
            if document.startswith("{"):  # JSON stays JSON, the rest of it unchanged
                parsed = json.loads(masked)
                assert parsed.get("n", 1) == 1 and "look up" in json.dumps(parsed), how


@pytest.mark.parametrize("name", SECRETS)
def test_a_learned_secret_is_masked_in_json_and_json_text(name: str) -> None:
    """The fast paths (`json` dumps and scans the document; `json_text` reads a stored
    column) find it escaped as well."""
    secret = SECRETS[name]
    redactor = learned(secret)
    nested = {"result": json.dumps({"q": secret}), "plain": secret, "list": [f"x {secret} y"]}
    dumped = redactor.json(nested)
    assert not holds(dumped, secret), dumped
    assert orjson.loads(dumped)["plain"] == MASK
    assert json.loads(orjson.loads(dumped)["result"]) == {"q": MASK}
    column = redactor.json_text(json.dumps(nested))
    assert not holds(column, secret) and json.loads(column)["list"] == [f"x {MASK} y"]


# Secrets made of what JSON escapes and what it writes as it is, with a run of letters (a
# learned value is never a key's own name, nor only digits).
_AWKWARD = st.text(
    alphabet=st.sampled_from(list('"\\\t\n\x01/<>&u0e9\u00e9\U0001f600\u2028 ')),
    min_size=2,
    max_size=8,
)
_LEARNABLE = st.tuples(_AWKWARD, _AWKWARD).map(lambda p: p[0] + "Qz7Wx9" + p[1])
_AROUND = st.text(alphabet=st.sampled_from(list('ab "\\\n\u00e9:{}[]…')), max_size=10)


@settings(max_examples=300, deadline=None)
@given(_LEARNABLE, _AROUND, _AROUND)
@example("x\\Qz7Wx9\\", '"', '"')
@example('"\\Qz7Wx9\u00e9', "\\", "\\n")
def test_a_learned_secret_leaves_json_parseable_and_holds_no_spelling(
    secret: str, before: str, after: str
) -> None:
    redactor = learned(secret)
    for document in written(before + secret + after):
        for redacted in (redactor.document(document), redactor.text(document)):
            shown = strings(json.loads(redacted))  # never raises
            assert not any(holds(s, secret) for s in shown), (secret, document, redacted)


def test_the_state_line_masks_the_whole_escaped_password() -> None:
    redactor = learned('pa"ss\\w0rd!x9')
    state = '- login({"user": "ada", "password": "pa\\"ss\\\\w0rd!x9"}) → ok'
    assert redactor.text(state) == '- login({"user": "ada", "password": "[REDACTED]"}) → ok'


def test_a_quoted_value_with_escapes_is_masked_whole_the_first_time() -> None:
    """Before anything was learned, the value of a `"password": "…"` pair, or of a Python
    dict's `'password': '…'`, runs to its closing quote, past escaped quotes and backslashes."""
    redactor = Redactor(environ={})
    line = 'called login({"user": "ada", "password": "pa\\"ss\\\\w0rd!x9"}) → ok'
    assert redactor.text(line) == 'called login({"user": "ada", "password": "[REDACTED]"}) → ok'
    shown = str({"user": "ada", "password": 'pa"ss\\w0rd!x9'})
    assert redactor.text(shown) == "{'user': 'ada', 'password': '[REDACTED]'}"


@tool(effect="read_only")
def login(user: str, password: str) -> dict[str, Any]:
    """Log a user in.

    Args:
        user: Who.
        password: Their password.
    """
    return {"session": "ok", "greeting": f"welcome back; {password} still works"}


@tool(effect="read_only")
def lookup(query: str) -> str:
    """Look something up.

    Args:
        query: What.
    """
    return f"nothing about {query} (visible-marker-3d3d)"


@pytest.mark.parametrize("process", [False, True], ids=["recorded_here", "recording_process"])
@pytest.mark.parametrize("name", ["quote and backslash", "accent", "emoji"])
def test_a_run_stores_no_spelling_of_a_password_it_learned(
    tmp_path: Path, process: bool, name: str
) -> None:
    secret = SECRETS[name]
    model = ScriptedModel(
        [
            ToolCall("login", {"user": "ada", "password": secret}),
            ToolCall("lookup", {"query": secret}),
            f"Done: {secret} works.",
        ]
    )
    store = TraceStore(tmp_path / "traces.duckdb", recording_process=process)
    agent = Agent(
        name="vault",
        instructions="Answer briefly.",
        tools=[login, lookup],
        limits=Limits(max_iterations=10),
    )
    Runner.run_sync(agent, f"log me in; my password is {secret}", model=model, store=store)
    store.flush()
    store.close()
    cells = text_cells(tmp_path / "traces.duckdb")
    assert any("visible-marker-3d3d" in cell for cell in cells)  # the scan reads real content
    assert [cell for cell in cells if holds(cell, secret)] == []
