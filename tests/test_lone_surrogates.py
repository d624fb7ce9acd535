"""Text the store cannot hold as it is — a lone surrogate, half of a UTF-16 pair (a tool or a
model that cut an emoji in two), an integer beyond 64 bits — is stored repaired, and the
step it came in is flagged; the run is never lost, no value stored as NULL for it.

Issue 34, finding 5: a tool returning half an emoji was stored with a NULL result, and a
run whose input held `"\\ud800"` was not stored at all (orjson refuses lone surrogates).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from agentbench import Agent, OpenAIModel, RetryPolicy, Runner, ScriptedModel, ToolCall, tool
from agentbench.cli import main
from agentbench.replay.replayer import Replayer
from agentbench.replay.session import record_session
from agentbench.runtime.tools import ToolResult
from agentbench.testing import OpenAICompatibleServer
from agentbench.trace import TraceStore, _json, repairs

HALF_EMOJI = "smile \ud83d"  # the first half of 😀 (U+1F600), as a tool cut it


@tool(effect="read_only")
def shorten(text: str) -> str:
    """Cut the text to fit: mid-emoji."""
    return HALF_EMOJI


@tool(effect="read_only")
def failing(text: str) -> ToolResult:
    """Fail with a message holding half an emoji."""
    return ToolResult.business_failure(f"no entry for {text} \udc00")


@tool(effect="read_only")
def count(text: str) -> dict[str, Any]:
    """A count too big for 64 bits."""
    return {"grains": 2**70}


@pytest.fixture(params=[False, True], ids=["here", "recording_process"])
def store(tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    made = TraceStore(tmp_path / "traces.duckdb", recording_process=request.param)
    yield made
    made.close()


def notes(trace: Any) -> dict[int, dict[str, Any]]:
    return {e.seq: orjson.loads(e.payload) for e in trace.events if e.kind == repairs.KIND}


async def test_half_an_emoji_from_a_tool_a_model_and_the_input_is_stored_and_flagged(
    store: TraceStore,
) -> None:
    model = ScriptedModel([ToolCall("shorten", {"text": "hi"}), "the answer \udc00 ends"])
    agent = Agent(name="cutter", tools=[shorten])
    result = await Runner.run(agent, "input \ud800", model=model, store=store)
    trace = store.run(result.run_id)

    assert trace.run.status == "completed"
    assert orjson.loads(trace.run.input) == "input \ufffd"
    assert orjson.loads(trace.run.output) == "the answer \ufffd ends"
    [call] = trace.tool_calls
    assert call.result is not None and orjson.loads(call.result) == "smile \ufffd"
    assert orjson.loads(trace.llm_calls[1].response)["text"] == "the answer \ufffd ends"
    flagged = {note["what"] for note in notes(trace).values()}
    assert {
        "the run's input",
        "the result of tool shorten",
        "the model's answer",
        "the run's output",
    } <= flagged
    assert all(note["lone_surrogates"] is True for note in notes(trace).values())


async def test_a_tool_error_message_with_half_a_pair_is_stored_and_flagged(
    store: TraceStore,
) -> None:
    model = ScriptedModel([ToolCall("failing", {"text": "x"}), "sorry"])
    result = await Runner.run(Agent(name="a", tools=[failing]), "go", model=model, store=store)
    trace = store.run(result.run_id)
    [call] = trace.tool_calls
    assert call.error == "no entry for x \ufffd"
    assert {"what": "tool_calls.error", "lone_surrogates": True} in notes(trace).values()


async def test_an_integer_beyond_64_bits_is_stored_as_its_digits_and_flagged(
    store: TraceStore,
) -> None:
    model = ScriptedModel([ToolCall("count", {"text": "sand"}), "many"])
    result = await Runner.run(Agent(name="a", tools=[count]), "go", model=model, store=store)
    trace = store.run(result.run_id)
    assert orjson.loads(trace.tool_calls[0].result) == {"grains": str(2**70)}
    assert {"what": "the result of tool count", "big_integers": True} in notes(trace).values()


async def test_traces_show_flags_the_repaired_steps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "t.duckdb"
    with TraceStore(db) as store:
        model = ScriptedModel([ToolCall("shorten", {"text": "hi"}), "done"])
        result = await Runner.run(Agent(name="a", tools=[shorten]), "go", model=model, store=store)
    assert main(["traces", "show", result.run_id, "--db", str(db)]) == 0
    shown = capsys.readouterr().out
    assert "repaired text the store could not hold as it was" in shown
    assert "repaired  the result of tool shorten: text held lone surrogates" in shown
    assert "smile \ufffd" in shown


def test_the_two_halves_of_a_pair_that_arrived_apart_are_joined_not_replaced() -> None:
    # An emoji split over two streamed chunks, joined as Python joins them: two code units.
    joined = "".join(["a \ud83d", "\ude00 b"])
    assert _json.dumps(joined) == '"a 😀 b"'
    assert (
        _json.dumps({"k\ud800": ["\udfff", 2**64]})
        == '{"k\ufffd":["\ufffd","18446744073709551616"]}'
    )
    assert _json.canonical(HALF_EMOJI) == '"smile \ufffd"'.encode()
    assert _json.dumps(2**64 - 1) == str(2**64 - 1)  # what 64 bits hold is left as a number


@pytest.mark.server
async def test_a_recording_of_half_an_emoji_is_saved_and_replays_unchanged(tmp_path: Path) -> None:
    """A model answering half an emoji (its JSON escape `\\ud83d`, which the openai SDK reads
    as a lone surrogate): the cassette was not saved (orjson refused it); now it keeps the
    escape, as the wire had it, and a replay serves the same answer and finds no change."""
    path = tmp_path / "cut.yaml"
    agent = Agent(name="cutter", tools=[shorten])
    with OpenAICompatibleServer([f"answer {HALF_EMOJI} end"]) as server:
        async with OpenAIModel(
            "m", base_url=server.base_url, api_key="x", retry=RetryPolicy(max_attempts=1)
        ) as model:
            result, _ = await record_session(agent, "go", model=model, path=path)
    assert result.output == f"answer {HALF_EMOJI} end"
    assert "\\ud83d" in path.read_text()
    report = await Replayer(agent).replay(path)
    assert report.result.output == result.output
    assert not report.diverged


@pytest.mark.server
async def test_half_an_emoji_a_tool_returned_reaches_a_live_model_repaired() -> None:
    """The next request carries the tool's result: the openai SDK cannot encode a lone
    surrogate, so the run ended in 'a body that is not a chat completion: UnicodeEncodeError'.
    The message the model is sent holds U+FFFD where the tool cut the emoji."""
    agent = Agent(name="cutter", tools=[shorten])
    script = [ToolCall("shorten", {"text": "hello"}), "done"]
    with OpenAICompatibleServer(script) as server:
        async with OpenAIModel(
            "m", base_url=server.base_url, api_key="x", retry=RetryPolicy(max_attempts=1)
        ) as model:
            result = await Runner.run(agent, "go", model=model)
        second = server.requests[1]
    assert result.error is None and result.output == "done"
    assert second.body["messages"][-1]["content"] == "smile \ufffd"


async def test_tool_arguments_holding_half_an_emoji_are_run_not_a_crash() -> None:
    """The loop brake's key for a call encodes its arguments: a lone surrogate in them made
    orjson raise TypeError and ended the run."""
    model = ScriptedModel([ToolCall("shorten", {"text": "cut \udc00"}), "ok"])
    result = await Runner.run(Agent(name="cutter", tools=[shorten]), "go", model=model)
    assert result.error is None and result.output == "ok"
