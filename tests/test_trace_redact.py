"""Redaction: the rules, and a canary planted everywhere that reaches no byte of the store."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest

from agentbench import Agent, ChatResponse, FunctionModel, ModelSettings, Runner, ToolCall, tool
from agentbench.trace import RedactionRules, Redactor, TraceStore
from agentbench.trace.redaction import detector as redact_module
from agentbench.trace.redaction.rules import MASK
from tests.lock_holder import lock_held


def test_secret_keys_are_masked_at_any_depth_and_counts_are_not() -> None:
    redactor = Redactor(environ={})
    value = {
        "headers": {"Authorization": "Basic dXNlcjpwYXNz", "X-Api-Key": "k-1", "Accept": "json"},
        "deep": [{"level": {"clientSecret": "s-1", "password": "p-1", "passwordHint": "pets"}}],
        "usage": {"input_tokens": 12, "max_tokens": 100, "token_budget": 5},
        "schema": {"properties": {"token": {"type": "string"}}},
        "githubToken": ["t-1", "t-2"],
        "empty_password": "",
    }
    assert redactor.value(value) == {
        "headers": {"Authorization": MASK, "X-Api-Key": MASK, "Accept": "json"},
        "deep": [{"level": {"clientSecret": MASK, "password": MASK, "passwordHint": "pets"}}],
        "usage": {"input_tokens": 12, "max_tokens": 100, "token_budget": 5},
        "schema": {"properties": {"token": {"type": "string"}}},
        "githubToken": [MASK, MASK],
        "empty_password": "",
    }
    assert value["headers"]["X-Api-Key"] == "k-1"  # the input is never changed


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("key sk-proj-abcdefghijklmnop1234", f"key {MASK}"),
        ("Authorization: Bearer eyJhbGciOi.x-y_z", f"Authorization: Bearer {MASK}"),
        ("token ghp_abcdefghijklmnopqrstuvwxyz0123", f"token {MASK}"),
        ("id AKIAABCDEFGHIJKLMNOP here", f"id {MASK} here"),
        ("GET /v1?api_key=abc123&page=2", f"GET /v1?api_key={MASK}&page=2"),
        ("(token=abc123xyz)", f"(token={MASK})"),
        (
            'login({"user": "ada", "password": "hunter22"}) → ok',
            f'login({{"user": "ada", "password": "{MASK}"}}) → ok',
        ),
        # Only the masked value is rewritten: separators and spacing stay byte for byte.
        ('{"user": "ada", "secret": "x1"}', f'{{"user": "ada", "secret": "{MASK}"}}'),
        ('{"user": "ada"}', '{"user": "ada"}'),  # nothing masked: the text is kept exactly
        ("sk-learn is a library", "sk-learn is a library"),
        ("a password is needed", "a password is needed"),
        # A tool's result the runtime gave the model as Python shows it, a shell line, a log
        # or YAML line: quoted and unquoted values after `=` and `:`.
        (
            "{'user': 'ada', 'password': 'hunter22'}",
            f"{{'user': 'ada', 'password': '{MASK}'}}",
        ),
        ("Quote(price=4.5, api_key='abc-value-9')", f"Quote(price=4.5, api_key='{MASK}')"),
        ('export ACME_TOKEN="tok-123456"', f'export ACME_TOKEN="{MASK}"'),
        ('client_secret = "s3cr3t" here', f'client_secret = "{MASK}" here'),
        ("password: hunter22\nuser: ada", f"password: {MASK}\nuser: ada"),
        ("max_tokens: 5, input_tokens: 40", "max_tokens: 5, input_tokens: 40"),
    ],
)
def test_patterns_in_text(text: str, expected: str) -> None:
    assert Redactor(environ={}).text(text) == expected


def test_configured_keys_patterns_and_environment_secrets() -> None:
    rules = RedactionRules.extended(keys=["ssn"], patterns=[r"\bCASE-\d{6}\b"])
    redactor = Redactor(rules, environ={"ACME_DB_PASSWORD": "s3cret-value", "HOME": "/root/home"})
    assert redactor.value({"ssn": "123-45-6789", "note": "see CASE-123456; pw s3cret-value"}) == {
        "ssn": MASK,
        "note": f"see {MASK}; pw {MASK}",
    }
    assert redactor.text("/root/home") == "/root/home"  # HOME is not secret-named


def all_bytes(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())


def text_cells(db: Path) -> list[str]:
    conn = duckdb.connect(str(db), read_only=True)
    try:
        cells = []
        columns = conn.execute(
            "SELECT table_name, column_name FROM duckdb_columns() "
            "WHERE data_type = 'VARCHAR' AND NOT internal AND schema_name = 'main'"
        ).fetchall()
        for table, column in columns:
            cells += [r[0] for r in conn.execute(f'SELECT "{column}" FROM "{table}"').fetchall()]
        return [c for c in cells if c is not None]
    finally:
        conn.close()


def test_a_canary_reaches_no_byte_of_the_store_or_its_spool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env_canary = "envcanary-5f1c2e9a7b"  # matches no pattern: only the environment rule finds it
    canaries = {
        env_canary,
        "sk-canary0000111122223333",
        "hdrcanary-a1b2c3d4",
        "reqcanary-e5f6a7b8",
        "argcanary-c9d0e1f2",
        "outcanary-a3b4c5d6",
    }
    marker = "visible-marker-7e7e"  # not secret: proves the scans see real content
    monkeypatch.setenv("ACME_SERVICE_TOKEN", env_canary)

    @tool(effect="write")
    def login(user: str, password: str) -> dict[str, Any]:
        """Log in."""
        import os

        return {
            "session": {"access_token": "outcanary-a3b4c5d6", "user": user},
            "note": f"connected with {os.environ['ACME_SERVICE_TOKEN']} ({marker})",
        }

    def answer(request: dict[str, Any], info: Any) -> Any:
        raw = {
            "headers": {
                "Authorization": "Bearer hdrcanary-a1b2c3d4",
                "x-api-key": "hdrcanary-a1b2c3d4",
            }
        }
        if info.index == 0:
            call = ToolCall("login", {"user": "ada", "password": "argcanary-c9d0e1f2"})
            return ChatResponse(tool_calls=[call], finish_reason="tool_calls", raw=raw)
        return ChatResponse(text="logged in", finish_reason="stop", raw=raw)

    agent = Agent(
        name="auth",
        tools=[login],
        model_settings=ModelSettings(
            extra_body={"extra_headers": {"api-key": "reqcanary-e5f6a7b8"}}
        ),
    )
    db = tmp_path / "store" / "traces.duckdb"
    db.parent.mkdir()
    with lock_held(db):
        store = TraceStore(db)
        result = Runner.run_sync(
            agent,
            "log me in; my key is sk-canary0000111122223333",
            model=FunctionModel(answer),
            context={"api_key": "sk-canary0000111122223333", "user": "ada"},
            store=store,
        )
        assert result.completed
        spooled = all_bytes(db.parent / "traces.duckdb.spool")  # the store is locked: all here
        assert marker.encode() in spooled
        assert not [c for c in canaries if c.encode() in spooled]
    store.flush()
    store.close()

    cells = text_cells(db)
    assert any(marker in cell for cell in cells)
    assert not [c for c in canaries for cell in cells if c in cell]
    stored = all_bytes(db.parent)
    assert not [c for c in canaries if c.encode() in stored]


def test_only_the_listed_characters_lower_to_ascii() -> None:
    # `clean` lowers a text's bytes (ASCII letters only) unless it holds one of these.
    found = tuple(
        chr(code)
        for code in range(0x80, sys.maxunicode + 1)
        if not 0xD800 <= code <= 0xDFFF and any(c.isascii() for c in chr(code).lower())
    )
    assert found == redact_module._LOWER_TO_ASCII


def test_a_hint_spelled_with_a_kelvin_sign_is_seen_as_the_text_lowers_it() -> None:
    redactor = Redactor(environ={})
    assert not redactor.clean('{"note": "api_\u212aey=abcdefgh12345678 → ok"}')  # api_key=…
    assert not redactor.clean_change("x api_\u212aey=1 → ok", 2, 9)
    assert redactor.clean('{"note": "a keyboard → ok"}')  # a hint inside a word, as before


def _clean_as_spelled_out(redactor: Redactor, text: str) -> bool:
    """What `clean` promises, the slow plain way: no tell (a pattern's literal or a known
    secret value), no cut mark, and no secret key's last word ending a word of the lowered
    text."""
    if redactor._tells is not None and redactor._tells.search(text):
        return False
    if "…" in text or "\\u2026" in text:
        return False
    return not redact_module._ends_a_word(
        text.lower(), redactor._end_hints, redact_module._WORD_CHARS
    )


@pytest.mark.parametrize(
    "rules",
    [
        RedactionRules(patterns=()),
        RedactionRules(patterns=(), secret_values=("hunter2hunter2",)),
        RedactionRules(keys=("x-auth", "sessionId", "k9")),
        RedactionRules(secret_values=("pässwörd-ünïcode",)),
    ],
    ids=["no patterns", "a secret value", "keys and default patterns", "non-ASCII value"],
)
def test_the_one_pass_scan_answers_as_each_test_spelled_out(rules: RedactionRules) -> None:
    """`clean` looks for every tell, cut mark and key hint in one pass over the text's bytes
    (a hint in any ASCII case, then no letter or digit); it must answer exactly as the tests
    one by one on the text do, including beside non-ASCII letters."""
    import random

    redactor = Redactor(rules, environ={})
    rng = random.Random(7)
    atoms = [
        *("key", "KEY", "Key", "auth", "AUTH", "session", "Id", "token", "secret", "k9", "K9"),
        *("hunter2hunter2", "HUNTER2HUNTER2", "pässwörd-ünïcode", "sk-", "Bearer ", "xox"),
        *("…", "\\u2026", "İ", "\u212a", "ſ", "é", "_", "-", " ", '"', ":", "a", "0", "x"),
    ]
    disagreements = []
    for _ in range(20_000):
        text = "".join(rng.choice(atoms) for _ in range(rng.randint(0, 6)))
        if redactor.clean(text) != _clean_as_spelled_out(redactor, text):
            disagreements.append(text)
        elif redactor.clean(text.encode()) != redactor.clean(text):
            disagreements.append(text.encode())
    assert disagreements == []
