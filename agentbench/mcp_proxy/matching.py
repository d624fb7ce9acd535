"""Which recorded call answers a request, which one was nearest when none does, and how a live
server's tool list differs from the recorded one.

A request is answered by a recorded call of the same method and the same params (`_meta`
aside: progress tokens and the like change every run), in the order they were recorded: the
second identical call gets the second answer. When none is left, the nearest recorded call of
the method (the same tool first) is named with what differs, so a reader sees at once whether
an argument changed or the call is new.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from agentbench.mcp_proxy.recording import RecordedCall
from agentbench.replay.drift import Change, value_diff

SHOWN_CHANGES = 4


def call_key(method: str, params: dict[str, Any]) -> bytes:
    """What identifies a request among the recorded ones."""
    kept = {k: v for k, v in params.items() if k != "_meta"}
    return method.encode() + b" " + orjson.dumps(kept, option=orjson.OPT_SORT_KEYS)


def describe_call(method: str, params: dict[str, Any]) -> str:
    """A call as people read it: `tools/call find_part {"sku":"A-100"}`."""
    if method == "tools/call":
        arguments = params.get("arguments") or {}
        return f"tools/call {params.get('name')} {orjson.dumps(arguments).decode()}"
    kept = {k: v for k, v in params.items() if k != "_meta"}
    return f"{method} {orjson.dumps(kept).decode()}" if kept else method


@dataclass(frozen=True)
class Nearest:
    """The recorded call nearest a request no recorded call answers."""

    call: RecordedCall
    changes: list[Change]

    def describe(self) -> str:
        shown = "; ".join(c.describe(60) for c in self.changes[:SHOWN_CHANGES])
        more = len(self.changes) - SHOWN_CHANGES
        extra = f"; {more} more" if more > 0 else ""
        return f"{describe_call(self.call.method, self.call.params)} ({shown}{extra})"


class RecordedCalls:
    """The recorded calls of one server, handed out once each, in recorded order."""

    def __init__(self, calls: Iterable[RecordedCall]) -> None:
        self._all = list(calls)
        self._left: dict[bytes, deque[RecordedCall]] = defaultdict(deque)
        for call in self._all:
            self._left[call_key(call.method, call.params)].append(call)

    def take(self, method: str, params: dict[str, Any]) -> RecordedCall | None:
        """The next unanswered recorded call asking exactly this, or None."""
        queue = self._left.get(call_key(method, params))
        return queue.popleft() if queue else None

    def injected(self, method: str, params: dict[str, Any]) -> RecordedCall | None:
        """The next recorded call asking exactly this when a policy answered it in the
        recording (taken), else None (left for `take`)."""
        queue = self._left.get(call_key(method, params))
        if queue and queue[0].injected is not None:
            return queue.popleft()
        return None

    def nearest(self, method: str, params: dict[str, Any]) -> Nearest | None:
        """The recorded call of `method` with the fewest differences (the same tool first)."""
        wanted = {k: v for k, v in params.items() if k != "_meta"}
        candidates = [c for c in self._all if c.method == method]
        if method == "tools/call":
            same_tool = [c for c in candidates if c.params.get("name") == params.get("name")]
            candidates = same_tool or candidates
        best: Nearest | None = None
        for call in candidates:
            kept = {k: v for k, v in call.params.items() if k != "_meta"}
            changes = value_diff(kept, wanted, "")
            if best is None or len(changes) < len(best.changes):
                best = Nearest(call, changes)
        return best


def tool_list_changes(recorded: list[dict[str, Any]], live: list[dict[str, Any]]) -> list[Change]:
    """How the live tool list differs from the recorded one, tool by tool and field by field:
    `find_part.description`, `find_part.inputSchema.properties.sku.type`, a tool added or
    removed. Order does not count; a model sees the tools, not their order."""
    old = {str(t.get("name")): t for t in recorded if isinstance(t, dict)}
    new = {str(t.get("name")): t for t in live if isinstance(t, dict)}
    changes: list[Change] = []
    for name, tool in old.items():
        if name not in new:
            changes.append(Change(name, "removed", old=_summary(tool)))
        else:
            changes.extend(value_diff(tool, new[name], name))
    for name, tool in new.items():
        if name not in old:
            changes.append(Change(name, "added", new=_summary(tool)))
    return changes


def _summary(tool: dict[str, Any]) -> str:
    description = str(tool.get("description") or "").strip().splitlines()
    return f"tool {tool.get('name')}" + (f": {description[0]}" if description else "")
