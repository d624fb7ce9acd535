"""Incremental request encoding and one-pass redaction store exactly what the full work would.

A recorder sees a run's requests as they happen: message objects shared from one request to
the next, some edited in place by memory, the system prompt re-rendered, the conversation
compacted. Encoding them incrementally (unchanged messages by identity and a copy, the hash
continued from the previous request's state) must give the same diffs and digests as
encoding deep copies, where nothing is shared and every message is encoded afresh — and the
digest must be the SHA-256 of the whole redacted request. `Redactor.json`, which skips the
walk over values with nothing to mask, must give the text of dumping `Redactor.value`.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import hashlib
import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentbench.runtime.message_view import MessageView
from agentbench.trace._json import canonical, dumps
from agentbench.trace.redaction.redactor import Redactor
from agentbench.trace.request_diff import RequestChain, apply_diff, encode_request

ENV = {"OPENAI_API_KEY": "sk-live-abcdefghijklmnopqrst", "HOME": "/root"}


def redactor() -> Redactor:
    return Redactor(environ=ENV)


def live_requests(steps: int) -> list[dict[str, Any]]:
    """Each request of `story` as it was when sent, deep-copied: nothing is shared between
    them, so every message is encoded afresh (the full work)."""
    return [copy.deepcopy(request) for request in story(steps)]


def story(steps: int) -> Any:
    """Yield each request of a long run at the moment it is sent (objects shared and then
    changed in place afterwards, as a memory policy may do)."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You plan trips."},
        {"role": "user", "content": "Plan a trip to Lisbon in May."},
    ]
    params: dict[str, Any] = {
        "model": "m-1",
        "temperature": 0.2,
        "tools": [{"type": "function", "function": {"name": "lookup", "parameters": {}}}],
    }
    for step in range(1, steps + 1):
        if step % 4 == 0:  # the system prompt, re-rendered with the run's state
            messages[0] = {"role": "system", "content": f"You plan trips. State at {step}."}
        yield {**params, "messages": list(messages)}
        arguments = {"q": f"item {step}"}
        if step % 3 == 0:
            arguments["api_key"] = "zzzzzzzzzzzz"
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{step}",
                        "type": "function",
                        "function": {"name": "lookup", "arguments": json.dumps(arguments)},
                    }
                ],
            }
        )
        result = f"result {step}: " + "lorem ipsum " * (step % 9)
        if step % 5 == 0:
            result += f" Bearer abcdefghijklmnop{step} and {ENV['OPENAI_API_KEY']}"
        messages.append({"role": "tool", "tool_call_id": f"call_{step}", "content": result})
        memory(messages, step)
        if step % 13 == 0:
            params["temperature"] = step / 100
        if step == 20:
            params.pop("tools")


def memory(messages: list[dict[str, Any]], step: int) -> None:
    """What a memory policy may do between steps: edit messages in place, compact."""
    if step % 5 == 0:  # in place, at the top: an old tool result truncated
        for message in messages:
            if message["role"] == "tool" and len(message["content"]) > 16:
                message["content"] = message["content"][:16] + "…[truncated 9 of 25 chars]"
                break
    if step % 7 == 0:  # in place, nested: an old call's arguments rewritten
        for message in messages:
            if message["role"] == "assistant":
                message["tool_calls"][0]["function"]["arguments"] = f'{{"q": "{step}"}}'
                break
    if step % 9 == 0:  # compaction: the middle replaced by a summary
        summary = {"role": "user", "content": f"[summary] up to step {step}"}
        messages[:] = [messages[0], messages[1], summary, *messages[-4:]]
    if step % 11 == 0:  # compaction: the same objects, shifted
        del messages[2:4]


def encode(
    requests: Any, each: Callable[[RequestChain], None] = lambda chain: None
) -> list[tuple[str, str]]:
    """(diff as stored, hash) of each request, checking each rebuilds and hashes whole;
    `each` sees the chain after each request."""
    chain: RequestChain | None = None
    rebuilt: dict[str, Any] | None = None
    out: list[tuple[str, str]] = []
    redact = redactor()
    for request in requests:
        # What is stored, computed in one piece (from a plain list: a view is one).
        expected = redact.value({**request, "messages": list(request["messages"])})
        encoded, chain = encode_request(chain, request, redact)
        rebuilt = apply_diff(rebuilt, encoded.diff)
        assert rebuilt == expected
        assert encoded.hash == hashlib.sha256(canonical(expected)).hexdigest()
        out.append((dumps(encoded.diff), encoded.hash))
        each(chain)
    return out


def test_live_requests_encode_as_their_deep_copies_do() -> None:
    live = encode(story(150))
    full = encode(live_requests(150))
    assert live == full
    diffs = "".join(diff for diff, _ in live)
    assert '"edit"' in diffs and "[REDACTED]" in diffs  # the story exercised both


def test_an_append_only_run_continues_the_hash_and_stores_only_new_messages() -> None:
    requests = []
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for step in range(300):
        requests.append({"model": "m", "messages": list(messages)})
        messages.append({"role": "assistant", "content": f"step {step}"})
    encoded = encode(requests)
    assert encoded == encode(copy.deepcopy(requests))
    last = json.loads(encoded[-1][0])
    assert last["messages"] == [
        ["keep", 0, 299],
        ["add", [{"role": "assistant", "content": "step 298"}]],
    ]


def test_a_message_changed_in_place_is_stored_changed() -> None:
    message = {"role": "tool", "tool_call_id": "c", "content": "a long observation of the world"}
    nested = {"role": "assistant", "tool_calls": [{"function": {"arguments": '{"q": 1}'}}]}
    messages = [{"role": "user", "content": "hi"}, nested, message]
    chain: RequestChain | None = None
    first, chain = encode_request(chain, {"messages": list(messages)}, redactor())
    message["content"] = "a long observation, shortened"
    nested["tool_calls"][0]["function"]["arguments"] = '{"q": 2}'
    second, chain = encode_request(chain, {"messages": list(messages)}, redactor())
    assert second.diff["messages"] != [["keep", 0, 3]]
    rebuilt = apply_diff(apply_diff(None, first.diff), second.diff)
    assert rebuilt == {"messages": copy.deepcopy(messages)}
    assert second.hash == hashlib.sha256(canonical(rebuilt)).hexdigest()


def test_a_chain_used_twice_gives_the_same_answer() -> None:
    """A chain hands its position index on to the next one; used again, it rebuilds it."""
    requests = live_requests(40)
    chain: RequestChain | None = None
    for request in requests[:30]:
        _, chain = encode_request(chain, request, redactor())
    again_a, _ = encode_request(chain, requests[30], redactor())
    again_b, _ = encode_request(chain, requests[31], redactor())
    fresh: RequestChain | None = None
    for request in requests[:30]:
        _, fresh = encode_request(fresh, copy.deepcopy(request), redactor())
    assert again_b == encode_request(fresh, requests[31], redactor())[0]
    assert again_a == encode_request(fresh, requests[30], redactor())[0]


def test_a_chain_continued_twice_hashes_each_request_whole() -> None:
    """The hash state a chain keeps is copied, never advanced in place."""
    messages = [{"role": "user", "content": f"message {i}"} for i in range(12)]
    chain: RequestChain | None = None
    for count in range(1, 10):
        _, chain = encode_request(chain, {"messages": messages[:count]}, redactor())
    for count in (10, 11, 12, 10):
        request = {"messages": messages[:count]}
        encoded, _ = encode_request(chain, request, redactor())
        assert encoded.hash == hashlib.sha256(canonical(request)).hexdigest()


def view_requests(steps: int) -> list[dict[str, Any]]:
    """Requests as the runtime sends them: a `MessageView` of a system message and the run's
    conversation, which only grows, and is replaced (not edited) when memory compacts it."""
    conversation: list[dict[str, Any]] = [{"role": "user", "content": "Plan a trip."}]
    system = {"role": "system", "content": "You plan trips."}
    requests = []
    for step in range(1, steps + 1):
        if step % 4 == 0:
            system = {"role": "system", "content": f"You plan trips. State at {step}."}
        requests.append({"model": "m", "messages": MessageView(system, conversation)})
        conversation.append({"role": "assistant", "content": f"thinking {step}"})
        conversation.append({"role": "tool", "tool_call_id": f"c{step}", "content": f"r {step}"})
        if step % 10 == 0:  # compaction: a new list, the old one left as it was
            summary = {"role": "user", "content": f"[summary] up to {step}"}
            conversation = [conversation[0], summary, *conversation[-2:]]
    return requests


def test_runtime_views_encode_as_lists_of_copies_do() -> None:
    requests = view_requests(120)
    assert encode(requests) == encode([copy.deepcopy(r) for r in requests])


def test_a_secret_in_any_of_the_messages_a_step_appends_is_redacted() -> None:
    # A step's appended messages are checked for secrets together first: one secret among
    # them, first, last or in between, or at the join of two, must still be masked.
    system = {"role": "system", "content": "You plan trips."}
    conversation: list[dict[str, Any]] = [{"role": "user", "content": "Plan a trip."}]
    requests = []
    placements = [0, 1, 2, None, "join"]
    for step, place in enumerate(placements * 3):
        texts = [f"step {step} note {i}" for i in range(3)]
        if place == "join":
            texts[0], texts[1] = f"step {step} api", "key: nothing"
        elif place is not None:
            texts[place] += " Bearer abcdefgh12345678"
        for i, text in enumerate(texts):
            conversation.append({"role": "tool", "tool_call_id": f"c{step}-{i}", "content": text})
        requests.append({"model": "m", "messages": MessageView(system, conversation)})
    stored = encode(requests)
    assert stored == encode([copy.deepcopy(r) for r in requests])
    assert all("abcdefgh12345678" not in diff for diff, _ in stored)
    assert sum("[REDACTED]" in diff for diff, _ in stored) == 9


# -- redaction in one pass ---------------------------------------------------------------------


class Colour(enum.Enum):
    RED = "red"


class Level(enum.StrEnum):
    HIGH = "high"


@dataclasses.dataclass
class Point:
    x: int
    token: str


TRICKY: list[Any] = [
    {"q": "tea", "limit": 3, "nested": [{"a": 1.5, "b": None, "c": True}]},
    {"password": "hunter2hunter2"},
    {"Authorization": "Basic dXNlcjpwYXNzd29yZA=="},
    {"\u212aey": "a Kelvin sign lowers to k: the key is secret"},
    {"usage": {"input_tokens": 5, "output_tokens": 2}, "token_budget": 3, "tokenÄ": "abc"},
    {"githubToken": "abc", "apiKeyId": 7, "token\\": "x", "passwords": ["a", "b"]},
    {"text": "call me with Bearer abcdefghijklmnopqrstuvwxyz"},
    {"text": f"the key is {ENV['OPENAI_API_KEY']}!"},
    {"args": '{"user": "ada", "api_key": "zzzzzzzzzzzzzz"}'},
    {"cut": "the start of a secret sk-abcdefghij…[truncated 10 of 40 chars]"},
    {"cut": "escaped ellipsis \\u2026 abcdef1234567890"},
    {"name": "github_token", "value": "ghp_abcdefghijklmnopqrstuvwxyz"},
    ("a", "tuple", {"token": 1}),
    {1: "int key", "two": {3: "nested int key"}},
    {"colour": Colour.RED, "level": Level.HIGH},
    {"when": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)},
    {"point": Point(1, "secret-token-value")},
    {"bytes": b"raw bytes", "set": {"only"}},
    "plain text that is long enough",
    ["sk-" + "x" * 30, "fine"],
    None,
    12,
]


def test_json_is_the_text_of_the_redacted_value_for_tricky_values() -> None:
    redact = redactor()
    for value in TRICKY:
        assert redact.json(value) == dumps(redact.value(value)), value


def test_clean_is_false_whenever_redaction_changes_something() -> None:
    redact = redactor()
    for value in TRICKY:
        try:
            document = json.dumps(value)
        except TypeError:
            continue
        if redact.value(value) != json.loads(document):
            assert not redact.clean(document), value


def test_a_hint_inside_a_longer_word_is_no_secret() -> None:
    redact = redactor()
    assert redact.clean('{"usage": {"input_tokens": 5, "output_tokens": 2}, "keys_sent": 1}')
    for document in ('{"api_key": 1}', '{"x": "token=abc"}', '{"tokenÄ": 1}', '{"a": "tok"}'):
        assert redact.clean(document) == (document == '{"a": "tok"}'), document


DEFAULT_PATTERN_SECRETS = [
    "sk-abcdefghijklmnopqrstu",
    "Bearer abcdefgh12345678",
    "bearer abcdefgh12345678",
    "Basic dXNlcjpwYXNzd29yZA==",
    "ghp_" + "a1" * 12,
    "gho_" + "b2" * 12,
    "xoxb-1234567890ab",
    "AKIAABCDEFGHIJKLMNOP",
    "eyJabcdefghij.eyJabcdefghij.abcdefghijk",
]


def test_clean_sees_every_default_pattern_whole_and_in_a_changed_window() -> None:
    # `clean` searches for parts of the patterns' literals rather than the literals the
    # masking pass uses: each default pattern's secret must still turn the shortcut off.
    redact = redactor()
    for secret in DEFAULT_PATTERN_SECRETS:
        assert redact.value(secret) != secret, secret
        document = json.dumps({"content": f"here it is: {secret} (keep it)"})
        assert not redact.clean(document), secret
        text = f"State so far: {secret} and more"
        start = text.index(secret)
        assert not redact.clean_change(text, start + 2, start + 3), secret


def test_a_secret_that_json_escapes_turns_the_shortcut_off() -> None:
    redact = Redactor(environ={"DB_PASSWORD": 'pa"ss\\word-12345'})
    value = {"note": 'pa"ss\\word-12345'}
    assert not redact.clean(json.dumps(value))
    assert redact.json(value) == dumps(redact.value(value))
    assert "pa" not in json.loads(redact.json(value))["note"]


words = st.sampled_from(
    ["tea", "key", "Token", "api_key", "sk-abcdefghijklmnopqrstu", "Bearer abcdefgh12345678",
     "…", "name", "value", "x" * 12, ENV["OPENAI_API_KEY"], "AKIAABCDEFGHIJKLMNOP", "ok"]
)  # fmt: skip
text = st.lists(words, max_size=4).map(" ".join)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False)
    | text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(value=json_values)
def test_json_matches_the_full_walk_on_any_json(value: Any) -> None:
    redact = redactor()
    assert redact.json(value) == dumps(redact.value(value))


def rerendered(contents: list[str]) -> Any:
    """Requests whose system prompt is re-rendered with each of `contents` in turn, the rest
    of the conversation shared from one request to the next (as the runner sends it)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "hello"}]
    for content in contents:
        yield {"model": "m-1", "messages": [{"role": "system", "content": content}, *messages]}
        messages.append({"role": "assistant", "content": "ok"})


@settings(max_examples=300, deadline=None)
@given(
    base=text,
    edits=st.lists(st.tuples(st.integers(0, 60), st.integers(0, 8), text), max_size=6),
)
def test_a_rerendered_system_prompt_is_redacted_as_a_whole_one_is(
    base: str, edits: list[tuple[int, int, str]]
) -> None:
    # Only the changed part of the prompt is read when the old one had nothing to mask: a
    # change that brings a secret, or completes one with the text around it, is still seen.
    contents = ["You help. " + base + " tokens"]
    for at, cut, inserted in edits:
        old = contents[-1]
        at = min(at, len(old))
        contents.append(old[:at] + inserted + old[at + cut :])
    assert encode(rerendered(contents)) == encode(copy.deepcopy(list(rerendered(contents))))


def test_a_change_that_completes_a_secret_key_is_redacted() -> None:
    contents = [
        'Call it as login({"pass": "x1", "tokens": 3}).',
        'Call it as login({"pass": "x1", "token": "abc12345"}).',
    ]
    requests = list(rerendered(contents))
    stored = encode(requests)
    assert "abc12345" not in stored[-1][0]


pieces = st.sampled_from(
    ["tea", "key", "Token", "api_", "key=abc123456789", "sk-", "abcdefghijklmnopqrstu", "Bear",
     "er abcdefgh12345678", "…", ENV["OPENAI_API_KEY"][:9], ENV["OPENAI_API_KEY"][9:], "AKIA",
     "ABCDEFGHIJKLMNOP", "ok", " "]
)  # fmt: skip
fragments = st.lists(pieces, max_size=3).map("".join)


@settings(max_examples=400, deadline=None)
@given(
    head=fragments,
    steps=st.lists(
        st.tuples(
            st.integers(0, 2), st.lists(st.tuples(fragments, fragments), min_size=1, max_size=2)
        ),
        max_size=6,
    ),
    window=st.integers(2, 6),
)
def test_a_sliding_state_summary_is_redacted_as_a_whole_one_is(
    head: str, steps: list[tuple[int, list[tuple[str, str]]]], window: int
) -> None:
    # A state summary that drops its oldest lines and appends new ones is read only where
    # the kept lines meet the text around them and where the new lines are: a secret in a
    # new line, or one that only forms where kept lines meet other text, is still seen.
    state = [f"line {i} of the state, long enough to be found again" for i in range(3)]
    contents = []
    for dropped, added in [(0, []), *steps]:
        step = len(contents)
        numbered = [f"{pre}step {step}.{i} lorem{post}" for i, (pre, post) in enumerate(added)]
        state = (state[dropped:] + numbered)[-window:]
        contents.append("You help.\n## State so far\n" + head + "\n".join(state))
    assert encode(rerendered(contents)) == encode(copy.deepcopy(list(rerendered(contents))))


def test_only_the_new_lines_of_a_sliding_state_are_read() -> None:
    old = "You help.\n## State\n- a(1) -> ok: aaaa aaaa aaaa\n- b(2) -> ok: bbbb bbbb bbbb\n"
    new = "You help.\n## State\n- b(2) -> ok: bbbb bbbb bbbb\n- c(3) -> ok: Bearer abcdefgh1234\n"
    stored = encode(rerendered([old, new]))
    assert "abcdefgh1234" not in stored[-1][0]
    assert "[REDACTED]" in stored[-1][0]


# -- a long append-only run lets go of its older messages' bytes -------------------------------


def appended_then(change: str, steps: int = 120) -> list[dict[str, Any]]:
    """A run that only appends for `steps` steps (secrets in some messages, a message that is
    not plain JSON, the same message object sent twice), then makes one `change` the chain can
    only follow with every message's bytes: then appends again."""
    system = {"role": "system", "content": "You plan trips."}
    conversation: list[dict[str, Any]] = [{"role": "user", "content": "Plan a trip."}]
    when = datetime(2026, 5, 1, tzinfo=UTC)
    repeated = {"role": "user", "content": "and the weather?", "at": when}
    params: dict[str, Any] = {"model": "m", "temperature": 0.2}
    requests = []
    for step in range(1, steps + 25):
        if step == steps:
            if change == "system":  # re-rendered: another object, other text
                system = {"role": "system", "content": "You plan trips. State: booked."}
            elif change == "compaction":  # memory replaced the conversation
                summary = {"role": "user", "content": f"[summary] up to {step}"}
                conversation = [conversation[0], summary, *conversation[-6:]]
            elif change == "parameter":  # before "messages": the hash starts again
                params["max_tokens"] = 200
        requests.append({**params, "messages": MessageView(system, conversation)})
        secret = f" Bearer abcdefghijklmnop{step}" if step % 7 == 0 else ""
        conversation.append({"role": "assistant", "content": f"thinking {step}{secret}"})
        conversation.append({"role": "tool", "tool_call_id": f"c{step}", "content": f"r {step}"})
        if step % 40 == 0:  # many at once, one of them sent before
            conversation += [{"role": "user", "content": f"more {step}-{i}"} for i in range(9)]
            conversation.append(repeated)
    return requests


@pytest.mark.parametrize("change", ["system", "compaction", "parameter", "none"])
def test_a_chain_lets_go_of_old_bytes_and_encodes_them_again_when_needed(change: str) -> None:
    requests = appended_then(change)
    let_go: list[int] = []  # after each request, how many messages' bytes the chain let go
    stored = encode(requests, lambda chain: let_go.append(chain.parts.count(None)))
    assert max(let_go) > 150  # the append-only stretch held only the last messages' bytes
    # After a change that needed them, every message's bytes are kept; otherwise not.
    assert (let_go[-1] > 0) == (change == "none")
    # The same diffs and hashes as from deep copies, where nothing is shared or trusted.
    assert stored == encode([copy.deepcopy(r) for r in requests])
