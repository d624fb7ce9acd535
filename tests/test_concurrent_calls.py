"""Model calls an agent makes at once are matched with the recording by what they ask.

Sub-agents gathered at once, or a graph's parallel branches, reach the replay in whatever
order the machine runs them; the recording's order among them says nothing about the code.
"""

from __future__ import annotations

import asyncio

from agentbench.replay.cassette import Cassette, Interaction
from agentbench.replay.models import ReplayModel
from agentbench.runtime.models import ChatResponse


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
