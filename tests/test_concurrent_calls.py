"""Model calls an agent makes at once are matched with the recording by what they ask.

Sub-agents gathered at once, or a graph's parallel branches, reach the replay in whatever
order the machine runs them; the recording's order among them says nothing about the code.
"""

from __future__ import annotations

import asyncio

import pytest

from agentbench.replay.cassette import Cassette, Interaction
from agentbench.replay.models import ReplayModel
from agentbench.runtime.models import ChatResponse

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop


def request(prompt: str) -> dict:
    return {"model": "m", "messages": [{"role": "system", "content": prompt}]}


def recording() -> Cassette:
    return Cassette(
        [
            Interaction.of(request("plan"), ChatResponse(text="go")),
            Interaction.of(request("sub A"), ChatResponse(text="from A")),
            Interaction.of(request("sub B"), ChatResponse(text="from B")),
        ]
    )


def test_calls_made_at_once_are_answered_by_what_they_ask() -> None:
    cassette = recording()
    model = ReplayModel(cassette)

    async def replay() -> list[str | None]:
        answers = [await model.complete(request("plan"))]
        for prompt in ("sub B", "sub A"):  # the other order this time
            model.prefer(request(prompt), among=(1, 2))
            answers.append(await model.complete(request(prompt)))
        return [a.text for a in answers]

    assert asyncio.run(replay()) == ["go", "from B", "from A"]
    assert model.drifts == []
    # The shared recording is left in its order.
    assert [i.request["messages"][0]["content"] for i in cassette.interactions] == [
        "plan",
        "sub A",
        "sub B",
    ]


def test_outside_the_calls_made_at_once_order_still_counts() -> None:
    model = ReplayModel(recording())

    async def replay() -> int:
        await model.complete(request("plan"))
        assert model.prefer(request("sub B"), among=()) is None  # not made at once
        await model.complete(request("sub B"))
        return len(model.drifts)

    assert asyncio.run(replay()) == 1


GATHERING_AGENT = """
import asyncio
from openai import AsyncOpenAI

ORDER = "AB"

async def agent(input, target):
    async with AsyncOpenAI(base_url=target.base_url, api_key=target.api_key) as client:
        async def ask(name):
            answer = await client.chat.completions.create(
                model=target.model,
                messages=[{"role": "system", "content": f"You are sub-agent {name}."},
                          {"role": "user", "content": input}],
            )
            return answer.choices[0].message.content
        if ORDER == "AB":  # both at once, A first
            found = await asyncio.gather(ask("A"), ask("B"))
        else:  # B, then A: the other order
            b = await ask("B")
            found = [await ask("A"), b]
        return " / ".join(found)
"""


def test_a_function_s_calls_made_at_once_replay_in_any_order(tmp_path) -> None:
    import os
    import threading
    from unittest import mock

    from agentbench.testing import OpenAICompatibleServer
    from tests.test_boundary_target import cli, offline, write_suite

    b_arrived = threading.Event()

    def policy(request: dict) -> str:
        prompt = request["messages"][0]["content"]
        if prompt.endswith("A."):
            assert b_arrived.wait(20), "B never came while A was in flight"
            return "A says yes"
        b_arrived.set()
        return "B says no"

    cases = (
        "- id: both\n  input: shall we?\n"
        "  expect:\n    - output_contains: 'A says yes / B says no'\n"
    )
    suite = write_suite(tmp_path, "gather", GATHERING_AGENT, cases)
    db = str(tmp_path / "runs.duckdb")
    with (
        OpenAICompatibleServer(responder=policy) as server,
        mock.patch.dict(
            os.environ, {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-test"}
        ),
    ):
        code, out = cli("run", str(suite), "--live", "--record-mode", "all", "--db", db)
    assert code == 0, out
    cassette = (suite / "cassettes" / "both.yaml").read_text()
    assert "concurrent_calls" in cassette
    agent = suite / "agent.py"
    agent.write_text(agent.read_text().replace('ORDER = "AB"', 'ORDER = "BA"'))
    code, out = offline("run", str(suite), "--db", db, "--strict")
    assert code == 0, out
