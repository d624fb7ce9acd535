"""Comparing a tool call's arguments with the expected ones, and saying how they differ.

`subset` (the default) checks only the keys the expectation names, recursively into nested
mappings, so a new optional argument does not break a case; `exact` also rejects extra keys.
Keys listed in `ignore` (dotted for nested ones: `filters.date`) are left out on both sides.
Values are compared as canonical JSON, so JSON text and key order never count.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from agentbench.evals.scorers.text import brief
from agentbench.replay.trajectory import Step, canonical
from agentbench.runtime.handoffs import HANDOFF_PREFIX
from agentbench.runtime.orchestration import DISPATCH_TOOL

ArgsMatch = Literal["exact", "subset"]


@dataclass(frozen=True)
class ToolCallSeen:
    """A tool call that ran, as the trajectory records it."""

    tool: str
    arguments: Any
    agent: str
    result_kind: str

    def label(self) -> str:
        return f"{self.tool} with {brief(self.arguments)}"


def tool_calls(steps: Iterable[Step]) -> list[ToolCallSeen]:
    """Every tool call that ran (framework routing tools included), in order."""
    return [
        ToolCallSeen(s.signature[2], s.detail["arguments"], s.agent, s.detail["result_kind"])
        for s in steps
        if s.kind == "tool_call"
    ]


def is_routing_tool(name: str) -> bool:
    """`transfer_to_<agent>` and `dispatch_to_agent`: the framework's handoff tools."""
    return name.startswith(HANDOFF_PREFIX) or name == DISPATCH_TOOL


def rejected_calls(steps: Iterable[Step], tool: str) -> list[str]:
    """Why each call of `tool` the runtime refused (unknown tool, bad JSON, bad arguments)."""
    return [
        s.detail["reason"] for s in steps if s.kind == "tool_rejected" and s.signature[2] == tool
    ]


def argument_differences(
    expected: dict[str, Any],
    actual: Any,
    *,
    match: ArgsMatch = "subset",
    ignore: Iterable[str] = (),
) -> list[str]:
    """How `actual` differs from `expected`, one phrase per difference; [] when they match."""
    want = _without(canonical(expected), ignore)
    got = _without(canonical(actual), ignore)
    differences: list[str] = []
    _compare(want, got, "", match, differences)
    return differences


def _compare(want: Any, got: Any, path: str, match: ArgsMatch, out: list[str]) -> None:
    if isinstance(want, dict) and isinstance(got, dict):
        for key, value in want.items():
            where = f"{path}.{key}" if path else key
            if key not in got:
                out.append(f"{where} missing")
            else:
                _compare(value, got[key], where, match, out)
        if match == "exact":
            for key in got.keys() - want.keys():
                where = f"{path}.{key}" if path else key
                out.append(f"unexpected {where}: {brief(got[key], 40)}")
        return
    if want != got:
        out.append(f"{path or 'arguments'}: expected {brief(want, 40)}, got {brief(got, 40)}")


def _without(value: Any, ignore: Iterable[str]) -> Any:
    value = copy.deepcopy(value)
    for dotted in ignore:
        *parents, last = dotted.split(".")
        node = value
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(last, None)
    return value
