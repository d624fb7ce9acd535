"""Linear-size request storage: each model request as a diff against the previous one.

A run's requests grow by a few messages a step, so storing each in full would make a trace
quadratic in its length. Instead each request is stored as operations over the previous
request of the same run (and purpose): keep a slice of its messages, add new ones, or edit
one (a common prefix and suffix of its content kept, the middle replaced — how a re-rendered
system prompt or a truncated message looks), plus the parameters set or unset. Memory that
drops or summarises messages is just "keep fewer, add the summary".

Diffs are computed over *redacted* messages, and the hash is of the full redacted request,
so `apply_diff` rebuilds exactly what was stored and the hash proves it. Messages are
compared by their canonical JSON bytes; a message's bytes are reused from the previous step
only if it is the same object at the same place and still equals a copy taken then, so a
message changed in place between steps is still seen as changed (the runtime's
`MessageView`, whose sent messages never change, needs no such check). A step's work is
thus its new messages — encoded, redacted, hashed onto the previous hash state — plus
cheap passes in C over the rest, not the whole conversation again; and the runtime's common
step (a view that only appends, its system message unchanged) not even those: its chain
extends the previous chain's lists in place (`_encode_appended`), so recording a step costs
the same at step 10 as at step 10,000.

Such a step (a view extending the last one, its system message the same) never reads the
bytes of the older messages again, so the chain lets go of them, keeping the last
`_KEPT_BYTES` messages' (a long run would otherwise hold a copy of its whole conversation as
JSON). The first step that does need them — a changed system message, memory having replaced
the conversation, a parameter that breaks the hash's continuation — encodes them again from
the messages, which the chain holds anyway, and the chain keeps every message's bytes from
then on.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import compress
from operator import is_not, ne
from typing import Any

from agentbench.runtime.message_view import MessageView
from agentbench.trace._json import canonical, kept, kept_native
from agentbench.trace.redaction.redactor import Redactor

# A message is stored as an edit of the previous one at its place when that keeps at least
# this many characters — or always for the system prompt, which is re-rendered every step:
# then it reads as "changed", not as one message dropped and another added.
_MIN_EDIT_SAVING = 16
# Up to this many messages a step are simply encoded; beyond it (memory moved messages)
# the previous ones are looked up by identity first.
_ENCODE_WITHOUT_LOOKUP = 8
# A position index is carried to the next request when at most this many places changed.
_MAX_CARRIED_CHANGES = 16
# What `_moved_text` looks for: the first characters of a changed part, at this many places.
_MOVED_PROBE_CHARS = 24
_MOVED_TRIES = 4
_KEY_PREFIX_ENTRIES = 256
# The most recent messages whose bytes a chain keeps while its steps only append (see above).
_KEPT_BYTES = 64
_KEY_PREFIXES: dict[str, bytes] = {}  # see `_key_prefix`


@dataclass
class RequestChain:
    """The previous request of a run, as the next diff needs it.

    Built once per request and handed on: the next request starts from its lists (the
    common step appends a message or two), so a step costs its new messages, not the run.
    """

    parts: list[bytes] = field(default_factory=list)  # canonical bytes of each raw message
    messages: list[Any] = field(default_factory=list)  # the same messages, redacted
    stored_parts: list[bytes] = field(default_factory=list)  # canonical bytes, redacted
    param_parts: dict[str, bytes] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)  # redacted
    stored_param_parts: dict[str, bytes] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    # The raw message objects, and a copy of each as it was when encoded (its containers
    # copied, its strings and numbers shared): a message at the same place, still the same
    # object and still equal to its copy, keeps its bytes without being encoded again.
    raw: list[Any] = field(default_factory=list)
    snapshots: list[Any] = field(default_factory=list)
    # SHA-256 state after `{<params before "messages">,"messages":[<stored_parts>` (`head` is
    # that opening): a request that only appends messages hashes just the new ones.
    head: bytes | None = None
    hasher: Any = None
    # The request's messages when the runtime sent them as a `MessageView` (see `_parts`).
    view: MessageView | None = None
    # Where each message's bytes occur: a place, or the sorted places of bytes that occur
    # more than once (a list for each message would cost ~70 bytes a message, for the rare
    # duplicate).
    _positions: dict[bytes, int | list[int]] | None = None
    # `parts` and `stored_parts` are None at places 1 to `dropped` - 1: bytes let go of (see
    # the module's notes). `keeps_bytes`: this run's chain has needed them; it keeps them now.
    dropped: int = 0
    keeps_bytes: bool = False
    # The request's JSON after its messages (`]` and the parameters after them), once a
    # request that only appended needed it: the next such request with the same parameters
    # reuses it.
    tail: bytes | None = None
    # How many messages this chain's request had: a later chain may have appended to these
    # lists (`_encode_appended`), which `_own_lists` undoes when this chain is used again.
    _count: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self._count = len(self.raw)

    def _own_lists(self) -> None:
        """Make this chain's lists its request's again, if a request encoded against it
        took them over (a chain used twice: rare, so copying them is fine): cut to its
        length, with the bytes that request's chain let go of encoded again."""
        if len(self.raw) == self._count:
            return
        count = self._count
        self.raw, self.snapshots = self.raw[:count], self.snapshots[:count]
        self.parts, self.stored_parts = self.parts[:count], self.stored_parts[:count]
        self.messages = self.messages[:count]
        self._positions = None
        if self.dropped or None in self.parts:
            _restore(self.parts, self.stored_parts, self.raw, self.messages, self.snapshots)
            self.dropped = 0

    def drop_bytes(self) -> None:
        """Let go of the bytes of all but the first and the last `_KEPT_BYTES` messages."""
        end = len(self.parts) - _KEPT_BYTES
        if self.keeps_bytes or end <= self.dropped:
            return
        self._positions = None  # it holds the bytes too; rebuilt when next asked
        for index in range(max(1, self.dropped), end):
            self.parts[index] = self.stored_parts[index] = None  # type: ignore[call-overload]
        self.dropped = end

    def restore_bytes(self) -> None:
        """Encode again the bytes `drop_bytes` let go of, and keep every message's from now."""
        _restore(self.parts, self.stored_parts, self.raw, self.messages, self.snapshots)
        self.dropped = 0
        self.keeps_bytes = True

    def position(self, part: bytes, at_or_after: int) -> int | None:
        """Where `part` occurs among the previous messages, preferring at/after a position."""
        if self._positions is None:
            self._positions = {}
            for index, known in enumerate(self.parts):
                _index(self._positions, known, index)
        found = self._positions.get(part)
        if found is None or type(found) is int:
            return found
        after = bisect.bisect_left(found, at_or_after)
        return found[after] if after < len(found) else found[0]

    def _positions_for(
        self, parts: list[bytes], changed: list[int]
    ) -> dict[bytes, int | list[int]] | None:
        """The position index of `parts` (this chain's parts with `changed` places replaced
        and more appended), taken over from this chain when it has one: then this chain
        rebuilds its own if it is asked again."""
        old = self._positions
        if old is None or len(parts) < len(self.parts) or len(changed) > _MAX_CARRIED_CHANGES:
            return None
        self._positions = None
        for index in changed:
            _unindex(old, self.parts[index], index)
            _index(old, parts[index], index)
        for index in range(len(self.parts), len(parts)):
            _index(old, parts[index], index)
        return old


def _restore(
    parts: list[bytes],
    stored: list[bytes],
    raw: list[Any],
    messages: list[Any],
    snapshots: list[Any],
) -> None:
    """Fill the places a chain let go of (None): a message's bytes are those of the raw
    message (unchanged: a view's sent messages never change), its stored bytes its own when
    nothing was redacted in it (its stored message is its copy), else the redacted message's."""
    for index, part in enumerate(parts):
        if part is None:
            parts[index] = kept(raw[index])
            redacted = messages[index]
            stored[index] = parts[index] if redacted is snapshots[index] else kept(redacted)


def _index(positions: dict[bytes, int | list[int]], part: bytes, index: int) -> None:
    """Record that `part` is at `index` (kept sorted: places come in any order)."""
    found = positions.get(part)
    if found is None:
        positions[part] = index
    elif type(found) is int:
        if found != index:
            positions[part] = [found, index] if found < index else [index, found]
    else:
        at = bisect.bisect_left(found, index)
        if at == len(found) or found[at] != index:
            found.insert(at, index)


def _unindex(positions: dict[bytes, int | list[int]], part: bytes, index: int) -> None:
    found = positions.get(part)
    if found is None:
        return
    if type(found) is int:
        if found == index:
            del positions[part]
        return
    at = bisect.bisect_left(found, index)
    if at < len(found) and found[at] == index:
        del found[at]
        if len(found) == 1:
            positions[part] = found[0]


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
    previous._own_lists()
    sent = request.get("messages")
    view = sent if isinstance(sent, MessageView) else None
    request_params = _ParamsDiff(previous, request, redactor)
    if view is not None and _only_appends(previous, view, request_params):
        return _encode_appended(previous, view, request_params, redactor)
    raw_messages = view.as_list() if view is not None else list(sent or [])
    builder = _MessagesDiff(previous, raw_messages, redactor, view)
    builder.build()
    param_parts = request_params.parts
    params = request_params.params
    stored_param_parts = request_params.stored_parts
    order = request_params.order
    diff: dict[str, Any] = {"messages": builder.ops, "n": len(raw_messages)}
    request_params.describe(diff)
    digest, head, hasher = _assembled_hash(
        order, builder.stored_parts, stored_param_parts, previous, builder.ops, builder.restore
    )
    encoded = EncodedRequest(
        diff=diff,
        hash=digest,
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
        raw_messages,
        builder.snapshots,
        head,
        hasher,
        view,
        previous._positions_for(builder.parts, builder.changed),
        builder.dropped,
        previous.keeps_bytes or builder.restored,
    )
    if builder.appends_only:
        chain.drop_bytes()
    return encoded, chain


class _ParamsDiff:
    """A request's parameters (all but its messages) against the previous request's."""

    def __init__(self, previous: RequestChain, request: dict[str, Any], redactor: Redactor):
        self.parts: dict[str, bytes] = {}
        self.params: dict[str, Any] = {}  # redacted
        self.stored_parts: dict[str, bytes] = {}
        self.changed: dict[str, Any] = {}
        for key, value in request.items():
            if key == "messages":
                continue
            part = canonical(value)
            self.parts[key] = part
            if previous.param_parts.get(key) == part:
                self.params[key] = previous.params[key]
                self.stored_parts[key] = previous.stored_param_parts[key]
            else:
                # As for a message (`_MessagesDiff._new_message`): with nothing in it to
                # mask, its redacted form is its copy and its stored bytes are its raw ones.
                copied = _snapshot(value)
                if type(copied) is not _Opaque and redactor.clean(part):
                    self.params[key] = self.changed[key] = copied
                    self.stored_parts[key] = part
                else:
                    self.params[key] = self.changed[key] = redactor.value(value)
                    self.stored_parts[key] = canonical(self.params[key])
        self.removed = [key for key in previous.param_parts if key not in self.parts]
        self.order = list(request.keys())
        self.order_changed = self.order != previous.order
        # The same parameters, in the same order: the JSON around the messages is the same.
        self.unchanged = not (self.changed or self.removed or self.order_changed)

    def describe(self, diff: dict[str, Any]) -> None:
        """Add the parameters' changes to a request's diff."""
        if self.changed:
            diff["set"] = self.changed
        if self.removed:
            diff["unset"] = self.removed
        if self.order_changed:
            diff["order"] = self.order

    @functools.cached_property
    def around_messages(self) -> tuple[bytes, bytes]:
        """The request's canonical JSON before its messages' first and after their last
        (see `_assembled_hash`), for a request that has messages."""
        keys = sorted(self.order)
        split = keys.index("messages")
        before = (_key_prefix(key) + self.stored_parts[key] + b"," for key in keys[:split])
        after = (b"," + _key_prefix(key) + self.stored_parts[key] for key in keys[split + 1 :])
        return b"{" + b"".join(before) + b'"messages":[', b"]" + b"".join(after) + b"}"


def _only_appends(previous: RequestChain, view: MessageView, params: _ParamsDiff) -> bool:
    """Whether this request is the previous one with messages appended — its system message
    the same object and unchanged, the same JSON before its messages — so the diff is "keep
    them all, add these", the hash continues, and no earlier message needs reading."""
    if previous.view is None or previous.hasher is None or not previous.raw:
        return False
    if not view.extends(previous.view):
        return False
    first = view.first
    if first is not previous.raw[0] or first != previous.snapshots[0]:
        return False
    return (params.unchanged and previous.head is not None) or (
        params.around_messages[0] == previous.head
    )


def _encode_appended(
    previous: RequestChain, view: MessageView, params: _ParamsDiff, redactor: Redactor
) -> tuple[EncodedRequest, RequestChain]:
    """`encode_request` of a request that only appends messages (see `_only_appends`), in
    time proportional to what it appended, not to the conversation: the new chain takes over
    the previous chain's lists and extends them, where the general path copies them (the
    previous chain takes them back if it is used again: `RequestChain._own_lists`)."""
    new = view.since(previous.view)  # type: ignore[arg-type]  # `_only_appends` checked it
    shared = len(previous.raw)
    snapshots = previous.snapshots
    new_parts: list[bytes] = []
    for message in new:
        # As in `_MessagesDiff._parts`: a sent message never changes, so it is its own copy.
        plain = kept_native(message)
        snapshot = message
        if plain is None:
            plain, snapshot = kept(message), _snapshot(message)
            if snapshot is not message and snapshot == message:
                snapshot = message
        new_parts.append(plain)
        snapshots.append(snapshot)
    # The appended messages read in one pass (see `_MessagesDiff._clean`).
    clean = len(new_parts) > 1 and redactor.clean(b"\n".join(new_parts))
    added: list[Any] = []
    new_stored: list[bytes] = []
    for index, message in enumerate(new):
        snapshot = snapshots[shared + index]
        if type(snapshot) is not _Opaque and (clean or redactor.clean(new_parts[index])):
            added.append(snapshot)
            new_stored.append(new_parts[index])
        else:
            redacted = redactor.value(message)
            added.append(redacted)
            new_stored.append(kept(redacted))
    previous.raw.extend(new)
    previous.parts.extend(new_parts)
    previous.stored_parts.extend(new_stored)
    previous.messages.extend(added)

    diff: dict[str, Any] = {"messages": [["keep", 0, shared]], "n": len(previous.raw)}
    if added:
        diff["messages"].append(["add", added])
    params.describe(diff)
    hasher = previous.hasher.copy()
    if new_stored:
        hasher.update(b"," + b",".join(new_stored))
    tail = previous.tail if params.unchanged and previous.tail else params.around_messages[1]
    final = hasher.copy()
    final.update(tail)
    positions = previous._positions
    if positions is not None:
        for index in range(shared, len(previous.parts)):
            _index(positions, previous.parts[index], index)
    chain = RequestChain(
        previous.parts,
        previous.messages,
        previous.stored_parts,
        params.parts,
        params.params,
        params.stored_parts,
        params.order,
        previous.raw,
        snapshots,
        previous.head,
        hasher,
        view,
        positions,
        previous.dropped,
        previous.keeps_bytes,
        tail,
    )
    previous._positions = None  # given away too (rebuilt if the previous chain is asked)
    chain.drop_bytes()
    encoded = EncodedRequest(
        diff=diff,
        hash=final.hexdigest(),
        messages=len(previous.raw),
        added=len(added),
        dropped=0,
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


def _assembled_hash(
    order: list[str],
    messages: list[bytes],
    params: dict[str, bytes],
    previous: RequestChain,
    ops: list[list[Any]],
    restore: Callable[[], None] = lambda: None,
) -> tuple[str, bytes | None, Any]:
    """`request_hash` of the stored request, from its parts' canonical bytes; also the
    opening before its messages and the hash state after them, for the next request.

    The bytes hashed equal `canonical(request)`. When the request keeps all of the previous
    one's messages first and the same opening, the previous hash state is continued with the
    new messages only, so a step costs what it added instead of the whole conversation.
    """
    keys = sorted(order)
    if "messages" not in keys:
        fields = [_key_prefix(key) + params[key] for key in keys]
        return hashlib.sha256(b"{" + b",".join(fields) + b"}").hexdigest(), None, None
    split = keys.index("messages")
    before = [_key_prefix(key) + params[key] for key in keys[:split]]
    after = [_key_prefix(key) + params[key] for key in keys[split + 1 :]]
    head = b"{" + b"".join(field + b"," for field in before) + b'"messages":['
    done = len(previous.stored_parts)
    continued = (
        previous.hasher is not None
        and previous.head == head
        and (done == 0 or (ops and ops[0][0] == "keep" and ops[0][1] == 0 and ops[0][2] >= done))
    )
    if continued:
        hasher = previous.hasher.copy()
    else:
        restore()  # every message is hashed: the bytes let go of are needed again
        hasher = hashlib.sha256(head)
        done = 0
    if done < len(messages):
        hasher.update((b"," if done else b"") + b",".join(messages[done:]))
    final = hasher.copy()
    final.update(b"]" + b"".join(b"," + field for field in after) + b"}")
    return final.hexdigest(), head, hasher


def _key_prefix(key: Any) -> bytes:
    """`"key":` as canonical JSON: the same few parameter names come at every request."""
    if type(key) is not str:  # 1 and True are one dict key, but not one JSON text
        return canonical(key) + b":"
    prefix = _KEY_PREFIXES.get(key)
    if prefix is None:
        if len(_KEY_PREFIXES) >= _KEY_PREFIX_ENTRIES:
            _KEY_PREFIXES.clear()
        prefix = _KEY_PREFIXES[key] = canonical(key) + b":"
    return prefix


class _MessagesDiff:
    """Walks the new messages once, matching runs of them against the previous request."""

    def __init__(
        self,
        previous: RequestChain,
        raw: list[Any],
        redactor: Redactor,
        view: MessageView | None = None,
    ) -> None:
        self.previous = previous
        # The runtime's conversation only grows and its sent messages never change (see
        # `MessageView`): when this request's view extends the previous one, the messages
        # they share need no checking, only the first (the system message, re-rendered).
        self.trusted = (
            view is not None and previous.view is not None and view.extends(previous.view)
        )
        # Only appended to, the system message the same object, unchanged: such a step never
        # reads the previous messages' bytes, some of which the chain let go of. Any other
        # step has them encoded again first.
        self.appends_only = self.trusted and (
            not raw
            or not previous.raw
            or (raw[0] is previous.raw[0] and raw[0] == previous.snapshots[0])
        )
        self.restored = False
        self.dropped = previous.dropped if self.appends_only else 0
        if not self.appends_only and previous.dropped:
            previous.restore_bytes()
            self.restored = True
        self.raw = raw
        self.redactor = redactor
        self.snapshots: list[Any] = []
        self.changed: list[int] = []  # places (among the previous ones) whose bytes changed
        self.shared = 0  # messages at places the previous request had too
        self.appended_clean: bool | None = None  # see `_clean`
        self.parts = self._parts(raw)
        self.messages: list[Any] = []
        self.stored_parts: list[bytes] = []
        self.ops: list[list[Any]] = []
        self.added = 0
        self.reused = 0  # previous messages kept or edited

    def restore(self) -> None:
        """Encode again the bytes the chain let go of (its hash cannot be continued)."""
        if self.dropped:
            _restore(self.parts, self.stored_parts, self.raw, self.messages, self.snapshots)
            self.dropped = 0
            self.restored = True

    def _parts(self, raw: list[Any]) -> list[bytes]:
        """Canonical bytes of every message; unchanged ones come from the previous step.

        A message is unchanged when the previous request had the same object at the same
        place and it still equals the copy taken then (a memory policy may edit messages in
        place). Both tests run over the whole list in C (over the first message only, for
        a view extending the last one); only the other messages are encoded, and those are
        few: the ones appended, or re-rendered, since the last step.
        """
        previous = self.previous
        shared = self.shared = min(len(raw), len(previous.raw))
        parts = previous.parts[:shared]
        snapshots = previous.snapshots[:shared]
        checked = range(min(shared, 1) if self.trusted else shared)
        # Positions where the object differs, or no longer equals its copy.
        redo = set(compress(checked, map(is_not, raw, previous.raw)))
        redo.update(compress(checked, map(ne, raw, snapshots)))
        moved = _moved_index(previous, raw, shared, len(redo))
        for index in sorted(redo):
            part, snapshots[index] = self._encoded(raw[index], moved)
            if part != parts[index]:
                self.changed.append(index)
            parts[index] = part
        for message in raw[shared:]:
            # A message the runtime's conversation gained never changes once sent (see
            # `MessageView`): it is its own copy (so the run's messages are not held twice),
            # and being plain data is all its encoding has to show.
            plain = kept_native(message) if self.trusted else None
            if plain is not None:
                parts.append(plain)
                snapshots.append(message)
                continue
            part, snapshot = self._encoded(message, moved)
            if self.trusted and snapshot is not message and snapshot == message:
                snapshot = message
            parts.append(part)
            snapshots.append(snapshot)
        self.snapshots = snapshots
        return parts

    def _encoded(self, message: Any, moved: dict[int, int] | None) -> tuple[bytes, Any]:
        """A message's bytes and copy: from the previous request if it is there, unchanged,
        at another place (memory dropped or reordered messages), else encoded now."""
        if moved is not None:
            at = moved.get(id(message))
            previous = self.previous
            if (
                at is not None
                and previous.raw[at] is message
                and previous.parts[at] is not None  # not let go of
                and previous.snapshots[at] == message
            ):
                return previous.parts[at], previous.snapshots[at]
        return kept(message), _snapshot(message)

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
        snapshot = self.snapshots[index]
        previous = self.previous
        base = previous.messages[expect] if expect < len(previous.messages) else None
        # The previous message at this place, stored as its own copy (nothing was redacted
        # in it): if only its content changed, redaction need only read the change.
        change = None
        if base is not None and base is previous.snapshots[expect]:
            change = _content_change(base, snapshot)
        if type(snapshot) is not _Opaque and self._clean(index, snapshot, change, base):
            # Nothing in it to redact: what redaction would build is its copy, and its stored
            # bytes are its raw bytes. (The copy is never changed: both only get read.)
            redacted = snapshot
            self.stored_parts.append(self.parts[index])
        else:
            redacted = self.redactor.value(self.raw[index])
            self.stored_parts.append(kept(redacted))
        if base is not None and (change is None or redacted is not snapshot):
            change = _content_change(base, redacted)
        self.messages.append(redacted)
        edit = None if change is None else _edit(redacted, *change)
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

    def _clean(self, index: int, snapshot: Any, change: tuple[int, int] | None, base: Any) -> bool:
        if change is None:
            if index >= self.shared and len(self.parts) - self.shared > 1:
                # The messages appended since the last request, read in one pass (the
                # common step adds two or three): joined by a newline, which ends a word and
                # is in no literal, the whole is clean exactly when each message is.
                if self.appended_clean is None:
                    appended = b"\n".join(self.parts[self.shared :])
                    self.appended_clean = self.redactor.clean(appended)
                if self.appended_clean:
                    return True
            return self.redactor.clean(self.parts[index])
        text = snapshot["content"]
        start, end = change[0], len(text) - change[1]
        moved = _moved_text(base["content"], text, start, end)
        if moved:
            # `text[start:start + moved]` is old text that moved up (a state summary dropping
            # its oldest lines): only where it meets the text around it, and what follows it,
            # can hold anything the old (clean) text did not.
            clean_change = self.redactor.clean_change
            return clean_change(text, start, start) and clean_change(text, start + moved, end)
        return self.redactor.clean_change(text, start, end)


def _moved_text(old: str, new: str, start: int, end: int) -> int:
    """How much of the changed part of `new` (`new[start:end]`, after a common prefix of
    `start` characters and before a common suffix) starts with the end of the changed part
    of `old`: the old part, its head dropped, moved to the front of the new one. 0 if not.
    A few places where the new part's head occurs in the old part are tried (found in C)."""
    old_end = len(old) - (len(new) - end)
    probe = new[start : min(end, start + _MOVED_PROBE_CHARS)]
    if len(probe) < _MOVED_PROBE_CHARS:
        return 0
    at = old.find(probe, start + 1, old_end)
    for _ in range(_MOVED_TRIES):
        if at < 0:
            return 0
        moved = old_end - at
        if moved <= end - start and new.startswith(old[at:old_end], start):
            return moved
        at = old.find(probe, at + 1, old_end)
    return 0


def _moved_index(
    previous: RequestChain, raw: list[Any], shared: int, redo: int
) -> dict[int, int] | None:
    """id → place of the previous messages, when enough messages are to be encoded that
    looking for them among the previous ones (moved by memory) pays for building it."""
    if redo + len(raw) - shared <= _ENCODE_WITHOUT_LOOKUP or not previous.raw:
        return None
    return {id(message): index for index, message in enumerate(previous.raw)}


class _Opaque:
    """The copy of a value that is not plain JSON data: equal to nothing, so a message
    holding one is encoded at every step, as it may change without us seeing it."""

    __hash__ = None  # type: ignore[assignment]

    def __eq__(self, other: object) -> bool:
        return False


def _snapshot(value: Any) -> Any:
    """A copy of a message to compare it with later: containers copied, leaves shared (str
    and numbers are immutable, and shared leaves compare by identity first: fast). It is
    also what `Redactor.value` makes of the message when there is nothing to mask in it."""
    kind = type(value)
    if kind is dict:
        copied = {}
        for key, item in value.items():
            copied[key] = _snapshot(item)
            if type(copied[key]) is _Opaque:
                return copied[key]
        return copied
    if kind is list or kind is tuple:  # a tuple as a list, as redaction makes it
        items = [_snapshot(item) for item in value]
        if any(type(item) is _Opaque for item in items):
            return _Opaque()
        return items
    if value is None or kind is str or kind is int or kind is float or kind is bool:
        return value
    return _Opaque()


def _run_length(new: list[bytes], i: int, old: list[bytes], at: int) -> int:
    """How many messages from new[i] on equal old[at] on (at least 1): a binary search over
    slice comparisons, which run in C and mostly compare identical objects."""
    low, high = 1, min(len(new) - i, len(old) - at)
    if new[i : i + high] == old[at : at + high]:  # the common step: all the rest is kept
        return high
    while low < high:
        mid = (low + high + 1) // 2
        if new[i : i + mid] == old[at : at + mid]:
            low = mid
        else:
            high = mid - 1
    return low


def _content_change(base: Any, new: Any) -> tuple[int, int] | None:
    """(common prefix, common suffix) of two messages' contents when nothing else differs."""
    if not (isinstance(base, dict) and isinstance(new, dict)) or base.keys() != new.keys():
        return None
    old_text, new_text = base.get("content"), new.get("content")
    if not (isinstance(old_text, str) and isinstance(new_text, str)):
        return None
    if any(base[k] != new[k] for k in base if k != "content"):
        return None
    prefix = _common_prefix(old_text, new_text)
    limit = min(len(old_text), len(new_text)) - prefix
    return prefix, _common_suffix(old_text, new_text, limit)


def _edit(new: dict[str, Any], prefix: int, suffix: int) -> tuple[int, int, str] | None:
    """(prefix kept, suffix kept, middle) turning the previous message's content into
    `new`'s (see `_content_change`), if it pays."""
    if prefix + suffix < _MIN_EDIT_SAVING and new.get("role") != "system":
        return None
    text = new["content"]
    return prefix, suffix, text[prefix : len(text) - suffix]


def _edited(base: dict[str, Any], prefix: int, suffix: int, middle: str) -> dict[str, Any]:
    text = base["content"]
    made = dict(base)
    made["content"] = text[:prefix] + middle + text[len(text) - suffix :]
    return made


def _common_prefix(a: str, b: str) -> int:
    """Length of the common prefix, by binary search over slice comparisons (C speed). The
    first `low` characters are known equal, so each step compares only the half after them:
    the whole search reads each character about twice, not once per step."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        mid = (low + high + 1) // 2
        if b.startswith(a[low:mid], low):
            low = mid
        else:
            high = mid - 1
    return low


def _common_suffix(a: str, b: str, limit: int) -> int:
    """Length of the common suffix, at most `limit` (likewise)."""
    low, high = 0, max(0, limit)
    end_a, end_b = len(a), len(b)
    while low < high:
        mid = (low + high + 1) // 2
        if b.startswith(a[end_a - mid : end_a - low], end_b - mid):
            low = mid
        else:
            high = mid - 1
    return low
