"""The system message is re-rendered only when what the template shows can have changed, and
an unchanged text keeps its message object (what the replay fingerprint caches by)."""

from __future__ import annotations

from agentbench import Agent, Runner, ScriptedModel, ToolCall, tool
from agentbench.runtime.context import RunContext


@tool(effect="read_only", blocking=False)
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value-of-{key}"


def script() -> list:
    return [ToolCall("lookup", {"key": k}) for k in "abc"] + ["done"]


def counting_renders(agent: Agent) -> list[str]:
    rendered: list[str] = []
    render = agent.template.render

    def counted(*args, **kwargs) -> str:
        rendered.append(text := render(*args, **kwargs))
        return text

    agent.template.render = counted  # type: ignore[method-assign]
    return rendered


def systems(result) -> list[dict]:
    return [e.request["messages"][0] for e in result.events if e.kind == "model_request"]


async def test_without_a_state_summary_the_instructions_render_once() -> None:
    agent = Agent(name="a", instructions="Look keys up.", tools=[lookup], state_summary=False)
    rendered = counting_renders(agent)
    result = await Runner.run(agent, "go", model=ScriptedModel(script()))
    assert result.completed
    assert rendered == ["Look keys up."]
    sent = systems(result)
    assert len(sent) == 4 and all(message is sent[0] for message in sent)


async def test_a_template_that_reads_the_state_re_renders_after_each_result() -> None:
    agent = Agent(
        name="a",
        instructions="Known: {{ state | length }} facts.",
        tools=[lookup],
        state_summary=False,
    )
    rendered = counting_renders(agent)
    result = await Runner.run(agent, "go", model=ScriptedModel(script()))
    assert rendered == [f"Known: {n} facts." for n in range(4)]
    assert [m["content"] for m in systems(result)] == rendered


async def test_by_default_the_instructions_are_only_the_template_rendered_once() -> None:
    agent = Agent(name="a", instructions="Look keys up.", tools=[lookup])
    rendered = counting_renders(agent)
    result = await Runner.run(agent, "go", model=ScriptedModel(script()))
    assert result.completed and not agent.state_summary
    assert rendered == ["Look keys up."]
    assert [m["content"] for m in systems(result)] == ["Look keys up."] * 4


async def test_with_a_state_summary_each_step_shows_the_facts_so_far() -> None:
    agent = Agent(name="a", instructions="Look keys up.", tools=[lookup], state_summary=True)
    rendered = counting_renders(agent)
    result = await Runner.run(agent, "go", model=ScriptedModel(script()))
    assert len(rendered) == 4
    last = systems(result)[-1]["content"]
    assert last.startswith("Look keys up.\n\n## State so far\n")
    assert 'lookup({"key": "c"}) → ok: value-of-c' in last


async def test_a_context_change_re_renders_but_the_same_text_keeps_its_message() -> None:
    @tool(effect="write", blocking=False)
    def remember(ctx: RunContext, key: str) -> str:
        """Remember a key."""
        ctx.set("seen", key)
        return "ok"

    agent = Agent(
        name="a",
        instructions="Mode: {{ mode }}.",
        tools=[remember],
        state_summary=False,
    )
    rendered = counting_renders(agent)
    model = ScriptedModel([ToolCall("remember", {"key": "k"}), "done"])
    result = await Runner.run(agent, "go", model=model, context={"mode": "fast"})
    # The write bumps the context's version: rendered again, to the same text, so the
    # request keeps the very same system message.
    assert rendered == ["Mode: fast.", "Mode: fast."]
    first, second = systems(result)
    assert first is second
