"""The redaction boundary: before every cut, byte-preserving, and never a cause of a verdict.

A recording holds `[REDACTED]` where the run had secrets; replaying the same code must find no
drift and no divergence. JSON text is rewritten only where something was masked, keeping the
rest byte for byte. A secret cut in half — by the runtime's tool-result limit, a summary's head,
a stream's fragments — still leaves no piece of itself behind, and neither does a log record.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import orjson
import pytest

from agentbench import Agent, ModelSettings, ToolCall, tool
from agentbench.replay.cassette import Cassette
from agentbench.replay.drift import Change, request_diff
from agentbench.replay.masked import fits
from agentbench.replay.replayer import Replayer
from agentbench.replay.session import record_session
from agentbench.runtime.openai_model import OpenAIModel
from agentbench.runtime.retry import RetryPolicy
from agentbench.runtime.tools import truncate_text
from agentbench.testing import OpenAICompatibleServer
from agentbench.trace.redaction.redactor import Redactor
from agentbench.trace.redaction.rules import MASK
from agentbench.trace.redaction.stream import redact_chunks

PASSWORD = "pw-9Qe4Rt7Yu2Io5Pa8"
HEADER = "hdr-3Sd6Fg9Hj2Kl5Zx8"
API_HEADER = "apihdr-7Cv1Bn4Mq8Wr2Ty6"
RESULT_TOKEN = "res-5Ui8Op1As4Df7Gh3"
ENV_SECRET = "envsecret-2Jk5Lz8Xc1Vb4Nm7"
STRADDLE = "sk-straddle4Qw7Er1Ty5Ui9Op3"


def pieces(secret: str, width: int = 8) -> list[str]:
    return [secret[i : i + width] for i in range(len(secret) - width + 1)]


def leaked(text: str, *secrets: str) -> list[str]:
    return [s for s in secrets if any(p in text for p in pieces(s))]


# -- JSON text keeps its bytes ------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '{"username": "ada", "password": "hunter22"}',
            f'{{"username": "ada", "password": "{MASK}"}}',
        ),
        ('{"username":"ada","password":"hunter22"}', f'{{"username":"ada","password":"{MASK}"}}'),
        (
            '{\n  "user": "ad\\u00e9",\n  "pin_token": 123456,\n  "n": [2.5e3, true]\n}',
            f'{{\n  "user": "ad\\u00e9",\n  "pin_token": "{MASK}",\n  "n": [2.5e3, true]\n}}',
        ),
        ('{"username": "ada"}', '{"username": "ada"}'),
    ],
)
def test_json_text_is_rewritten_only_where_masked(text: str, expected: str) -> None:
    assert Redactor(environ={}).text(text) == expected


# -- a secret cut in half leaves no piece behind ----------------------------------------


@pytest.mark.parametrize(
    "cut",
    [
        # The runtime's limit, inside an sk- key, inside an environment secret, inside a value
        # under a secret key of JSON that the cut made invalid.
        lambda: truncate_text("x" * 1984 + " " + STRADDLE + " tail", 2000)[0],
        lambda: truncate_text("z" * 1990 + ENV_SECRET + " tail", 2000)[0],
        lambda: truncate_text(
            orjson.dumps({"log": "y" * 1950, "session": {"access_token": STRADDLE}}).decode(), 2000
        )[0],
        # A head cut with a bare ellipsis (memory summaries, state lines, windows).
        lambda: f"Authorization: Bearer {HEADER[:9]}…",
        lambda: f"the key is {ENV_SECRET[:12]}…",
        lambda: f"…{ENV_SECRET[-12:]} was the key",
    ],
)
def test_a_secret_cut_in_half_leaves_no_piece(cut: Any) -> None:
    text = cut()
    redacted = Redactor(environ={"ACME_TOKEN": ENV_SECRET}).text(text)
    assert not leaked(redacted, STRADDLE, ENV_SECRET, HEADER), redacted
    if "[truncated" in text:  # the marker stays, so a reader still sees the cut
        assert redacted.endswith(text[text.index("\n…[truncated") :])


def test_text_at_a_cut_without_secrets_is_kept() -> None:
    redactor = Redactor(environ={})
    for text in [
        truncate_text("x" * 3000, 2000)[0],
        "Loading… done",
        "the temperature is 21 °C…",
        "… and 3 more changes",
    ]:
        assert redactor.text(text) == text


def test_a_secret_split_over_stream_chunks_is_masked_and_a_clean_stream_kept() -> None:
    def chunk(**delta: Any) -> dict[str, Any]:
        return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta}]}

    arguments = f'{{"user": "ada", "password": "{PASSWORD}"}}'
    text = f"use Bearer {HEADER} now"
    chunks = [chunk(role="assistant", content="")]
    chunks += [chunk(content=text[i : i + 5]) for i in range(0, len(text), 5)]
    chunks += [
        chunk(tool_calls=[{"index": 0, "function": {"arguments": arguments[i : i + 7]}}])
        for i in range(0, len(arguments), 7)
    ]
    redactor = Redactor(environ={})
    masked = redact_chunks(chunks, redactor)
    joined = orjson.dumps(masked).decode()
    assert not leaked(joined, PASSWORD, HEADER)
    deltas = [c["choices"][0]["delta"] for c in masked]
    assert "".join(d.get("content", "") for d in deltas) == f"use Bearer {MASK} now"
    args = "".join(d["tool_calls"][0]["function"]["arguments"] for d in deltas if "tool_calls" in d)
    assert args == f'{{"user": "ada", "password": "{MASK}"}}'
    assert chunks[1]["choices"][0]["delta"]["content"] == text[:5]  # the input is unchanged
    clean = [chunk(content="no "), chunk(content="secrets")]
    assert redact_chunks(clean, redactor) == clean


def test_log_records_are_redacted_message_and_traceback(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="agentbench")
    log = logging.getLogger("agentbench.trace")
    log.warning("could not store runs: %s", f"rejected Bearer {HEADER}")
    try:
        raise RuntimeError(f"upstream said sk-{RESULT_TOKEN}abcdef")
    except RuntimeError:
        log.exception("hook failed")
    logging.getLogger("agentbench.model").info("retrying: password=%s", PASSWORD)
    assert not leaked(caplog.text, HEADER, RESULT_TOKEN, PASSWORD), caplog.text
    assert caplog.text.count(MASK) >= 3


# -- a masked recording matches the current value --------------------------------------


def test_masked_values_fit_what_the_current_code_sends() -> None:
    assert fits(MASK, "anything") and fits(MASK, 12345)
    assert not fits(MASK, None) and not fits(MASK, {"a": 1})
    assert fits(f"Bearer {MASK} and {MASK}.", "Bearer abc and sk-123.")
    assert not fits(f"Bearer {MASK}.", "Basic abc.")
    assert fits(f'{{"user":"ada","password":"{MASK}"}}', '{"user": "ada", "password": "x"}')
    assert fits({"a": [MASK, 2]}, {"a": ["secret", 2]})
    assert not fits({"a": [MASK, 2]}, {"a": ["secret", 3]})


def test_request_drift_ignores_masks_and_still_names_real_changes() -> None:
    def request(system: str, password: str, result: str) -> dict[str, Any]:
        call = {"id": "c1", "type": "function", "function": {"name": "login"}}
        call["function"]["arguments"] = f'{{"user": "ada", "password": "{password}"}}'
        return {
            "model": "m",
            "extra_headers": {"api-key": password},
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": "log in"},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": result},
            ],
        }

    current = request(
        "Be brief.", PASSWORD, f"token {RESULT_TOKEN[:6]}\n…[truncated 9 of 99 chars]"
    )
    recorded = Redactor(environ={}).value(current)
    recorded["extra_headers"]["api-key"] = MASK  # as a masked header is recorded
    recorded["messages"][3]["content"] = f"token {MASK}\n…[truncated 9 of 99 chars]"
    assert request_diff(recorded, current) == []
    changed = request("Be very brief.", PASSWORD, current["messages"][3]["content"])
    assert [c.path for c in request_diff(recorded, changed)] == ["messages[0].content"]


def test_a_change_under_a_secret_key_is_described_without_its_value() -> None:
    change = Change("messages[2].headers.Authorization", "changed", "old-value-1", HEADER)
    assert HEADER not in change.describe() and MASK in change.describe()
    window = Change("messages[0].content", "changed", "x", f"{'y' * 30} Bearer {HEADER} z")
    assert not leaked(window.describe(40), HEADER)


# -- record a run full of secrets, replay it unchanged: 0 drift --------------------------


@tool(effect="read_only")
def login(username: str, password: str, headers: dict) -> dict:
    """Log in.

    Args:
        username: Who.
        password: Their password.
        headers: HTTP headers to send.
    """
    return {
        "session": {"access_token": RESULT_TOKEN, "user": username},
        "note": f"connected with {os.environ['ACME_SERVICE_TOKEN']}",
    }


@tool(effect="read_only")
def read_log() -> str:
    """A log longer than the 2,000-character limit, cut in the middle of a key."""
    return "x" * 1984 + " " + STRADDLE + " " + "y" * 200


def secret_agent(stream: bool) -> Agent:
    return Agent(
        name="vault",
        instructions="Answer briefly.",
        tools=[login, read_log],
        model_settings=ModelSettings(
            stream=stream, extra_body={"extra_headers": {"api-key": API_HEADER}}
        ),
    )


SCRIPT = [
    ToolCall(
        "login",
        {"username": "ada", "password": PASSWORD, "headers": {"Authorization": f"Bearer {HEADER}"}},
    ),
    ToolCall("read_log", {}),
    f"Done: Bearer {HEADER}.",
]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_a_recording_with_secrets_replays_unchanged_with_zero_drift(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    monkeypatch.setenv("ACME_SERVICE_TOKEN", ENV_SECRET)
    path = tmp_path / "vault.yaml"
    with OpenAICompatibleServer(list(SCRIPT)) as server:
        async with OpenAIModel(
            "test-model",
            base_url=server.base_url,
            api_key="sk-unused-000000000000000000",
            retry=RetryPolicy(max_attempts=1),
        ) as model:
            await record_session(
                secret_agent(stream),
                "log me in",
                model=model,
                path=path,
                context={"api_key": PASSWORD, "user": "ada"},
            )
    text = path.read_text()
    assert not leaked(text, PASSWORD, HEADER, API_HEADER, RESULT_TOKEN, ENV_SECRET, STRADDLE)
    cassette = Cassette.load(path)
    # The model wrote `{"username": "ada", …}`: only the masked values differ from it.
    call = cassette.interactions[1].request["messages"][2]["tool_calls"][0]
    assert call["function"]["arguments"] == (
        f'{{"username": "ada", "password": "{MASK}", "headers": {{"Authorization": "{MASK}"}}}}'
    )
    for strict in (False, True):
        report = await Replayer(secret_agent(stream), strict=strict).replay(cassette)
        assert report.drifts == [], report.render()
        assert not report.diverged, report.render()
