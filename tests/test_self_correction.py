"""Model mistakes never crash a run: they go back to the model with what was expected."""

from __future__ import annotations

from pydantic import BaseModel

from agentbench import Agent, Runner, ScriptedModel, StopReason, ToolCall, tool


@tool
def forecast(city: str, days: int = 1) -> str:
    """Forecast the weather.

    Args:
        city: City name.
        days: Number of days.
    """
    return f"sunny in {city} for {days} day(s)"


def rejected(result) -> list:
    return [e for e in result.events if e.kind == "tool_call_rejected"]


async def test_unknown_tool_is_answered_with_the_available_tools() -> None:
    model = ScriptedModel(
        [ToolCall("weather", {"city": "Oslo"}), ToolCall("forecast", {"city": "Oslo"}), "ok"]
    )
    result = await Runner.run(Agent(name="a", tools=[forecast]), "go", model=model)
    assert result.completed
    [event] = rejected(result)
    assert event.reason == "unknown_tool"
    observation = model.requests[1]["messages"][-1]["content"]
    assert "no tool named 'weather'" in observation
    assert "forecast: Forecast the weather." in observation


async def test_schema_violation_is_answered_with_the_schema() -> None:
    model = ScriptedModel(
        [
            ToolCall("forecast", {"city": "Oslo", "days": "many"}),
            ToolCall("forecast", {"city": "Oslo", "days": 2}),
            "ok",
        ]
    )
    result = await Runner.run(Agent(name="a", tools=[forecast]), "go", model=model)
    assert result.completed
    [event] = rejected(result)
    assert event.reason == "invalid_arguments"
    observation = model.requests[1]["messages"][-1]["content"]
    assert "- days: Input should be a valid integer" in observation
    assert "(got 'many')" in observation
    assert '"required":["city"]' in observation
    finished = [e for e in result.events if e.kind == "tool_finished"]
    assert [e.arguments for e in finished] == [{"city": "Oslo", "days": 2}]


async def test_missing_and_extra_arguments_are_violations() -> None:
    model = ScriptedModel([ToolCall("forecast", {"town": "Oslo"}), "ok"])
    result = await Runner.run(Agent(name="a", tools=[forecast]), "go", model=model)
    observation = model.requests[1]["messages"][-1]["content"]
    assert "- city: Field required" in observation
    assert "- town: Extra inputs are not permitted" in observation
    assert result.completed


async def test_garbled_json_is_fed_back_and_corrected() -> None:
    model = ScriptedModel(
        [
            ToolCall("forecast", '{"city": "Oslo", "days": '),
            ToolCall("forecast", {"city": "Oslo"}),
            "ok",
        ]
    )
    result = await Runner.run(Agent(name="a", tools=[forecast]), "go", model=model)
    assert result.completed
    [event] = rejected(result)
    assert event.reason == "invalid_json"
    assert event.raw_arguments == '{"city": "Oslo", "days": '
    observation = model.requests[1]["messages"][-1]["content"]
    assert "arguments are not valid JSON" in observation
    assert "Send a JSON object matching this schema" in observation


async def test_fenced_or_prefixed_json_is_accepted_by_the_tolerant_parse() -> None:
    fenced = ToolCall("forecast", '```json\n{"city": "Oslo"}\n```')
    prose = ToolCall("forecast", 'Here you go: {"city": "Rome", "days": 2} hope that helps')
    model = ScriptedModel([[fenced, prose], "ok"])
    result = await Runner.run(Agent(name="a", tools=[forecast]), "go", model=model)
    assert rejected(result) == []
    contents = [m["content"] for m in result.messages if m["role"] == "tool"]
    assert contents == ["sunny in Oslo for 1 day(s)", "sunny in Rome for 2 day(s)"]


class Verdict(BaseModel):
    label: str
    confidence: float


async def test_structured_output_is_validated() -> None:
    model = ScriptedModel(['{"label": "spam", "confidence": 0.9}'])
    result = await Runner.run(Agent(name="a", output_type=Verdict), "classify", model=model)
    assert result.output == Verdict(label="spam", confidence=0.9)
    system = model.requests[0]["messages"][0]["content"]
    assert "reply with only a JSON object that matches this JSON Schema" in system


async def test_invalid_structured_output_is_sent_back_once_for_correction() -> None:
    model = ScriptedModel(
        ['{"label": "spam"}', '```json\n{"label": "spam", "confidence": 0.8}\n```']
    )
    result = await Runner.run(Agent(name="a", output_type=Verdict), "classify", model=model)
    assert result.output == Verdict(label="spam", confidence=0.8)
    correction = model.requests[1]["messages"][-1]
    assert correction["role"] == "user"
    assert "confidence" in correction["content"] and "Field required" in correction["content"]
    assert [(e.guard, e.action) for e in result.events if e.kind == "guard_triggered"] == [
        ("output_validation", "retry")
    ]


async def test_structured_output_still_invalid_after_correction_is_an_error() -> None:
    model = ScriptedModel(["not json at all", '{"label": 3}'])
    result = await Runner.run(Agent(name="a", output_type=Verdict), "classify", model=model)
    assert result.stop_reason is StopReason.ERROR
    assert result.error.type == "OutputValidationError"
    assert "still does not match Verdict" in result.error.message
    assert len(model.requests) == 2


async def test_json_schema_output_mode_sends_response_format() -> None:
    model = ScriptedModel(['{"label": "ham", "confidence": 0.1}'])
    agent = Agent(name="a", output_type=Verdict, model_settings={"output_mode": "json_schema"})
    await Runner.run(agent, "classify", model=model)
    fmt = model.requests[0]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "Verdict"
