"""A cassette keeps each message once: a request that begins as an earlier one did keeps only
the rest (`agentbench_prefix`), so a cassette grows with the session, not its square, and
reads back into the very requests that were sent (issue 39)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from agentbench import Agent, Limits, ScriptedModel, ToolCall, tool
from agentbench.replay.cassette import PREFIX_KEY, Cassette, CassetteError
from agentbench.replay.replayer import Replayer
from agentbench.replay.session import record_session


@tool(effect="read_only")
def lookup(item: int) -> dict[str, Any]:
    """Look an item up."""
    return {"item": item, "name": f"part {item}", "in_stock": item % 7}


def record(path: Path, steps: int, first: str = "look everything up") -> Cassette:
    agent = Agent(name="catalogue", tools=[lookup], limits=Limits(max_iterations=steps + 1))
    script = [ToolCall("lookup", {"item": i}) for i in range(steps)] + ["done"]
    _, cassette = asyncio.run(record_session(agent, first, model=ScriptedModel(script), path=path))
    return cassette


def test_bytes_per_step_do_not_grow_with_the_session(tmp_path: Path) -> None:
    short, long = tmp_path / "short.yaml", tmp_path / "long.yaml"
    record(short, 20)
    record(long, 200)
    per_step = short.stat().st_size / 20, long.stat().st_size / 200
    # Ten times the steps, about the same bytes a step (it was ~10x: every request repeated
    # the conversation before it).
    assert per_step[1] < per_step[0] * 1.2, per_step


def test_the_requests_read_back_as_they_were_sent(tmp_path: Path) -> None:
    path = tmp_path / "session.yaml"
    sent = record(path, 12)
    loaded = Cassette.load(path)
    assert [i.request for i in loaded.interactions] == [i.request for i in sent.interactions]
    # What is written: the later requests keep their last messages and say whose came before.
    data = yaml.safe_load(path.read_text())
    bodies = [yaml.safe_load(i["request"]["body"]) for i in data["interactions"]]
    assert PREFIX_KEY not in bodies[0]
    assert bodies[5][PREFIX_KEY] == [5, len(sent.interactions[4].request["messages"])]
    assert len(bodies[5]["messages"]) == 2  # the answer that asked, and the tool's result
    assert data["metadata"]["agentbench"]["format"] == 2


def test_a_replay_of_a_long_session_is_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "session.yaml"
    record(path, 60)
    agent = Agent(name="catalogue", tools=[lookup], limits=Limits(max_iterations=61))
    report = asyncio.run(Replayer(agent, strict=True).replay(path))
    assert not report.diverged and not report.drifts


def test_a_secret_in_the_shared_beginning_is_masked_once_and_everywhere(tmp_path: Path) -> None:
    path = tmp_path / "session.yaml"
    record(path, 4, first="look everything up; api key sk-live-abcdefghijklmnopqrstuvwx")
    text = path.read_text()
    assert "sk-live-abcdefghijklmnopqrstuvwx" not in text
    loaded = Cassette.load(path)
    requests = [i.request for i in loaded.interactions]
    users = {m["content"] for r in requests for m in r["messages"] if m["role"] == "user"}
    assert len(users) == 1 and "sk-live-abcdefghijklmnopqrstuvwx" not in next(iter(users))


def test_vcrpy_reads_the_file(tmp_path: Path) -> None:
    from vcr.persisters.filesystem import FilesystemPersister
    from vcr.serializers import yamlserializer

    path = tmp_path / "session.yaml"
    record(path, 5)
    loaded = FilesystemPersister.load_cassette(str(path), yamlserializer)
    assert len(loaded[0]) == len(loaded[1]) == 6


@pytest.mark.parametrize(
    ("prefix", "says"),
    [
        ([9, 1], "must be [an earlier interaction's number"),
        ("1,2", "must be [an earlier interaction's number"),
        ([1, 99], "asks for 99 messages of interaction 1"),
    ],
)
def test_a_prefix_that_cannot_be_is_named(tmp_path: Path, prefix: Any, says: str) -> None:
    path = tmp_path / "session.yaml"
    record(path, 3)
    data = yaml.safe_load(path.read_text())
    body = yaml.safe_load(data["interactions"][2]["request"]["body"])
    body[PREFIX_KEY] = prefix
    data["interactions"][2]["request"]["body"] = orjson.dumps(body).decode()
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(CassetteError, match=r"interaction 3: ") as caught:
        Cassette.load(path)
    assert says in str(caught.value)
