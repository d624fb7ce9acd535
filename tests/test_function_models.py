"""Functions that answer like a model: one signature for FunctionModel and the test server."""

from __future__ import annotations

from typing import Any

import pytest

from agentbench import Agent, FunctionModel, OpenAIModel, Runner, ToolCall, UsageError, tool
from agentbench.testing import CallInfo, OpenAICompatibleServer


@tool(effect="read_only")
def get_weather(city: str) -> dict:
    """Current temperature.

    Args:
        city: City name.
    """
    return {"city": city, "celsius": 21}


AGENT = Agent(name="weather", instructions="Answer briefly.", tools=[get_weather])


def policy(request: dict[str, Any]) -> Any:
    """A reference policy: reads only the request, like golden/<suite>/reference.py."""
    last = request["messages"][-1]
    if last["role"] == "tool":
        return f"Paris: {last['content']}"
    return ToolCall("get_weather", {"city": "Paris"})


def run_locally(fn: Any) -> Any:
    return Runner.run_sync(AGENT, "How warm is Paris?", model=FunctionModel(fn))


def run_over_http(responder: Any) -> Any:
    with OpenAICompatibleServer(responder=responder) as server:
        model = OpenAIModel("test-model", base_url=server.base_url, api_key="unused")
        return Runner.run_sync(AGENT, "How warm is Paris?", model=model)


@pytest.mark.parametrize("run", [run_locally, run_over_http], ids=["FunctionModel", "server"])
def test_both_take_fn_request_and_fn_request_info_sync_or_async(run) -> None:
    seen: list[CallInfo] = []

    def with_info(request: dict[str, Any], info: CallInfo) -> Any:
        seen.append(info)
        return policy(request)

    async def asynchronous(request: dict[str, Any]) -> Any:
        return policy(request)

    for fn in (policy, with_info, asynchronous):
        result = run(fn)
        assert result.output == 'Paris: {"city":"Paris","celsius":21}', fn
    assert [info.index for info in seen] == [0, 1]
    assert seen[0].tools == ["get_weather"]
    assert seen[0].model in ("function", "test-model")


def no_parameters() -> str:
    return "hi"


def three_required(request: dict[str, Any], info: CallInfo, extra: int) -> str:
    return "hi"


def keyword_required(request: dict[str, Any], *, info: CallInfo) -> str:
    return "hi"


@pytest.mark.parametrize("fn", [no_parameters, three_required, keyword_required, "text"])
@pytest.mark.parametrize(
    ("make", "what"),
    [
        (FunctionModel, "FunctionModel"),
        (lambda fn: OpenAICompatibleServer(responder=fn), "responder"),
    ],
    ids=["FunctionModel", "server"],
)
def test_a_function_of_another_shape_is_refused_where_it_is_passed(fn, make, what) -> None:
    with pytest.raises(UsageError) as caught:
        make(fn)
    message = str(caught.value)
    assert message.startswith(f"{what}: ")
    assert "expected fn(request) or fn(request, info)" in message
    if callable(fn):
        assert f"{fn.__name__}(" in message  # the function, with the signature it has
        assert "has the wrong signature" in message
