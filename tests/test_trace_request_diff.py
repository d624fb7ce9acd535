"""Requests stored as diffs rebuild exactly, stay linear in size, and survive memory.

Memory compression is simulated with synthetic event sequences: later requests drop earlier
messages, replace them with a summary, truncate one in place, change parameters.
"""

from __future__ import annotations

import copy
import random
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agentbench import Agent, FunctionModel, Runner, ToolCall, tool
from agentbench.runtime.events import ModelRequest, ModelResponse, RunFinished, RunStarted
from agentbench.runtime.message_view import MessageView
from agentbench.runtime.models import ChatResponse, Usage
from agentbench.trace import TraceStore, request_hash
from agentbench.trace.recorder import TraceRecorder
from agentbench.trace.redaction.redactor import Redactor
from agentbench.trace.request_diff import RequestChain, apply_diff, encode_request
from agentbench.trace.schema import RunRows

NO_SECRETS = Redactor(environ={})


class ListSink:
    def __init__(self) -> None:
        self.finished: list[RunRows] = []

    def run_started(self, row: dict[str, Any]) -> None:
        pass

    def run_finished(self, rows: RunRows) -> None:
        self.finished.append(rows)


def encode_all(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    chain: RequestChain | None = None
    rebuilt: list[dict[str, Any]] = []
    previous = None
    for request in requests:
        encoded, chain = encode_request(chain, request, NO_SECRETS)
        previous = apply_diff(previous, encoded.diff)
        assert request_hash(previous) == encoded.hash
        rebuilt.append(previous)
    return rebuilt


def conversation(steps: int, seed: int = 7) -> list[dict[str, Any]]:
    """Requests of a long run whose memory drops, summarises and truncates messages.

    Messages are shared between requests (as the runner shares them) and one is truncated
    in place, so a recorder that trusted object identity would store the wrong request.
    """
    rng = random.Random(seed)
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {}}}]
    state: list[str] = []
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": ""},
        {"role": "user", "content": "Plan a trip to Lisbon in May."},
    ]
    seen: list[dict[str, Any]] = []
    params: dict[str, Any] = {"model": "m-1", "tools": tools, "temperature": 0.2}
    for step in range(1, steps + 1):
        messages[0] = {
            "role": "system",
            "content": "You plan trips.\n## State so far\n" + "\n".join(f"- {s}" for s in state),
        }
        request = {"model": params["model"], "messages": list(messages)}
        request.update({k: v for k, v in params.items() if k != "model"})
        seen.append(copy.deepcopy(request))
        call_id = f"call_{step}"
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "lookup", "arguments": f'{{"q": "item {step}"}}'},
                    }
                ],
            }
        )
        result = f"result {step}: " + "lorem ipsum " * rng.randint(5, 40)
        messages.append({"role": "tool", "tool_call_id": call_id, "content": result})
        state = [*state, f"lookup(item {step}) → ok"][-5:]
        if step % 9 == 0:  # memory: drop the middle, keep a summary and the last turns
            dropped = len(messages) - 6
            summary = {"role": "user", "content": f"[summary of {dropped} messages] step {step}"}
            messages[:] = [messages[0], messages[1], summary, *messages[-4:]]
        if step % 7 == 0:  # memory: truncate an old tool result in place
            for message in messages:
                if message["role"] == "tool" and len(message["content"]) > 40:
                    message["content"] = message["content"][:40] + "…[truncated]"
                    break
        if step % 11 == 0:
            params["temperature"] = round(rng.random(), 2)
        if step == 20:
            params.pop("tools")
        if step == 30:
            params["tools"] = tools
            params["model"] = "m-2"
    return seen


def test_long_run_with_memory_compression_rebuilds_every_request_exactly() -> None:
    requests = conversation(120)
    assert encode_all(requests) == requests


def test_recorded_run_rebuilds_through_the_store(tmp_path: Path) -> None:
    requests = conversation(60)
    store = TraceStore(tmp_path / "t.duckdb")
    recorder = TraceRecorder(store, redactor=NO_SECRETS, code_version=lambda: None)
    seq = 0

    def emit(cls: type, **fields: Any) -> None:
        nonlocal seq
        recorder(cls(run_id="run_mem", seq=seq, agent="planner", **fields))
        seq += 1

    emit(RunStarted, input="Plan a trip", model="m-1")
    seqs = []
    for step, request in enumerate(requests, start=1):
        seqs.append(seq)
        emit(ModelRequest, step=step, request=request)
        response = ChatResponse(text="ok", usage=Usage(input_tokens=10, output_tokens=2))
        emit(ModelResponse, step=step, response=response)
    emit(RunFinished, stop_reason="completed", output="done")

    rebuilt = store.requests("run_mem")
    assert list(rebuilt) == seqs
    assert list(rebuilt.values()) == requests
    assert store.request("run_mem", seqs[37]) == requests[37]
    calls = store.run("run_mem").llm_calls
    assert any(c.messages_dropped > 0 for c in calls)  # the compression is visible
    store.close()


async def test_a_real_run_rebuilds_the_requests_the_model_saw(tmp_path: Path) -> None:
    @tool(effect="read_only")
    def lookup(q: str) -> str:
        """Look something up."""
        return f"about {q}: " + "details " * 20

    def answer(request: dict[str, Any], info: Any) -> Any:
        if info.index < 25:
            return ToolCall("lookup", {"q": f"topic {info.index}"})
        return "done"

    model = FunctionModel(answer)
    agent = Agent(name="researcher", tools=[lookup])
    agent.limits.max_iterations = 40
    store = TraceStore(tmp_path / "t.duckdb")
    result = await Runner.run(agent, "research", model=model, hooks=[store.run_hook()])
    assert result.completed
    assert list(store.requests(result.run_id).values()) == model.requests
    store.close()


def stored_diff_bytes(steps: int) -> int:
    sink = ListSink()
    recorder = TraceRecorder(sink, redactor=NO_SECRETS, code_version=lambda: None)
    recorder(RunStarted(run_id="r", seq=0, agent="a", input="x", model="m"))
    for step, request in enumerate(conversation(steps, seed=3), start=1):
        recorder(ModelRequest(run_id="r", seq=step, agent="a", step=step, request=request))
    recorder(RunFinished(run_id="r", seq=steps + 1, agent="a", stop_reason="completed"))
    return sum(len(row["request_diff"]) for row in sink.finished[0].llm_calls)


def test_stored_requests_grow_linearly_not_quadratically() -> None:
    small, large = stored_diff_bytes(100), stored_diff_bytes(400)
    assert large < 4 * small * 1.3  # 4x the steps: about 4x the bytes, not 16x


message = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["system", "user", "assistant", "tool"]),
        "content": st.one_of(st.none(), st.text(max_size=80)),
    }
)
edit = st.tuples(
    st.sampled_from(["append", "drop", "replace", "truncate", "param", "unset"]),
    st.integers(min_value=0, max_value=50),
    message,
)


@settings(max_examples=60, deadline=None)
@given(first=st.lists(message, max_size=6), edits=st.lists(st.lists(edit, max_size=4), max_size=8))
def test_any_sequence_of_edits_rebuilds_exactly(
    first: list[dict[str, Any]], edits: list[list[tuple[str, int, dict[str, Any]]]]
) -> None:
    messages = list(first)
    params: dict[str, Any] = {"model": "m", "temperature": 0.0}
    requests = [{**params, "messages": copy.deepcopy(messages)}]
    for step in edits:
        for action, at, new in step:
            index = at % len(messages) if messages else 0
            if action == "append" or not messages:
                messages.append(new)
            elif action == "drop":
                del messages[index]
            elif action == "replace":
                messages[index] = new
            elif action == "truncate" and isinstance(messages[index].get("content"), str):
                text = messages[index]["content"]
                messages[index] = {**messages[index], "content": text[: len(text) // 2]}
            elif action == "param":
                params[f"p{at % 3}"] = at
            elif action == "unset":
                params.pop(f"p{at % 3}", None)
        requests.append({**copy.deepcopy(params), "messages": copy.deepcopy(messages)})
    assert encode_all(requests) == requests


def _brute_position(parts: list[bytes], part: bytes, at_or_after: int) -> int | None:
    places = [index for index, known in enumerate(parts) if known == part]
    later = [index for index in places if index >= at_or_after]
    return (later or places or [None])[0]


@settings(max_examples=200, deadline=None)
@given(
    first=st.lists(st.sampled_from([b"a", b"b", b"c"]), max_size=8),
    steps=st.lists(
        st.tuples(
            st.lists(
                st.tuples(st.integers(0, 20), st.sampled_from([b"a", b"b", b"d"])), max_size=3
            ),
            st.lists(st.sampled_from([b"a", b"b", b"e"]), max_size=3),
        ),
        max_size=5,
    ),
)
def test_the_position_index_finds_what_a_search_of_the_messages_finds(
    first: list[bytes], steps: list[tuple[list[tuple[int, bytes]], list[bytes]]]
) -> None:
    # The index is carried from request to request (places changed, messages appended) and
    # keeps one place per message, or a sorted list when the same bytes occur more than once.
    chain = RequestChain(parts=list(first))
    chain.position(b"a", 0)  # built, so that the next chains carry it
    for edits, appended in steps:
        parts = list(chain.parts)
        changed = set()
        for at, part in edits:
            if at < len(parts) and parts[at] != part:
                parts[at] = part
                changed.add(at)
        parts += appended
        carried = chain._positions_for(parts, sorted(changed))
        chain = RequestChain(parts=parts, _positions=carried)
        for part in (b"a", b"b", b"c", b"d", b"e"):
            for at_or_after in range(len(parts) + 1):
                assert chain.position(part, at_or_after) == _brute_position(
                    parts, part, at_or_after
                )


def growing_run(seed: int, steps: int = 90) -> list[dict[str, Any]]:
    """Requests as the runtime makes them: `MessageView`s on one conversation list that
    only grows, the system message mostly the same object, sometimes re-rendered; now and
    then a secret in a message, a parameter changed, or memory replacing the list."""
    rng = random.Random(seed)
    system: dict[str, Any] | None = {"role": "system", "content": "You help."}
    conversation: list[dict[str, Any]] = [{"role": "user", "content": "hello"}]
    params: dict[str, Any] = {"model": "m", "temperature": 0.0}
    requests = []
    for step in range(steps):
        roll = rng.random()
        if roll < 0.05:
            system = {"role": "system", "content": f"You help. Step {step}."}
        elif roll < 0.08:
            conversation = [{"role": "user", "content": f"[summary up to {step}]"}]
        elif roll < 0.11:
            params["temperature"] = step / 100
        elif roll < 0.13:
            params[f"z{step % 2}"] = step  # after "messages" in sorted order
        for _ in range(rng.randint(0, 3)):
            content = f"turn {step} " + "x" * rng.randint(0, 30)
            if rng.random() < 0.1:
                content += f" key sk-{'A' * 20}{seed}"
            if rng.random() < 0.05:
                content = {"nested": [content, step]}  # type: ignore[assignment]
            conversation.append({"role": rng.choice(["assistant", "tool"]), "content": content})
        requests.append({**params, "messages": MessageView(system, conversation)})
    return requests


def test_a_growing_conversation_encodes_as_the_general_path_does() -> None:
    # The runtime's requests (views that only append) take a path that reads only what a step
    # appended; the same requests as plain lists take the general one, which compares every
    # message. Both must store the same diffs and hashes, redact the same, and rebuild.
    let_go = 0  # the most message bytes a chain let go of (see `RequestChain.drop_bytes`)
    for seed in range(12):
        views = growing_run(seed)
        lists = [{**r, "messages": r["messages"].as_list()} for r in views]
        secret = {"AGENTBENCH_TEST_KEY": f"sk-{'A' * 20}{seed}"}
        by_view, by_list = Redactor(environ=secret), Redactor(environ=secret)
        view_chain = list_chain = None
        previous = None
        for view_request, list_request in zip(views, lists, strict=True):
            encoded, view_chain = encode_request(view_chain, view_request, by_view)
            expected, list_chain = encode_request(list_chain, list_request, by_list)
            assert encoded == expected
            previous = apply_diff(previous, encoded.diff)
            assert request_hash(previous) == encoded.hash
            assert f"sk-{'A' * 20}{seed}" not in repr(previous)
            let_go = max(let_go, view_chain.dropped)
    assert let_go > 0


def test_a_chain_used_again_after_a_request_appended_to_it_encodes_its_own_request() -> None:
    # The next request's chain takes over the lists of the one it was encoded against and
    # lets go of old messages' bytes in them: used again, that one takes its lists back.
    system = {"role": "system", "content": "s"}
    conversation = [{"role": "user", "content": f"m{i}"} for i in range(100)]
    first, chain = encode_request(None, {"messages": MessageView(system, conversation)}, NO_SECRETS)
    conversation.append({"role": "assistant", "content": "b"})
    encode_request(chain, {"messages": MessageView(system, conversation)}, NO_SECRETS)
    conversation.append({"role": "user", "content": "c"})
    for _ in range(2):
        request = {"messages": MessageView({"role": "system", "content": "t"}, conversation)}
        again, _ = encode_request(chain, request, NO_SECRETS)
        rebuilt = apply_diff(apply_diff(None, first.diff), again.diff)
        assert rebuilt == {"messages": request["messages"].as_list()}
        assert again.hash == request_hash(rebuilt)
