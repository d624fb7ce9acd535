"""A request's token estimate counts only the messages new since the last view of the same
conversation, and must equal counting every message."""

from __future__ import annotations

from agentbench import Agent, Limits, Runner, ScriptedModel, ToolCall, tool
from agentbench.runtime.message_view import MessageView
from agentbench.runtime.tokens import estimate_message_tokens, estimate_request_tokens


def _full(request: dict) -> int:
    return sum(estimate_message_tokens(m) for m in list(request["messages"]))


def test_growing_views_of_one_conversation_count_like_whole_lists() -> None:
    conversation: list[dict] = [{"role": "user", "content": "hello " * 30}]
    for step in range(12):
        system = {"role": "system", "content": f"rules, version {step % 3} " * (step + 1)}
        request = {"messages": MessageView(system, conversation)}
        assert estimate_request_tokens(request) == _full(request)
        conversation.append({"role": "assistant", "content": "x" * (7 * step)})
        if step == 6:  # memory compaction: a new, shorter list
            conversation = [{"role": "user", "content": "summary " * step}, *conversation[-2:]]
    # An older view of the same list, counted after newer ones, is still exact.
    old = {"messages": MessageView(None, conversation)}
    conversation.append({"role": "user", "content": "later"})
    assert estimate_request_tokens(old) == _full(old)


@tool(effect="read_only")
def echo(text: str) -> str:
    """Echo."""
    return text * 3


def test_a_scripted_run_reports_the_same_input_tokens_as_whole_counts() -> None:
    model = ScriptedModel([ToolCall("echo", {"text": f"t{i}" * 20}) for i in range(8)] + ["ok"])
    agent = Agent(
        name="a",
        instructions="Echo things.",
        tools=[echo],
        limits=Limits(max_iterations=20, repeat_warn_at=30, repeat_stop_at=40),
    )
    result = Runner.run_sync(agent, "go", model=model)
    assert result.completed
    responses = [e for e in result.events if e.kind == "model_response"]
    assert len(responses) == len(model.requests) == 9
    tools_tokens = estimate_request_tokens({"tools": model.requests[0]["tools"]})
    for request, event in zip(model.requests, responses, strict=True):
        assert event.response.usage.input_tokens == _full(request) + tools_tokens
