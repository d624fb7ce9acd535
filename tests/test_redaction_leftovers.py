"""What a key-value rule leaves of a secret is masked once the whole is known (issue 34,
finding 2).

A passphrase typed before a tool argument names it — `my password: correct horse battery
staple`, then `login(password="correct horse battery staple")` — was masked by the `key: value`
rule up to its first space, and once the whole was learned it no longer matched what was left:
`my password: [REDACTED] horse battery staple`, in the stored input too, since the run's end
masks the stored rows again with what was learned and found nothing. A value that held a
masked secret, `password: <hunter2hunter2>` with `hunter2hunter2` known, came out
`[REDACTED]]>` and taught the redactor `<[REDACTED` as a secret.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_redaction_learned import text_cells
from test_redaction_spellings import login, lookup

from agentbench import Agent, Limits, Runner, ScriptedModel, ToolCall
from agentbench.trace import TraceStore
from agentbench.trace.redaction.redactor import Redactor
from agentbench.trace.redaction.rules import MASK

PHRASE = "correct horse battery staple"


def test_the_rest_of_a_passphrase_goes_once_the_whole_is_learned() -> None:
    redactor = Redactor(environ={})
    first = redactor.text(f"my password: {PHRASE}")
    assert first == f"my password: {MASK} horse battery staple"  # all the rule can tell then
    redactor.value({"password": PHRASE})
    assert redactor.text(first) == f"my password: {MASK}"
    assert redactor.text(f"my password: {PHRASE}") == f"my password: {MASK}"
    # JSON text, and what is left of a value that held quotes and backslashes.
    assert (
        redactor.json_text(f'{{"content": "{first}"}}') == f'{{"content": "my password: {MASK}"}}'
    )
    quoted = Redactor(environ={})
    quoted.value({"password": 'pa"ss\\w0rd!x9'})
    left = f'"password": "{MASK}\\"ss\\\\w0rd!x9"'  # what the old rule made of it
    assert quoted.text(left) == f'"password": "{MASK}"'
    # Idempotent: a leftover repeated goes at once; less than all of one is not one.
    for text in (
        f"{MASK} horse battery staple horse battery staple, then more",
        f"a: {MASK} horse battery staple; b: {MASK}",
        f"{MASK} horse battery",
    ):
        once = redactor.text(text)
        assert redactor.text(once) == once, text
    assert redactor.text(f"{MASK} horse battery") == f"{MASK} horse battery"


@pytest.mark.parametrize(
    "text",
    ["password: <hunter2hunter2>", "password=<hunter2hunter2>", "password: x-hunter2hunter2-y"],
)
def test_a_value_holding_a_masked_secret_is_masked_whole_once(text: str) -> None:
    redactor = Redactor(environ={})
    redactor.value({"password": "hunter2hunter2"})
    masked = redactor.text(text)
    assert masked == text.split("<")[0].split("x-")[0] + MASK, masked
    assert redactor.learned == {"hunter2hunter2"}  # nothing holding the mask is learned
    assert redactor.text(masked) == masked


@pytest.mark.parametrize("process", [False, True], ids=["recorded_here", "recording_process"])
def test_a_passphrase_typed_before_its_tool_call_is_masked_whole_in_the_store(
    tmp_path: Path, process: bool
) -> None:
    agent = Agent(
        name="vault",
        instructions="Answer briefly.",
        tools=[login, lookup],
        limits=Limits(max_iterations=10),
    )
    model = ScriptedModel(
        [
            ToolCall("lookup", {"query": "the weather"}),
            ToolCall("login", {"user": "ada", "password": PHRASE}),
            "Logged in.",
        ]
    )
    store = TraceStore(tmp_path / "traces.duckdb", recording_process=process)
    result = Runner.run_sync(agent, f"log me in, my password: {PHRASE}", model=model, store=store)
    store.flush()
    try:
        cells = text_cells(tmp_path / "traces.duckdb")
        assert any("visible-marker-3d3d" in cell for cell in cells)
        assert [cell for cell in cells if "horse battery" in cell] == []
        assert store.run(result.run_id).run.decoded()["input"] == f"log me in, my password: {MASK}"
    finally:
        store.close()
