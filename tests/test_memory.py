"""Memory: pinned, process and noise content on long conversations; the pairing invariant."""

from __future__ import annotations

import asyncio

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentbench import Agent, FunctionModel, Runner, ScriptedModel, ToolCall, tool
from agentbench.runtime.conversation import SUMMARY_MARKER, problems, split_units
from agentbench.runtime.memory import Memory, MemoryPolicy
from agentbench.runtime.summarizers import LLMSummarizer
from agentbench.runtime.tokens import estimate_message_tokens


@tool(effect="read_only")
def lookup(key: str) -> str:
    """Look up a key."""
    return f"value of {key} is {len(key) * 7}"


def memory_events(result) -> list:
    return [e for e in result.events if e.kind == "memory_decision"]


def sent_messages(model, index: int) -> list[dict]:
    return model.requests[index]["messages"][1:]  # without the system prompt


async def test_long_run_summarizes_process_and_keeps_the_original_request() -> None:
    calls = [ToolCall("lookup", {"key": f"k{i}"}) for i in range(12)]
    model = ScriptedModel([*calls, "all done"])
    agent = Agent(
        name="a",
        tools=[lookup],
        memory=MemoryPolicy(max_messages=8, keep_recent=2),
        limits={"max_iterations": 20},
    )
    result = await Runner.run(agent, "Find the values of k0 to k11.", model=model)
    assert result.completed
    for index in range(len(model.requests)):
        messages = sent_messages(model, index)
        assert len(messages) <= 8, f"request {index} sent {len(messages)} messages"
        assert problems(messages) == []
        assert messages[0] == {"role": "user", "content": "Find the values of k0 to k11."}
    last = sent_messages(model, -1)
    summary = next(m for m in last if str(m.get("content", "")).startswith(SUMMARY_MARKER))
    # Conclusions and key data survive compression: the earliest result is still there.
    assert 'lookup({"key": "k0"}) → ok: value of k0 is 14' in summary["content"]
    decisions = memory_events(result)
    assert decisions and {d.action for d in decisions} == {"summarized"}
    assert all(d.messages >= 4 for d in decisions)  # whole exchanges became one summary
    assert decisions[0].summary and "k0" in decisions[0].summary


async def test_token_limit_works_for_chinese_text() -> None:
    @tool(effect="read_only")
    def weather_cn(city: str) -> str:
        return f"{city}今天晴，气温二十一度，东南风三级，空气质量良好。" * 6

    cities = ["北京", "上海", "广州", "深圳", "杭州", "成都"]
    calls = [ToolCall("weather_cn", {"city": c}) for c in cities]
    model = ScriptedModel([*calls, "好的"])
    # Six results are ~1,100 tokens (one a CJK character): 800 holds a few, not all of them.
    agent = Agent(name="a", tools=[weather_cn], memory=MemoryPolicy(max_tokens=800, keep_recent=2))
    result = await Runner.run(agent, "请查询这些城市的天气。", model=model)
    assert result.completed
    budgets = [sum(estimate_message_tokens(m) for m in r["messages"]) for r in model.requests]
    assert max(budgets) <= 800  # system prompt included; the reported usage also counts tools
    assert any(d.action == "summarized" for d in memory_events(result))
    final = sent_messages(model, -1)
    assert final[0]["content"] == "请查询这些城市的天气。"
    summary = next(m for m in final if str(m.get("content", "")).startswith(SUMMARY_MARKER))
    assert "北京今天晴" in summary["content"]


async def test_superseded_retries_are_dropped_keeping_the_failure_reason() -> None:
    attempts = {"n": 0}

    @tool(effect="read_only")
    def fetch(url: str) -> str:
        attempts["n"] += 1
        if attempts["n"] == 1:
            raise TimeoutError("upstream took 30 s")
        return "page body"

    script = [
        ToolCall("fetch", {"url": "a"}),
        ToolCall("fetch", {"url": "b"}),
        ToolCall("lookup", {"key": "x"}),
        ToolCall("lookup", {"key": "y"}),
        ToolCall("lookup", {"key": "z"}),
        "done",
    ]
    agent = Agent(
        name="a",
        tools=[fetch, lookup],
        memory=MemoryPolicy(max_messages=9, keep_recent=2),
    )
    model = ScriptedModel(script)
    result = await Runner.run(agent, "go", model=model)
    dropped = [d for d in memory_events(result) if d.action == "dropped"]
    assert dropped and dropped[0].reason == "superseded retry"
    final = sent_messages(model, -1)
    text = "\n".join(str(m.get("content")) for m in final)
    assert "upstream took 30 s" in text and "(failed attempt, later retried)" in text
    assert problems(final) == []


async def test_duplicate_observations_are_dropped() -> None:
    same = ToolCall("lookup", {"key": "dup"})
    script = [
        same,
        ToolCall("lookup", {"key": "b"}),
        same,
        ToolCall("lookup", {"key": "c"}),
        "done",
    ]
    agent = Agent(
        name="a",
        tools=[lookup],
        memory=MemoryPolicy(max_messages=8, keep_recent=2),
        limits={"repeat_stop_at": 5, "repeat_warn_at": 4},
    )
    result = await Runner.run(agent, "go", model=ScriptedModel(script))
    reasons = [d.reason for d in memory_events(result) if d.action == "dropped"]
    assert "duplicate observation" in reasons


async def test_long_tool_results_are_truncated_with_a_marker_and_an_event() -> None:
    @tool(max_result_chars=50_000)
    def dump() -> str:
        return "row\n" * 2_000

    model = ScriptedModel([ToolCall("dump", {}), "ok"])
    agent = Agent(name="a", tools=[dump], memory=MemoryPolicy(tool_result_chars=500))
    result = await Runner.run(agent, "go", model=model)
    sent = sent_messages(model, 1)[-1]["content"]
    assert len(sent) < 600 and sent.endswith("…[truncated 7,500 of 8,000 chars]")
    [decision] = memory_events(result)
    assert decision.action == "truncated" and decision.messages == 1
    # The recorded tool result itself is whole: only what the model saw was cut.
    finished = next(e for e in result.events if e.kind == "tool_finished")
    assert len(finished.result.data) == 8_000


async def test_pinned_messages_and_facts_are_never_dropped() -> None:
    @tool
    def note(ctx_fact: str) -> str:
        return "noted"

    from agentbench import RunContext

    @tool
    def remember(ctx: RunContext, fact: str) -> str:
        ctx.pin(fact)
        return "pinned"

    history = [
        {"role": "user", "content": "Account 7731 is a VIP.", "pinned": True},
        {"role": "assistant", "content": "Understood."},
        {"role": "user", "content": "Check k1..k6 please."},
    ]
    calls = [ToolCall("remember", {"fact": "customer prefers email"})]
    calls += [ToolCall("lookup", {"key": f"k{i}"}) for i in range(6)]
    model = ScriptedModel([*calls, "done"])
    agent = Agent(
        name="a", tools=[lookup, remember], memory=MemoryPolicy(max_messages=6, keep_recent=1)
    )
    await Runner.run(agent, history, model=model)
    final = model.requests[-1]["messages"]
    assert final[1] == {"role": "user", "content": "Account 7731 is a VIP."}
    assert "pinned" not in final[1]
    assert "## Pinned facts\n- customer prefers email" in final[0]["content"]
    assert all(problems(r["messages"][1:]) == [] for r in model.requests)


async def test_llm_summarizer_calls_are_ordinary_recorded_model_calls() -> None:
    turns = iter(range(100))

    def answer(request, info):
        system = request["messages"][0]["content"]
        if system.startswith("You compress"):
            return "- k0..k3 looked up; all values are multiples of 7"
        turn = next(turns)
        return ToolCall("lookup", {"key": f"k{turn}"}) if turn < 6 else "done"

    agent = Agent(
        name="a",
        tools=[lookup],
        memory=MemoryPolicy(max_messages=6, keep_recent=2, summarizer=LLMSummarizer()),
    )
    result = await Runner.run(agent, "go", model=FunctionModel(answer))
    assert result.completed
    memory_calls = [e for e in result.events if e.kind == "model_request" and e.purpose == "memory"]
    assert memory_calls
    assert memory_calls[0].request["messages"][0]["content"].startswith("You compress")
    decisions = [d for d in memory_events(result) if d.action == "summarized"]
    assert decisions[0].summary == "- k0..k3 looked up; all values are multiples of 7"
    # The summarizer's tokens count towards the run.
    responses = [e for e in result.events if e.kind == "model_response"]
    assert result.usage.total_tokens == sum(e.usage.total_tokens for e in responses)


async def test_failing_llm_summarizer_falls_back_to_the_rules() -> None:
    turns = iter(range(100))

    def answer(request, info):
        if request["messages"][0]["content"].startswith("You compress"):
            raise RuntimeError("summarizer down")
        turn = next(turns)
        return ToolCall("lookup", {"key": f"k{turn}"}) if turn < 6 else "done"

    agent = Agent(
        name="a",
        tools=[lookup],
        memory=MemoryPolicy(max_messages=6, keep_recent=2, summarizer=LLMSummarizer()),
    )
    result = await Runner.run(agent, "go", model=FunctionModel(answer))
    assert result.completed
    decision = next(d for d in memory_events(result) if d.action == "summarized")
    assert "summarizer down" in decision.detail["summarizer_error"]
    assert "lookup(" in decision.summary


def test_estimate_uses_the_last_reported_usage_plus_new_messages() -> None:
    memory = Memory(MemoryPolicy())
    messages = [{"role": "user", "content": "x" * 400}, {"role": "assistant", "content": "y" * 40}]
    assert memory.estimate(messages, system_tokens=10) == 10 + 104 + 14
    memory.observe_usage(messages_sent=1, prompt_tokens=1000)
    assert memory.estimate(messages, system_tokens=10) == 1000 + 14


# -- the invariant, on random conversations ------------------------------------------------


def _conversation(draw_units: list[tuple[str, int, bool]]) -> tuple[list[dict], dict[str, str]]:
    messages: list[dict] = [{"role": "user", "content": "original request " * 5}]
    outcomes: dict[str, str] = {}
    counter = 0
    for kind, size, failed in draw_units:
        if kind == "user":
            messages.append({"role": "user", "content": "follow-up " * size})
        elif kind == "assistant":
            messages.append({"role": "assistant", "content": "answer " * size})
        else:
            calls = []
            for _ in range(size % 3 + 1):
                counter += 1
                call_id = f"call_{counter}"
                calls.append(
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": f"t{counter % 3}", "arguments": '{"q": 1}'},
                    }
                )
                outcomes[call_id] = "system_error" if failed else "ok"
            messages.append({"role": "assistant", "content": None, "tool_calls": calls})
            messages.extend(
                {"role": "tool", "tool_call_id": c["id"], "content": "result " * size}
                for c in calls
            )
    return messages, outcomes


unit_strategy = st.tuples(
    st.sampled_from(["user", "assistant", "tools", "tools", "tools"]),
    st.integers(min_value=1, max_value=60),
    st.booleans(),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    units=st.lists(unit_strategy, min_size=0, max_size=25),
    max_messages=st.one_of(st.none(), st.integers(min_value=1, max_value=20)),
    max_tokens=st.one_of(st.none(), st.integers(min_value=50, max_value=800)),
    keep_recent=st.integers(min_value=0, max_value=5),
    pin_index=st.one_of(st.none(), st.integers(min_value=0, max_value=60)),
)
def test_compaction_always_yields_a_valid_conversation(
    units, max_messages, max_tokens, keep_recent, pin_index
) -> None:
    messages, outcomes = _conversation(units)
    memory = Memory(
        MemoryPolicy(max_messages=max_messages, max_tokens=max_tokens, keep_recent=keep_recent)
    )
    memory.pin(messages[0])
    pinned = None
    if (
        pin_index is not None
        and pin_index < len(messages)
        and messages[pin_index]["role"] == "user"
    ):
        pinned = messages[pin_index]
        memory.pin(pinned)
    for call_id, kind in outcomes.items():
        memory.note_outcome(call_id, kind)

    async def no_model(body):
        raise AssertionError("the rule summarizer never calls a model")

    out, decisions = asyncio.run(memory.prepare(messages, 20, no_model))
    assert problems(out) == [], problems(out)
    assert out[0] is messages[0], "the original request is pinned"
    if pinned is not None:
        assert any(m is pinned for m in out)
    if decisions:
        assert all(d.action in {"dropped", "summarized", "truncated"} for d in decisions)
    assert all(m.get("role") in {"user", "assistant", "tool"} for m in out)
    if max_messages is not None:
        # Under the limit, unless what may never go (pinned units and the newest unit) is more.
        units = split_units(messages)
        floor = sum(
            len(u.messages)
            for u in units
            if any(m is messages[0] or m is pinned for m in u.messages)
        )
        floor += len(units[-1].messages)
        assert len(out) <= max(max_messages, floor)


async def test_a_new_long_tool_result_is_cut_even_where_a_dropped_one_lived() -> None:
    """Compaction lets go of checked tool messages; CPython hands their addresses to new dicts.
    A new oversized result must be cut all the same, however memory happens to be reused."""
    from agentbench.runtime.memory import Memory

    async def no_model(*_: object, **__: object) -> None:  # dropping never summarizes
        raise AssertionError("no summary expected")

    sent_uncut = 0
    for _ in range(50):
        memory = Memory(MemoryPolicy(max_messages=6, keep_recent=1, tool_result_chars=100))
        conversation: list[dict] = [{"role": "user", "content": "go"}]
        for turn in range(8):
            call_id = f"call_{turn}"
            conversation += [
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": call_id, "type": "function",
                     "function": {"name": "t", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": call_id,
                 "content": ("x" * 500) if turn % 2 else "short"},
            ]  # fmt: skip
            sent, _ = await memory.prepare(conversation, 10, no_model)
            conversation = list(sent)
            last = sent[-1]
            if len(last["content"]) > 200:
                sent_uncut += 1
    assert sent_uncut == 0
