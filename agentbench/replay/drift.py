"""Request drift: how the request the current code sends differs from the recorded one.

The diff is JSON-aware and names the field — `messages[4].content`,
`tools[1].function.parameters.required` — and aligns the `messages` list by content, so a
message memory dropped shows as `messages[3] removed` instead of every later message looking
changed. Volatile fields (tool-call ids, stream options, user and metadata tags) never count:
they change between runs without the behaviour changing, and neither does a value the
recording has masked (`masked.fits`): redaction never causes a verdict. An assistant message
with tool calls and no text means the same whether its content is null (how older agentbench
sent it), "" (how it is sent now, since llama.cpp rejects null) or absent. Tool-call arguments
are JSON text that frameworks parse and serialize again before sending them back: they are
compared as parsed JSON, so spacing and key order never count.

A recording converted from a trace an instrumentation wrote (`traces import-otel`) may not
know the whole request: openai-v2 records no tool definitions and only some settings. Its
cassette says which top-level fields its source recorded (`TraceSource`), and only those are
compared, so what the recording could not know is never drift; tool results in it are
compared as parsed JSON too (the trace's text may be an instrumentation's re-serialization,
or the app's own serialization of data the code now serializes its own way).

Descriptions show values redacted *before* they are cut to a window, so a secret in the
current request can neither be shown nor leave half of itself at the edge of a window.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import orjson

from agentbench.replay.masked import fits, unmasked
from agentbench.runtime.message_view import MessageView
from agentbench.trace import _json
from agentbench.trace.redaction.redactor import Redactor
from agentbench.trace.redaction.rules import key_words

VOLATILE_TOP_LEVEL = frozenset({"stream_options", "user", "metadata", "store", "service_tier"})
FINGERPRINT_VERSION = 3  # bump when Fingerprinter changes: stored fingerprints then go stale
_MISSING = object()


@dataclass(frozen=True)
class Change:
    """One difference at one path; `old` is the recorded value, `new` the current one."""

    path: str
    kind: Literal["changed", "added", "removed"]
    old: Any = None
    new: Any = None

    def describe(self, width: int = 72) -> str:
        redactor = Redactor()
        if _secret_path(self.path, redactor):  # the value under a secret key: never shown
            old, new = (redactor.keyed("secret", v) for v in (self.old, self.new))
            return Change(self.path, self.kind, old, new)._describe(width)
        return self._describe(width)

    def _describe(self, width: int) -> str:
        if self.kind == "added":
            return f"{self.path}: added {_short(self.new, width)}"
        if self.kind == "removed":
            return f"{self.path}: removed {_short(self.old, width)}"
        if isinstance(self.old, str) and isinstance(self.new, str):
            old, new = around_difference(self.old, self.new, width)
            return f"{self.path}: {old} → {new}"
        return f"{self.path}: {_short(self.old, width)} → {_short(self.new, width)}"

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "kind": self.kind, "old": self.old, "new": self.new}


def _secret_path(path: str, redactor: Redactor) -> bool:
    """Does `path` (`messages[2].tool_calls[0].headers.Authorization`) end in a secret key?"""
    last = path.rsplit(".", 1)[-1].split("[", 1)[0]
    return bool(last and key_words(last)) and redactor.is_secret_key(last)


def _short(value: Any, width: int) -> str:
    redactor = Redactor()
    text = value if isinstance(value, str) else _json.dumps(redactor.value(value))
    text = repr(redactor.text(text)) if isinstance(value, str) else text
    return text if len(text) <= width else text[: width - 1] + "…"


def around_difference(old: str, new: str, width: int) -> tuple[str, str]:
    """Both strings cut to a window around where they differ, so the change shows (redacted
    first: a window must not cut a secret in half).

    The windows are shown redacted as whoever writes them redacts them; where that masks both
    sides alike (a secret differs, or a fragment at a window's edge looks like one) the
    difference is hidden, so the nearest later difference both sides of which still show is
    taken instead — and the first one only if none shows."""
    redactor = Redactor()
    old, new = redactor.text(old), redactor.text(new)
    first: tuple[str, str] | None = None
    for at_old, at_new in _differences(old, new):
        shown = (
            redactor.text(_window(old, at_old, width)),
            redactor.text(_window(new, at_new, width)),
        )
        if shown[0] != shown[1]:
            return shown
        first = first or shown
    return first or (_window(old, len(old), width), _window(new, len(new), width))


# How many differences `around_difference` looks through for one that shows, and the longest
# texts it aligns to find those after the first (`difflib` takes time quadratic in length).
_DIFFERENCES_TRIED = 16
_ALIGNED_CHARS = 20_000


def _differences(old: str, new: str) -> Iterator[tuple[int, int]]:
    """Where `old` and `new` differ, nearest first, as (position in old, position in new):
    the end of their common prefix, then the later differing stretches of the two aligned."""
    start = next((i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), None)
    if start is None:
        start = min(len(old), len(new))
    yield start, start
    if len(old) + len(new) > 2 * _ALIGNED_CHARS:
        return
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    later = [(i, j) for tag, i, _, j, _ in matcher.get_opcodes() if tag != "equal" and i > start]
    yield from later[: _DIFFERENCES_TRIED - 1]


def _window(text: str, at: int, width: int) -> str:
    """`text` around position `at`, quoted, `…` where it was cut."""
    begin = max(0, at - width // 4)
    half = width // 2
    cut = text[begin : begin + half]
    return f"'{'…' if begin else ''}{repr(cut)[1:-1]}{'…' if begin + half < len(text) else ''}'"


@dataclass(frozen=True)
class TraceSource:
    """What a recording converted from an imported trace knows of the requests it holds.

    `recorded_fields` are the top-level request fields its source recorded (None: all of
    them); the others were never known, so they are not compared. Kept in the cassette's
    metadata as `imported_trace`."""

    instrumentation: str = ""
    recorded_fields: frozenset[str] | None = None

    INFO_KEY: ClassVar[str] = "imported_trace"

    @classmethod
    def of(cls, info: dict[str, Any]) -> TraceSource | None:
        """The source a cassette's metadata names, None for a recording of agentbench's own;
        a hand-edited entry of the wrong shape compares everything rather than failing."""
        found = info.get(cls.INFO_KEY)
        if not isinstance(found, dict):
            return None
        fields = found.get("recorded_fields")
        known = frozenset(str(f) for f in fields) if isinstance(fields, list | tuple) else None
        return cls(str(found.get("instrumentation") or ""), known)

    def as_info(self) -> dict[str, Any]:
        info: dict[str, Any] = {"instrumentation": self.instrumentation}
        if self.recorded_fields is not None:
            info["recorded_fields"] = sorted(self.recorded_fields)
        return info

    def known(self, request: dict[str, Any]) -> dict[str, Any]:
        """The part of `request` the recording can be compared with (a light copy), as the
        trace would have recorded it. Whether the app streamed its answers is how it took
        them, not what it asked (a boundary target's requests never say)."""
        fields = self.recorded_fields
        if fields is None:
            if "stream" not in request and "stream_options" not in request:
                return request
            return {k: v for k, v in request.items() if k not in _TRANSPORT}
        known = {k: v for k, v in request.items() if k in fields and k not in _TRANSPORT}
        if isinstance(known.get("stop"), str):  # the conventions record a list of sequences
            known["stop"] = [known["stop"]]
        return known

    def unknown(self, request: dict[str, Any]) -> list[str]:
        """The top-level fields of `request` the recording cannot say anything about."""
        fields = self.recorded_fields
        if fields is None:
            return []
        return [
            k
            for k in request
            if k not in fields and k not in VOLATILE_TOP_LEVEL and k not in _TRANSPORT
        ]


_TRANSPORT = ("stream", "stream_options")


def normalize(request: dict[str, Any]) -> dict[str, Any]:
    """The request without its volatile fields (a light copy; the input is untouched)."""
    out = {k: v for k, v in request.items() if k not in VOLATILE_TOP_LEVEL}
    messages = out.get("messages")
    if isinstance(messages, list | MessageView):
        out["messages"] = [_normalize_message(m) for m in messages]
    return out


def _normalize_message(message: Any) -> Any:
    if not isinstance(message, dict):
        return message
    if "tool_call_id" not in message and not message.get("tool_calls"):
        return message
    out = {k: v for k, v in _textless_calls(message).items() if k != "tool_call_id"}
    if message.get("tool_calls"):
        out["tool_calls"] = [
            {k: v for k, v in call.items() if k != "id"} if isinstance(call, dict) else call
            for call in message["tool_calls"]
        ]
    return out


def _textless_calls(message: dict[str, Any]) -> dict[str, Any]:
    """An assistant message with tool calls and no text, with `content: None` whichever way
    the text is missing (null, "" or absent); any other message as it is."""
    if not isinstance(message, dict):
        return message
    if message.get("role") != "assistant" or not message.get("tool_calls"):
        return message
    if "content" not in message or message["content"] == "":
        return {**message, "content": None}
    return message


# In serialized JSON a real key is `"id":"…"`; inside a string (tool arguments, message text)
# the quotes are escaped, so these never match there. Only string-valued ids are removed.
# The string is matched unrolled (plain characters, then each escape and the plain ones after
# it): the same matches as `(?:[^"\\]|\\.)*`, found in two thirds of the time.
_VOLATILE_IDS = re.compile(rb'"(?:tool_call_id|id)":"[^"\\]*(?:\\.[^"\\]*)*",?')
# Every hash here starts as a copy of this one: copying costs less than making one with its
# parameters; the digests are the same.
_NEW_HASH = hashlib.blake2b(digest_size=16)


def _digest(value: Any) -> bytes:
    hasher = _NEW_HASH.copy()
    hasher.update(_VOLATILE_IDS.sub(b"", _json.canonical(value)))
    return hasher.digest()


def _message_digest(message: dict[str, Any]) -> bytes:
    """`_digest(_textless_calls(message))`, a tool message's written out: a step's every
    tool result is one, and its bytes are known without the search for ids."""
    hasher = _NEW_HASH.copy()
    if len(message) == 3 and message.get("role") == "tool":
        call_id, content = message.get("tool_call_id"), message.get("content")
        if type(call_id) is str and type(content) is str:
            # Its keys sorted, `"tool_call_id":"…"` removed as `_VOLATILE_IDS` removes it:
            # nothing inside a JSON string matches, and the comma before the last key stays.
            hasher.update(b'{"content":' + _json.dumps_bytes(content) + b',"role":"tool",}')
            return hasher.digest()
    hasher.update(_VOLATILE_IDS.sub(b"", _json.canonical(_textless_calls(message))))
    return hasher.digest()


class Fingerprinter:
    """Fingerprints requests of one session, remembering the parts it has seen.

    Each step's request repeats the previous step's messages (the same objects) plus a few
    new ones, and usually the same system message, tools and model; digests are cached by
    object (scalars by value), and the conversation's hash state is kept, so a step costs
    O(new messages) digests, not O(all). The cache keeps a reference to each object, so an
    id is never reused while cached. Incremental and whole hashes are equal by construction:
    the conversation's hash is a running hash of its messages' digests, in order.

    The request's hash is of its parts joined (the same bytes, in the same order, as feeding
    them one by one), made once the parts are known.
    """

    def __init__(self) -> None:
        # Digests by object id; `_kept` holds each object, so its id is never reused while
        # cached (no tuple per entry: a long session caches two messages a step).
        self._cache: dict[int, bytes] = {}
        self._kept: list[Any] = []
        self._scalars: dict[tuple[type, Any], bytes] = {}
        self._seen: list[Any] = []  # the conversation hashed last time, and the hash state
        self._state = _NEW_HASH.copy()
        # What the view hashed last time was made of (`MessageView.window`), if it was one.
        self._window: tuple[Any, list[Any], int] | None = None
        self._lead = 0  # whether the messages hashed last time began with a system message
        self._seen_size = 0  # how many messages (system message included) that was
        self._keys: dict[str, bytes] = {}  # request keys, encoded

    def _part(self, value: Any, meaning: Callable[[Any], Any] | None = None) -> bytes:
        """`value`'s digest, cached by object; `meaning` maps it to what is digested."""
        if not isinstance(value, (dict, list)):
            return self._scalar(value)
        digest = self._cache.get(id(value))
        if digest is None:
            digest = self._cache[id(value)] = _digest(value if meaning is None else meaning(value))
            self._kept.append(value)
        return digest

    def _message(self, message: Any) -> bytes:
        """A message's digest, a tool-call message's missing text digested one way
        (`_textless_calls`): recordings sent null where the runtime now sends ""."""
        digest = self._cache.get(id(message))
        if digest is not None:
            return digest
        if type(message) is not dict:
            return self._part(message, _textless_calls)
        digest = self._cache[id(message)] = _message_digest(message)
        self._kept.append(message)
        return digest

    def _scalar(self, value: Any) -> bytes:
        try:
            # Keyed by type too: 1, 1.0 and True are equal keys but serialize differently.
            key = (type(value), value)
            hit = self._scalars.get(key)
        except TypeError:  # unhashable: digested every time
            return _digest(value)
        if hit is None:
            hit = self._scalars[key] = _digest(value)
        return hit

    def __call__(self, request: dict[str, Any]) -> str:
        """A hash of the request's meaning: equal fingerprints, no drift."""
        parts: list[bytes] = []
        cached = self._cache.get
        for key in sorted(request):
            if key in VOLATILE_TOP_LEVEL:
                continue
            parts.append(self._keys.get(key) or self._key(key))
            value = request[key]
            if key != "messages":
                # Cached by object: a dict or list seen before (the tools), else `_part`.
                parts.append(cached(id(value)) or self._part(value))
            elif type(value) is MessageView:
                parts += self._view_parts(value.window())
            elif isinstance(value, list | MessageView):
                parts += self._list_parts(value)
            else:
                parts.append(self._part(value))
        hasher = _NEW_HASH.copy()
        hasher.update(b"".join(parts))
        return hasher.hexdigest()

    def _key(self, key: str) -> bytes:
        encoded = self._keys[key] = key.encode()
        return encoded

    def _view_parts(self, window: tuple[Any, list[Any], int]) -> list[bytes]:
        """The parts of a view's messages: its system message's digest, then the running
        hash of the conversation, its list's first `shown` messages.

        A view that extends the last one shares its list, which only grows, so what is new
        is read by position, without copying or comparing the rest (O(new), not O(all)).
        """
        system, messages, shown = window
        last, self._window = self._window, window
        if system is None:
            first = messages[0] if shown else None
            lead = 1 if first is not None and first.get("role") == "system" else 0
        else:
            first, lead = system, 1 if system.get("role") == "system" else 0
        head = [self._message(first)] if lead else []
        size = shown + (system is not None)
        if (
            last is not None
            and messages is last[1]
            and shown >= last[2]
            and (system is None) == (last[0] is None)
            and lead == self._lead
            and self._seen_size == len(self._seen) + lead
        ):
            self._seen_size = size
            new = messages[last[2] : shown]
            for message in new:
                self._state.update(self._message(message))
            self._seen.extend(new)
            return [*head, self._state.digest()]
        self._lead, self._seen_size = lead, size
        whole = ([] if system is None else [system]) + messages[:shown]
        return [*head, self._conversation(whole, lead)]

    def _list_parts(self, value: list[Any] | MessageView) -> list[bytes]:
        """The parts of a list of messages (or a view of a subclass): as `_view_parts`."""
        self._window = None
        size = len(value)
        first = value.first if isinstance(value, MessageView) else value[0] if size else None
        lead = 1 if first is not None and first.get("role") == "system" else 0
        self._lead, self._seen_size = lead, size
        messages = value if isinstance(value, list) else value.as_list()
        head = [self._message(first)] if lead else []
        return [*head, self._conversation(messages, lead)]

    def _conversation(self, messages: list[Any], lead: int) -> bytes:
        """The running hash of `messages[lead:]`, extended when they extend the last ones."""
        known = len(self._seen)
        # List equality is checked in C and short-circuits on identical objects.
        if len(messages) - lead >= known and messages[lead : lead + known] == self._seen:
            new = messages[lead + known :]
        else:
            self._state = _NEW_HASH.copy()
            self._seen = []
            new = messages[lead:]
        for message in new:
            self._state.update(self._message(message))
        self._seen.extend(new)
        return self._state.digest()  # digest() leaves the state open for the next step


def fingerprint(request: dict[str, Any]) -> str:
    """A hash of the request's meaning, volatile fields (tool-call ids…) left out."""
    return Fingerprinter()(request)


def request_diff(
    recorded: dict[str, Any], current: dict[str, Any], source: TraceSource | None = None
) -> list[Change]:
    """Every difference between the recorded and the current request, volatile fields aside;
    for a recording converted from a trace (`source`), only in what that trace recorded."""
    changes: list[Change] = []
    if source is not None:
        recorded, current = source.known(recorded), source.known(current)
    _diff(normalize(recorded), normalize(current), "", changes, source is not None)
    return changes


def value_diff(old: Any, new: Any, path: str) -> list[Change]:
    """Every difference between two JSON values (a recorded and a live answer), each at its
    path under `path`."""
    changes: list[Change] = []
    _diff(old, new, path, changes, False)
    return changes


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _diff(old: Any, new: Any, path: str, out: list[Change], results_as_json: bool) -> None:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in [*old, *(k for k in new if k not in old)]:
            a, b = old.get(key, _MISSING), new.get(key, _MISSING)
            where = _join(path, str(key))
            if a is _MISSING:
                out.append(Change(where, "added", new=b))
            elif b is _MISSING:
                out.append(Change(where, "removed", old=a))
            else:
                _diff(a, b, where, out, results_as_json)
        return
    if isinstance(old, list) and isinstance(new, list):
        if path == "messages":
            _diff_messages(old, new, out, results_as_json)
        else:
            _diff_list(old, new, path, out, results_as_json)
        return
    if (old != new or type(old) is not type(new)) and not fits(old, new):
        if path.endswith(".function.arguments") and same_json_text(old, new):
            return
        out.append(Change(path or "(request)", "changed", old, new))


def _diff_list(
    old: list[Any], new: list[Any], path: str, out: list[Change], results_as_json: bool
) -> None:
    for index in range(max(len(old), len(new))):
        where = f"{path}[{index}]"
        if index >= len(old):
            out.append(Change(where, "added", new=new[index]))
        elif index >= len(new):
            out.append(Change(where, "removed", old=old[index]))
        else:
            _diff(old[index], new[index], where, out, results_as_json)


def same_json_text(old: Any, new: Any) -> bool:
    """Are `old` and `new` JSON texts of one value (spacing and key order aside)?"""
    if not isinstance(old, str) or not isinstance(new, str):
        return False
    parsed_old, parsed_new = _parsed_json(old), _parsed_json(new)
    return parsed_old is not None and parsed_old == parsed_new


def _parsed_json(text: str) -> bytes | None:
    """`text` as canonical JSON bytes when it holds a JSON object or array, else None."""
    if not text.lstrip().startswith(("{", "[")):
        return None
    try:
        return _json.canonical(orjson.loads(text))
    except (orjson.JSONDecodeError, TypeError):
        return None


def _comparable(message: Any, results_as_json: bool) -> Any:
    """A message as messages are aligned: its JSON texts (tool-call arguments, and tool
    results when `results_as_json`) in one spelling."""
    if not isinstance(message, dict):
        return message
    calls = message.get("tool_calls")
    if calls and isinstance(calls, list):
        return {**message, "tool_calls": [_call_comparable(call) for call in calls]}
    if results_as_json and message.get("role") == "tool":
        content = message.get("content")
        parsed = _parsed_json(content) if isinstance(content, str) else None
        if parsed is not None:
            return {**message, "content": parsed.decode()}
    return message


def _call_comparable(call: Any) -> Any:
    function = call.get("function") if isinstance(call, dict) else None
    arguments = function.get("arguments") if isinstance(function, dict) else None
    parsed = _parsed_json(arguments) if isinstance(arguments, str) else None
    if parsed is None:
        return call
    return {**call, "function": {**function, "arguments": parsed.decode()}}


def _diff_message(old: Any, new: Any, path: str, out: list[Change], results_as_json: bool) -> None:
    if (
        results_as_json
        and isinstance(old, dict)
        and isinstance(new, dict)
        and old.get("role") == new.get("role") == "tool"
        and same_json_text(old.get("content"), new.get("content"))
    ):
        old = {**old, "content": new["content"]}
    _diff(old, new, path, out, results_as_json)


def _alignment_keys(
    old: list[Any], new: list[Any], results_as_json: bool
) -> tuple[list[bytes], list[bytes]]:
    """Each message's bytes as messages are aligned: a message the other side holds as it is
    keeps its own; only the others have their JSON texts parsed (`_comparable`), which costs."""
    keys_old = [_json.canonical(m) for m in old]
    keys_new = [_json.canonical(m) for m in new]
    both = set(keys_old).intersection(keys_new)
    for keys, messages in ((keys_old, old), (keys_new, new)):
        for index, key in enumerate(keys):
            if key not in both:
                keys[index] = _json.canonical(_comparable(messages[index], results_as_json))
    return keys_old, keys_new


def _diff_messages(
    old: list[Any], new: list[Any], out: list[Change], results_as_json: bool
) -> None:
    """Align messages by content, so an inserted or dropped message is named as such."""
    old = unmasked(old, new)  # a recorded message with masked secrets pairs with its own
    keys_old, keys_new = _alignment_keys(old, new, results_as_json)
    matcher = difflib.SequenceMatcher(a=keys_old, b=keys_new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        if tag == "replace" and i2 - i1 == j2 - j1:
            for offset in range(i2 - i1):
                where = f"messages[{j1 + offset}]"
                _diff_message(old[i1 + offset], new[j1 + offset], where, out, results_as_json)
            continue
        for index in range(i1, i2):
            out.append(Change(f"messages[{index}]", "removed", old=old[index]))
        for index in range(j1, j2):
            out.append(Change(f"messages[{index}]", "added", new=new[index]))


def nearest(
    request: dict[str, Any],
    recorded: list[dict[str, Any]],
    limit: int = 3,
    source: TraceSource | None = None,
) -> list[tuple[int, list[Change]]]:
    """The recorded requests closest to `request` (fewest changes), with their differences."""
    scored = [
        (len(changes), index, changes)
        for index, r in enumerate(recorded)
        if (changes := request_diff(r, request, source)) is not None
    ]
    scored.sort(key=lambda item: (item[0], item[1]))
    return [(index, changes) for _, index, changes in scored[:limit]]


def fallback_drift(
    recorded: dict[str, Any] | None, current: dict[str, Any] | list[str] | None
) -> list[Change]:
    """How a model call's fallback path differs from the recorded one (`FallbackModel`).

    `recorded` is the recording's fallback record (`ModelResponse.fallback`: `answered_by`,
    `chain`, `failed`), None when the first model answered. `current` is the current run's
    record, or — when the recorded answer is served, so no model ran — the chain of model
    names the code would now try: the path drifts when the model that answered is no longer
    in the chain, or is no longer reached after the same models.
    """
    if isinstance(current, list):
        if recorded is None:
            return []
        answered = recorded.get("answered_by")
        tried = [f.get("model") for f in recorded.get("failed") or ()]
        if answered in current and current[: current.index(answered)] == tried:
            return []
        return [Change("fallback.chain", "changed", recorded.get("chain"), current)]
    old, new = _path_of(recorded), _path_of(current)
    if old == new:
        return []
    if recorded is None or current is None:
        kind: Literal["added", "removed"] = "added" if recorded is None else "removed"
        return [Change("fallback", kind, old=recorded, new=current)]
    changes = []
    if old[-1] != new[-1]:
        changes.append(Change("fallback.answered_by", "changed", old[-1], new[-1]))
    if old[:-1] != new[:-1]:
        changes.append(Change("fallback.failed", "changed", old[:-1], new[:-1]))
    return changes


def _path_of(record: dict[str, Any] | None) -> list[Any]:
    """The models a call went through, the one that answered last."""
    if record is None:
        return []
    return [*(f.get("model") for f in record.get("failed") or ()), record.get("answered_by")]
