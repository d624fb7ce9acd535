"""Boundary targets: a plain function's model calls recorded and replayed over HTTP.

Each test writes a small suite whose agent is a function on a real HTTP client (the openai
SDK, httpx, requests), records it through the real CLI against the bundled server, and then
replays it offline: unchanged code passes, a changed prompt or tool result fails the gate
naming the step and the field, a call the recording has no answer for is refused.
"""

from __future__ import annotations

import contextlib
import io
import os
import textwrap
from pathlib import Path
from unittest import mock

import orjson
import pytest

from agentbench.cli import main
from agentbench.testing import OpenAICompatibleServer

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

OPENAI_AGENT = """
import json
from openai import OpenAI

CITY_TEMPS = {"Paris": 18, "Oslo": 4}
PROMPT = "You answer weather questions."

def weather(city: str) -> dict:
    return {"city": city, "temp_c": CITY_TEMPS.get(city, 20)}

TOOLS = [{"type": "function", "function": {"name": "weather", "description": "Weather now",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                         "required": ["city"]}}}]

def agent(input, target):
    with OpenAI(base_url=target.base_url, api_key=target.api_key, max_retries=0) as client:
        return converse(client, input, target)

def converse(client, input, target):
    messages = [{"role": "system", "content": PROMPT}]
    messages += [{"role": "user", "content": input}] if isinstance(input, str) else input
    for _ in range(6):
        answer = client.chat.completions.create(
            model=target.model, messages=messages, tools=TOOLS, stream=STREAM
        )
        if STREAM:
            text, calls = "", {}
            for chunk in answer:
                for choice in chunk.choices:
                    text += choice.delta.content or ""
                    for call in choice.delta.tool_calls or ():
                        slot = calls.setdefault(call.index, {"id": "", "name": "", "args": ""})
                        slot["id"] = call.id or slot["id"]
                        slot["name"] = (call.function.name or "") or slot["name"]
                        slot["args"] += call.function.arguments or ""
            tool_calls = [
                {"id": c["id"], "type": "function",
                 "function": {"name": c["name"], "arguments": c["args"]}}
                for _, c in sorted(calls.items())
            ]
        else:
            message = answer.choices[0].message
            text = message.content or ""
            tool_calls = [c.model_dump() for c in message.tool_calls or ()]
        if not tool_calls:
            return text
        messages.append({"role": "assistant", "content": None, "tool_calls": tool_calls})
        for call in tool_calls:
            result = weather(**json.loads(call["function"]["arguments"]))
            messages.append(
                {"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result)}
            )
    return "gave up"
"""

HTTPX_AGENT = """
import httpx

async def agent(input, target):
    async with httpx.AsyncClient(base_url=target.base_url) as client:
        body = {"model": target.model, "messages": input if isinstance(input, list)
                else [{"role": "user", "content": input}]}
        answer = await client.post("/chat/completions", json=body,
                                   headers={"authorization": "Bearer " + target.api_key})
        answer.raise_for_status()
        return answer.json()["choices"][0]["message"]["content"] + " " + target.variables["tier"]
"""


def policy(request: dict) -> object:
    """The stand-in model: ask for the weather of each city named, then say it."""
    from agentbench import ToolCall

    messages = request["messages"]
    results = [orjson.loads(m["content"]) for m in messages if m.get("role") == "tool"]
    question = next(m["content"] for m in reversed(messages) if m.get("role") == "user")
    if not request.get("tools"):
        return f"echo: {question}"
    if not results:
        cities = [c for c in ("Paris", "Oslo") if c in question] or ["Paris"]
        return [ToolCall("weather", {"city": c}) for c in cities]
    return "; ".join(f"{r['city']} is {r['temp_c']} C" for r in results)


def write_suite(root: Path, name: str, agent: str, cases: str, *, stream: bool = False) -> Path:
    suite = root / name
    (suite / "cases").mkdir(parents=True)
    (suite / "agent.py").write_text(agent.replace("STREAM", repr(stream)))
    (suite / "suite.yaml").write_text(
        f"name: {name}\nagent: agent.py:agent\nmodel: {{name: stand-in}}\ncassettes: cassettes\n"
    )
    (suite / "cases" / "cases.yaml").write_text(textwrap.dedent(cases))
    return suite


def cli(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            code = main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return int(code or 0), out.getvalue()


def record(suite: Path, db: Path) -> tuple[int, str]:
    with (
        OpenAICompatibleServer(responder=policy) as server,
        mock.patch.dict(
            os.environ, {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-test-recording"}
        ),
    ):
        return cli("run", str(suite), "--live", "--record-mode", "all", "--db", str(db))


CASES = """\
- id: paris
  input: What is the weather in Paris?
  expect:
    - tool_called: weather
    - output_contains: "18"
- id: two_cities
  input: Paris or Oslo, which is warmer?
  expect:
    - tool_called: {name: weather, times: 2}
- id: follow_up
  inputs:
    - What is the weather in Oslo?
    - And in Paris?
  expect:
    - output_contains: "18"
"""


@pytest.fixture(params=[False, True], ids=["json", "sse"])
def recorded(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, Path]:
    suite = write_suite(tmp_path, "weather", OPENAI_AGENT, CASES, stream=request.param)
    db = tmp_path / "runs.duckdb"
    code, out = record(suite, db)
    assert code == 0, out
    return suite, db


def offline(*args: str) -> tuple[int, str]:
    with mock.patch.dict(os.environ, {}, clear=False):
        os.environ.pop("OPENAI_BASE_URL", None)
        os.environ.pop("OPENAI_API_KEY", None)
        return cli(*args)


def test_unchanged_code_replays_offline_and_passes(recorded: tuple[Path, Path]) -> None:
    suite, db = recorded
    cassette = (suite / "cassettes" / "two_cities.yaml").read_text()
    assert "sk-test-recording" not in cassette
    code, out = offline("run", str(suite), "--db", str(db))
    assert code == 0, out
    assert "gate: passed" in out


def test_a_changed_tool_result_fails_naming_the_step_and_field(
    recorded: tuple[Path, Path],
) -> None:
    suite, db = recorded
    agent = suite / "agent.py"
    agent.write_text(agent.read_text().replace('"Paris": 18', '"Paris": 19'))
    code, out = offline("run", str(suite), "--db", str(db), "--filter", "paris")
    assert code == 1, out
    assert "tool call weather result.temp_c: 18 → 19" in out
    assert "messages[3].content" in out


def test_a_reworded_prompt_is_request_drift_at_its_path(recorded: tuple[Path, Path]) -> None:
    suite, db = recorded
    agent = suite / "agent.py"
    agent.write_text(agent.read_text().replace("weather questions.", "weather questions, briefly."))
    code, out = offline("run", str(suite), "--db", str(db), "--filter", "paris")
    assert code == 1, out
    assert "request_drift: model call #1 at step 1 (agent): messages[0].content" in out


def test_a_call_the_recording_lacks_is_refused_not_sent(recorded: tuple[Path, Path]) -> None:
    suite, db = recorded
    agent = suite / "agent.py"
    # The agent now asks the model once more before it answers: the recording has no answer.
    agent.write_text(
        agent.read_text().replace(
            "        if not tool_calls:\n            return text",
            "        if not tool_calls and len(messages) < 9:\n"
            "            messages.append({'role': 'user', 'content': 'sure?'})\n"
            "            continue\n"
            "        if not tool_calls:\n            return text",
        )
    )
    code, out = offline("run", str(suite), "--db", str(db), "--filter", "paris")
    assert code == 1, out
    assert "no recorded interaction" in out or "has no answer for model call #3" in out


def test_any_http_client_async_function_and_context_variables(tmp_path: Path) -> None:
    cases = """\
    - id: echo
      input: hello there
      context: {tier: gold}
      expect:
        - output_contains: "echo: hello there gold"
    """
    suite = write_suite(tmp_path, "echo", HTTPX_AGENT, cases)
    db = tmp_path / "runs.duckdb"
    code, out = record(suite, db)
    assert code == 0, out
    code, out = offline("run", str(suite), "--db", str(db))
    assert code == 0, out


def test_a_suite_whose_framework_is_missing_is_skipped_with_the_reason(tmp_path: Path) -> None:
    suite = write_suite(tmp_path, "needs", "import not_installed_framework\n", CASES)
    with (suite / "suite.yaml").open("a") as file:
        file.write("requires: [not_installed_framework]\n")
    code, out = offline("run", str(suite), "--db", str(tmp_path / "runs.duckdb"))
    assert code == 0, out
    assert "skipped" in out
    assert "needs not_installed_framework, not installed here" in out


def test_settings_only_an_agentbench_agent_can_honour_are_refused(tmp_path: Path) -> None:
    suite = write_suite(tmp_path, "weather", OPENAI_AGENT, CASES)
    with (suite / "suite.yaml").open("a") as file:
        # tools: apply (to the MCP servers it reaches through its target context); serve: not
        file.write("tools: {default: recorded}\nserve: true\n")
    code, out = offline("run", str(suite), "--db", str(tmp_path / "runs.duckdb"))
    assert code == 2, out
    assert "is a function (a boundary target): serve apply to an" in out
    assert "tools" not in out.split("boundary target):")[1].split("apply")[0]


def test_the_target_context_is_public() -> None:
    import agentbench

    assert agentbench.TargetContext.__module__ == "agentbench.boundary.target"
    assert agentbench.current_target() is None  # outside a turn


def test_normalizing_leaves_out_delivery_and_the_sdk_s_empty_echoes() -> None:
    from agentbench.boundary.chat_api import normalize_request

    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
    sent = {
        "model": "m",
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [
            {"role": "user", "content": "x"},
            # What the openai SDK echoes after an answer from OpenAI itself.
            {
                "role": "assistant",
                "content": None,
                "refusal": None,
                "annotations": [],
                "tool_calls": [call],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
            {"role": "assistant", "content": "done", "refusal": "I will not"},
        ],
    }
    assert normalize_request(sent) == {
        "model": "m",
        "messages": [
            {"role": "user", "content": "x"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{**call, "function": {"name": "f", "arguments": '{"a":1}'}}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
            {"role": "assistant", "content": "done", "refusal": "I will not"},
        ],
    }


def test_a_python_repr_tool_result_is_compared_as_data() -> None:
    """The Agents SDK sends a tool's dict as str(dict): a change must name the field."""
    from agentbench.replay.diff import align
    from agentbench.replay.trajectory import Step, canonical

    def tool_step(result: str) -> Step:
        detail = {"arguments": {}, "result_kind": "ok", "result": canonical(result)}
        return Step("tool_call", "desk", 1, ("tool_call", "desk", "status"), detail)

    before = tool_step("{'service': 'wiki', 'since': '07:40'}")
    after = tool_step("{'service': 'wiki', 'since': '07:45'}")
    from agentbench.evals.comparing.compare_text import describe_divergence

    (found,) = align([before], [after])
    assert "result.since: '07:40' → '07:45'" in describe_divergence(found.as_dict(), 60)
    # Not a literal: kept as the text it is.
    assert canonical("{'unclosed': ") == "{'unclosed': "


def test_replaying_keeps_the_agents_sdk_from_uploading_traces(
    recorded: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    suite, db = recorded
    for name in ("OPENAI_AGENTS_DISABLE_TRACING", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    code, out = cli("run", str(suite), "--db", str(db), "--filter", "paris")
    assert code == 0, out
    assert os.environ["OPENAI_AGENTS_DISABLE_TRACING"] == "1"


ODD_OUTPUTS = '''
import dataclasses
import datetime

@dataclasses.dataclass
class Booking:
    day: datetime.date
    seats: int

class Opaque:
    def __str__(self):
        return "an opaque answer"

def agent(input):
    if input == "dataclass":
        return Booking(datetime.date(2026, 1, 2), 3)
    return Opaque()
'''


def test_whatever_a_function_returns_is_kept_as_data(tmp_path: Path) -> None:
    cases = """\
    - id: dataclass
      input: dataclass
      expect:
        - output_contains: '"day":"2026-01-02"'
    - id: opaque
      input: opaque
      expect:
        - output_equals: an opaque answer
    """
    suite = write_suite(tmp_path, "odd", ODD_OUTPUTS, cases)
    db = tmp_path / "runs.duckdb"
    code, out = record(suite, db)
    assert code == 0, out
    code, out = offline("run", str(suite), "--db", str(db))
    assert code == 0, out
