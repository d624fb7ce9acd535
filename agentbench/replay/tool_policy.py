"""What a tool does during replay: run live, return the recorded result, a stub, or a fault.

`live` (the default) runs the code under test — that is the point of replay. `recorded`
returns what the tool returned when the session was recorded (matched by tool, arguments and
occurrence), for tools that reach systems a replay must not touch. `stub` returns a fixed
value; `fault` injects a system error or a timeout, to see how the agent copes. Handoff and
dispatch tools are the framework's own and always run.
"""

from __future__ import annotations

import asyncio
import enum
from collections import defaultdict, deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from agentbench.errors import UsageError
from agentbench.replay.trajectory import canonical
from agentbench.runtime.context import RunContext
from agentbench.runtime.tools import ResultKind, Tool, ToolResult


class ToolPolicy(enum.StrEnum):
    LIVE = "live"
    RECORDED = "recorded"
    STUB = "stub"
    FAULT = "fault"

    @classmethod
    def parse(cls, value: ToolPolicy | str) -> ToolPolicy:
        try:
            return cls(value)
        except ValueError:
            valid = ", ".join(p.value for p in cls)
            raise UsageError(f"tool policy {value!r} is not one of: {valid}") from None


@dataclass
class ToolPolicies:
    """A default policy and per-tool overrides, with stub values and fault kinds."""

    default: ToolPolicy = ToolPolicy.LIVE
    per_tool: dict[str, ToolPolicy] = field(default_factory=dict)
    stubs: dict[str, Any] = field(default_factory=dict)
    faults: dict[str, str] = field(default_factory=dict)  # tool -> a FAULT_KINDS kind

    @classmethod
    def parse(cls, default: str = "live", specs: Iterable[str] = ()) -> ToolPolicies:
        """From CLI words: `NAME=live|recorded`, `NAME=stub:VALUE` (JSON or text),
        `NAME=fault` / `NAME=fault:KIND` (`fault_problem` lists the kinds)."""
        policies = cls(default=ToolPolicy.parse(default))
        for spec in specs:
            name, sep, rule = spec.partition("=")
            if not sep or not name:
                raise UsageError(f"--tool {spec!r}: expected NAME=POLICY (e.g. search=recorded)")
            kind, _, argument = rule.partition(":")
            policy = ToolPolicy.parse(kind)
            policies.per_tool[name] = policy
            if policy is ToolPolicy.STUB:
                policies.stubs[name] = _stub_value(argument)
            elif policy is ToolPolicy.FAULT:
                if (problem := fault_problem(argument)) is not None:
                    raise UsageError(f"--tool {spec!r}: {problem}")
                policies.faults[name] = argument or "error"
        return policies

    @classmethod
    def of(cls, value: ToolPolicies | Mapping[str, str] | None) -> ToolPolicies:
        if value is None:
            return cls()
        if isinstance(value, ToolPolicies):
            return value
        return cls.parse("live", [f"{name}={rule}" for name, rule in value.items()])

    def policy_for(self, tool: str) -> ToolPolicy:
        return self.per_tool.get(tool, self.default)

    def overridden(self, other: ToolPolicies) -> ToolPolicies:
        """These policies with `other`'s per-tool rules on top (a case's over its suite's)."""
        return ToolPolicies(
            self.default,
            {**self.per_tool, **other.per_tool},
            {**self.stubs, **other.stubs},
            {**self.faults, **other.faults},
        )


# What can go wrong with a tool on purpose. `error` and `timeout` apply to every tool; an MCP
# server's tools, served through `agentbench mcp-proxy`, also take `jsonrpc` (a JSON-RPC error
# in place of a result), `crash` (the server goes away mid-call) and `slow:SECONDS` (the answer
# comes that late). Elsewhere those three are a failed call (`jsonrpc`, `crash`) and a late
# one (`slow`).
FAULT_KINDS = ("error", "timeout", "jsonrpc", "crash", "slow")


def fault_problem(kind: str) -> str | None:
    """What is wrong with a fault's kind as written after `fault:`, or None."""
    name, _, seconds = kind.partition(":")
    if name == "slow":
        try:
            delay = float(seconds)
        except ValueError:
            delay = -1.0
        if not 0 <= delay <= 3600:
            return (
                f"a slow fault names its delay in seconds, 0 to 3600 (fault:slow:2.5); got {kind!r}"
            )
        return None
    if kind not in ("", *FAULT_KINDS) or seconds:
        return (
            "expected fault, fault:error, fault:timeout, fault:jsonrpc, fault:crash or "
            f"fault:slow:SECONDS; got 'fault:{kind}'"
        )
    return None


_FAILED = {"crash": "crashed", "jsonrpc": "answered with a protocol error"}


def slow_delay(kind: str) -> float | None:
    """The delay of a `slow:SECONDS` fault, None for any other kind."""
    name, _, seconds = kind.partition(":")
    return float(seconds) if name == "slow" else None


def _stub_value(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def _key(tool: str, arguments: Any) -> str:
    return f"{tool}:{orjson.dumps(canonical(arguments), option=orjson.OPT_SORT_KEYS).decode()}"


class _SentOrder:
    """Recorded results in the key order the model saw them. A cassette keeps a tool's result
    as YAML, whose writer sorts mapping keys; the tool messages of the recorded requests keep
    the order the tool returned. A result sent back in sorted order would be a different tool
    message, and replay would report drift the code did not cause."""

    def __init__(self, requests: Iterable[dict[str, Any]]) -> None:
        self._requests = requests
        self._by_value: dict[bytes, Any] | None = None

    def of(self, data: Any) -> Any:
        if not isinstance(data, dict | list):
            return data
        if self._by_value is None:
            self._by_value = self._index()
        return self._by_value.get(_sorted(data), data)

    def _index(self) -> dict[bytes, Any]:
        found: dict[bytes, Any] = {}
        texts: set[str] = set()  # every request repeats the earlier messages: parse each once
        for request in self._requests:
            for message in request.get("messages") or ():
                text = message.get("content") if message.get("role") == "tool" else None
                if not isinstance(text, str) or text[:1] not in "{[" or text in texts:
                    continue
                texts.add(text)
                try:
                    value = orjson.loads(text)
                except orjson.JSONDecodeError:  # cut short, or not JSON: no order to learn
                    continue
                found.setdefault(_sorted(value), value)
        return found


def _sorted(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)


class RecordedToolTimeout(TimeoutError):  # noqa: N818 - a TimeoutError, as the live one was
    """The recorded run ran out of its time budget while this tool call ran: replayed, the
    call does not run, and the run stops with the same timeout."""


class ReplayTools:
    """The runner's tool interceptor during replay: applies the policies. `requests`: the
    recorded requests, whose tool messages give recorded results their original key order."""

    def __init__(
        self,
        policies: ToolPolicies,
        recorded: Iterable[dict[str, Any]] = (),
        requests: Iterable[dict[str, Any]] = (),
        stops: Iterable[int] = (),
    ) -> None:
        self.policies = policies
        # Recorded runs the clock stopped among tool calls: after how many finished calls of
        # the session (`replay.models.tool_stops`). The call at that count, and every other
        # call of its run, stops the run as the recording did instead of running.
        self._stops = sorted(stops)
        self._calls = 0
        self._stopped_run: str | None = None
        self._order = _SentOrder(requests)
        self._recorded: dict[str, deque[tuple[dict[str, Any], list[dict[str, Any]]]]] = defaultdict(
            deque
        )
        for item in recorded:
            self._recorded[_key(item["tool"], item["arguments"])].append(
                (item["result"], item.get("context") or [])
            )

    async def __call__(
        self, tool: Tool, arguments: dict[str, Any], context: RunContext
    ) -> ToolResult | None:
        self._stop_if_recorded(context)
        if getattr(tool, "handoff_target", None) is not None or getattr(tool, "routes", None):
            return None
        policy = self.policies.policy_for(tool.name)
        if policy is ToolPolicy.LIVE:
            return None
        if policy is ToolPolicy.STUB:
            return ToolResult.ok(self.policies.stubs.get(tool.name))
        if policy is ToolPolicy.FAULT:
            kind = self.policies.faults.get(tool.name, "error")
            delay = slow_delay(kind)
            if delay is not None:  # late, then as the tool answers
                await asyncio.sleep(delay)
                return None
            if kind == "timeout":
                after = "" if tool.timeout_s is None else f" after {tool.timeout_s:g} s"
                return ToolResult.system_error(
                    f"tool {tool.name!r} timed out{after} (injected fault)"
                )
            what = {"crash": "crashed", "jsonrpc": "answered with a protocol error"}.get(
                kind, "failed"
            )
            return ToolResult.system_error(f"tool {tool.name!r} {what} (injected fault)")
        queue = self._recorded.get(_key(tool.name, arguments))
        if not queue:
            return ToolResult.system_error(
                f"replay: no recorded result for {tool.name}({orjson.dumps(arguments).decode()}); "
                "the recording never made this call (use --tool "
                f"{tool.name}=live to run it)"
            )
        recorded, changes = queue.popleft()
        for change in changes:  # what the tool wrote to the context when it really ran
            namespace = change["key"].partition(".")[0] if "." in change["key"] else None
            if change["op"] == "remove":
                context.delete(change["key"], scope=change["scope"])
            else:
                context.set(
                    change["key"], change["new"], scope=change["scope"], namespace=namespace
                )
        return ToolResult(
            kind=ResultKind(recorded.get("kind", "ok")),
            data=self._order.of(recorded.get("data")),
            error=recorded.get("error"),
            truncated=bool(recorded.get("truncated", False)),
            stop=bool(recorded.get("stop", False)),
        )

    def _stop_if_recorded(self, context: RunContext) -> None:
        """Raise where the recording's clock stopped its run among tool calls."""
        index = self._calls
        self._calls += 1
        if self._stopped_run is not None and context.run_id == self._stopped_run:
            raise RecordedToolTimeout("the recorded run ran out of its time budget here")
        if self._stops and self._stops[0] <= index:
            self._stops.pop(0)
            self._stopped_run = context.run_id
            raise RecordedToolTimeout(
                f"the recorded run ran out of its time budget while tool call #{index + 1} "
                "ran; replayed, it stops there too"
            )
