"""Linear-size request storage: each model request as a diff against the previous one.

A run's requests grow by a few messages a step, so storing each in full would make a trace
quadratic in its length. Instead each request is stored as operations over the previous
request of the same run (and purpose): keep a slice of its messages, add new ones, or edit
one (a common prefix and suffix of its content kept, the middle replaced — how a re-rendered
system prompt or a truncated message looks), plus the parameters set or unset. Memory that
drops or summarises messages is just "keep fewer, add the summary".

Diffs are computed over *redacted* messages, and the hash is of the full redacted request,
so `apply_diff` rebuilds exactly what was stored and the hash proves it. Messages are
compared by their canonical JSON bytes, never by object identity, so a message changed in
place between steps is still seen as changed.
"""

from __future__ import annotations

import bisect
import hashlib
from dataclasses import dataclass, field
from typing import Any

import orjson

from agentbench.trace._json import canonical
from agentbench.trace.redact import Redactor

# A message is stored as an edit of the previous one at its place when that keeps at least
# this many characters — or always for the system prompt, which is re-rendered every step:
# then it reads as "changed", not as one message dropped and another added.
_MIN_EDIT_SAVING = 16


@dataclass
class RequestChain:
    """The previous request of a run, as the next diff needs it."""

    parts: list[bytes] = field(default_factory=list)  # canonical bytes of each raw message
    messages: list[Any] = field(default_factory=list)  # the same messages, redacted
    stored_parts: list[bytes] = field(default_factory=list)  # canonical bytes, redacted
    param_parts: dict[str, bytes] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)  # redacted
    stored_param_parts: dict[str, bytes] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    # id(message) → (message, a copy of it as it was, its canonical bytes): a message seen in
    # the previous request is re-encoded only if it no longer equals its copy.
    seen: dict[int, tuple[Any, Any, bytes]] = field(default_factory=dict)
    _positions: dict[bytes, list[int]] | None = None

    def position(self, part: bytes, at_or_after: int) -> int | None:
        """Where `part` occurs among the previous messages, preferring at/after a position."""
        if self._positions is None:
            self._positions = {}
            for index, known in enumerate(self.parts):
                self._positions.setdefault(known, []).append(index)
        found = self._positions.get(part)
        if not found:
            return None
        after = bisect.bisect_left(found, at_or_after)
        return found[after] if after < len(found) else found[0]


@dataclass(frozen=True)
class EncodedRequest:
    diff: dict[str, Any]
    hash: str
    messages: int
    added: int
    dropped: int


def request_hash(request: dict[str, Any]) -> str:
    """SHA-256 of the request's canonical JSON (sorted keys, compact)."""
    return hashlib.sha256(canonical(request)).hexdigest()


def encode_request(
    chain: RequestChain | None, request: dict[str, Any], redactor: Redactor
) -> tuple[EncodedRequest, RequestChain]:
    """The diff of `request` against `chain` (None: the run's first), and the new chain."""
    previous = chain or RequestChain()
    raw_messages = list(request.get("messages") or [])
    builder = _MessagesDiff(previous, raw_messages, redactor)
    builder.build()

    param_parts: dict[str, bytes] = {}
    params: dict[str, Any] = {}
    stored_param_parts: dict[str, bytes] = {}
    changed: dict[str, Any] = {}
    for key, value in request.items():
        if key == "messages":
            continue
        part = canonical(value)
        param_parts[key] = part
        if previous.param_parts.get(key) == part:
            params[key] = previous.params[key]
            stored_param_parts[key] = previous.stored_param_parts[key]
        else:
            params[key] = changed[key] = redactor.value(value)
            stored_param_parts[key] = canonical(params[key])
    removed = [key for key in previous.param_parts if key not in param_parts]
    order = list(request.keys())

    diff: dict[str, Any] = {"messages": builder.ops, "n": len(raw_messages)}
    if changed:
        diff["set"] = changed
    if removed:
        diff["unset"] = removed
    if order != previous.order:
        diff["order"] = order
    encoded = EncodedRequest(
        diff=diff,
        hash=_assembled_hash(order, builder.stored_parts, stored_param_parts),
        messages=len(raw_messages),
        added=builder.added,
        dropped=max(0, len(previous.parts) - builder.reused),
    )
    chain = RequestChain(
        builder.parts,
        builder.messages,
        builder.stored_parts,
        param_parts,
        params,
        stored_param_parts,
        order,
        builder.seen,
    )
    return encoded, chain


def apply_diff(previous: dict[str, Any] | None, diff: dict[str, Any]) -> dict[str, Any]:
    """Rebuild a request from the previous (rebuilt) request and its stored diff."""
    base = previous or {}
    old_messages = base.get("messages") or []
    messages: list[Any] = []
    for op in diff["messages"]:
        if op[0] == "keep":
            messages.extend(old_messages[op[1] : op[2]])
        elif op[0] == "add":
            messages.extend(op[1])
        elif op[0] == "edit":
            messages.append(_edited(old_messages[op[1]], op[2], op[3], op[4]))
        else:
            raise ValueError(f"unknown request-diff operation {op[0]!r}")
    if len(messages) != diff["n"]:
        raise ValueError(f"request diff rebuilt {len(messages)} messages, expected {diff['n']}")
    params = {k: v for k, v in base.items() if k != "messages"}
    for key in diff.get("unset", ()):
        params.pop(key, None)
    params.update(diff.get("set", {}))
    order = diff.get("order") or list(base.keys())
    return _assemble(order, messages, params)


def _assemble(order: list[str], messages: list[Any], params: dict[str, Any]) -> dict[str, Any]:
    return {key: messages if key == "messages" else params[key] for key in order}


def _assembled_hash(order: list[str], messages: list[bytes], params: dict[str, bytes]) -> str:
    """`request_hash` of the stored request, from its parts' canonical bytes.

    Joining bytes already computed for each message keeps a step's cost to the new messages
    instead of re-encoding the whole conversation; the bytes equal `canonical(request)`.
    """
    fields = []
    for key in sorted(order):
        value = b"[" + b",".join(messages) + b"]" if key == "messages" else params[key]
        fields.append(canonical(key) + b":" + value)
    return hashlib.sha256(b"{" + b",".join(fields) + b"}").hexdigest()


class _MessagesDiff:
    """Walks the new messages once, matching runs of them against the previous request."""

    def __init__(self, previous: RequestChain, raw: list[Any], redactor: Redactor) -> None:
        self.previous = previous
        self.raw = raw
        self.redactor = redactor
        self.seen: dict[int, tuple[Any, Any, bytes]] = {}
        self.parts = self._parts(raw)
        self.messages: list[Any] = []
        self.stored_parts: list[bytes] = []
        self.ops: list[list[Any]] = []
        self.added = 0
        self.reused = 0  # previous messages kept or edited

    def _parts(self, raw: list[Any]) -> list[bytes]:
        """Canonical bytes of every message; unchanged ones come from the previous step."""
        before, seen, parts = self.previous.seen, self.seen, []
        for message in raw:
            key = id(message)
            known = before.get(key)
            # Same object and still equal to the copy taken when it was first seen: unchanged,
            # even if the memory policy edits messages in place.
            if known is None or known[0] is not message or known[1] != message:
                part = canonical(message)
                known = (message, orjson.loads(part), part)
            seen[key] = known
            parts.append(known[2])
        return parts

    def build(self) -> None:
        old = self.previous.parts
        expect = 0  # the previous message we would continue with
        i = 0
        while i < len(self.parts):
            part = self.parts[i]
            at = expect if expect < len(old) and old[expect] == part else None
            if at is None and expect < len(old):  # past the old end, all is new: no lookup
                at = self.previous.position(part, expect)
            if at is None:
                expect = self._new_message(i, expect)
                i += 1
                continue
            length = _run_length(self.parts, i, old, at)
            self._keep(at, at + length)
            i += length
            expect = at + length

    def _keep(self, start: int, end: int) -> None:
        last = self.ops[-1] if self.ops else None
        if last is not None and last[0] == "keep" and last[2] == start:
            last[2] = end
        else:
            self.ops.append(["keep", start, end])
        self.messages.extend(self.previous.messages[start:end])
        self.stored_parts.extend(self.previous.stored_parts[start:end])
        self.reused += end - start

    def _new_message(self, index: int, expect: int) -> int:
        redacted = self.redactor.value(self.raw[index])
        self.messages.append(redacted)
        self.stored_parts.append(canonical(redacted))
        base = self.previous.messages[expect] if expect < len(self.previous.messages) else None
        edit = _edit(base, redacted)
        if edit is not None:
            self.ops.append(["edit", expect, *edit])
            self.reused += 1
            return expect + 1
        self.added += 1
        last = self.ops[-1] if self.ops else None
        if last is not None and last[0] == "add":
            last[1].append(redacted)
        else:
            self.ops.append(["add", [redacted]])
        return expect


def _run_length(new: list[bytes], i: int, old: list[bytes], at: int) -> int:
    """How many messages from new[i] on equal old[at] on (at least 1): a binary search over
    slice comparisons, which run in C and mostly compare identical objects."""
    low, high = 1, min(len(new) - i, len(old) - at)
    while low < high:
        mid = (low + high + 1) // 2
        if new[i : i + mid] == old[at : at + mid]:
            low = mid
        else:
            high = mid - 1
    return low


def _edit(base: Any, new: Any) -> tuple[int, int, str] | None:
    """(prefix kept, suffix kept, middle) turning `base`'s content into `new`'s, if it pays."""
    if not (isinstance(base, dict) and isinstance(new, dict)) or base.keys() != new.keys():
        return None
    old_text, new_text = base.get("content"), new.get("content")
    if not (isinstance(old_text, str) and isinstance(new_text, str)):
        return None
    if any(base[k] != new[k] for k in base if k != "content"):
        return None
    prefix = _common_prefix(old_text, new_text)
    limit = min(len(old_text), len(new_text)) - prefix
    suffix = _common_suffix(old_text, new_text, limit)
    if prefix + suffix < _MIN_EDIT_SAVING and new.get("role") != "system":
        return None
    return prefix, suffix, new_text[prefix : len(new_text) - suffix]


def _edited(base: dict[str, Any], prefix: int, suffix: int, middle: str) -> dict[str, Any]:
    text = base["content"]
    made = dict(base)
    made["content"] = text[:prefix] + middle + text[len(text) - suffix :]
    return made


def _common_prefix(a: str, b: str) -> int:
    """Length of the common prefix, by binary search over slice comparisons (C speed)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


def _common_suffix(a: str, b: str, limit: int) -> int:
    low, high = 0, max(0, limit)
    while low < high:
        mid = (low + high + 1) // 2
        if a[len(a) - mid :] == b[len(b) - mid :]:
            low = mid
        else:
            high = mid - 1
    return low
