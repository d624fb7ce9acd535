"""Each request carries the agent's model settings as they are when it is sent: the loop
reuses its last dump of them only while every setting is the very same object, so a setting
changed during a run — assigned anew, or a list or dict filled in place — shows at once."""

from __future__ import annotations

from typing import Any

from agentbench import Agent, ChatResponse, Limits, ModelSettings, Runner, ToolCall, tool


class Capturing:
    """Calls `tweak` as the run's tool, then answers; keeps each request's parameters."""

    name = "capturing"

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.sent: list[dict[str, Any]] = []

    async def complete(self, request: dict[str, Any], **_: Any) -> ChatResponse:
        self.sent.append({k: v for k, v in request.items() if k not in {"messages", "tools"}})
        if len(self.sent) <= self.steps:
            return ChatResponse(tool_calls=[ToolCall("tweak", {"step": len(self.sent)})])
        return ChatResponse(text="done")


def run_with(settings: ModelSettings, changes: dict[int, Any]) -> list[dict[str, Any]]:
    @tool(effect="read_only", blocking=False)
    def tweak(step: int) -> str:
        changes.get(step, lambda: None)()
        return "ok"

    agent = Agent(
        name="a", tools=[tweak], model_settings=settings, limits=Limits(max_iterations=10)
    )
    model = Capturing(len(changes) + 1)
    result = Runner.run_sync(agent, "go", model=model)
    assert result.completed
    return model.sent


def test_a_setting_assigned_during_the_run_is_sent_from_the_next_request() -> None:
    settings = ModelSettings(temperature=1.0, seed=1)

    def cooler() -> None:
        settings.temperature = 0.5

    def same_value_other_type() -> None:
        settings.temperature = 1  # equal to 1.0, but sent as 1

    sent = run_with(settings, {1: cooler, 2: same_value_other_type})
    assert [r["temperature"] for r in sent] == [1.0, 0.5, 1, 1]
    assert [type(r["temperature"]) for r in sent] == [float, float, int, int]
    assert all(r["model"] == "capturing" and r["seed"] == 1 for r in sent)


def test_lists_and_dicts_changed_in_place_are_sent_as_changed() -> None:
    settings = ModelSettings(stop=["END"])

    def more_stops() -> None:
        settings.stop.append("STOP")  # type: ignore[union-attr]

    def extra() -> None:
        settings.extra_body["top_k"] = 5

    def more_extra() -> None:
        settings.extra_body["top_k"] = 6

    sent = run_with(settings, {1: more_stops, 2: extra, 3: more_extra})
    assert [r["stop"] for r in sent] == [
        ["END"],
        ["END", "STOP"],
        ["END", "STOP"],
        ["END", "STOP"],
        ["END", "STOP"],
    ]
    assert [r.get("top_k") for r in sent] == [None, None, 5, 6, 6]


def test_an_empty_extra_body_filled_in_place_is_sent() -> None:
    settings = ModelSettings(temperature=0.0)

    def extra() -> None:
        settings.extra_body["top_k"] = 5

    sent = run_with(settings, {2: extra})
    assert [r.get("top_k") for r in sent] == [None, None, 5]
    assert all(r["temperature"] == 0.0 for r in sent)
