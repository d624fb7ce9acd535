"""One MCP server as the proxy serves it: which messages the real server answers, which the
recording answers, which a fault answers, and what differed from the recording.

* **Recording** (`recording=True`): every request goes to the real server and is kept, the
  `initialize` answer, the lists and each call (stubs and faults still apply: a case that
  injects a fault is recorded with it).
* **Replaying**, each tool call follows its policy (`replay.tool_policy`): `recorded` answers
  from the recording (the same call, in order; one it does not hold is an error naming the
  nearest recorded call, and a finding), `live` asks the real server and compares its answer
  with the recording, `stub` answers a fixed value, `fault` injects `error` (an `isError`
  result), `jsonrpc` (a JSON-RPC error), `timeout` (no answer until the client gives up),
  `crash` (the server goes away) or `slow:SECONDS`. The handshake and the lists come from the
  real server whenever some tool is live, and its tool list is then compared with the
  recording's tool by tool and field by field; otherwise from the recording, with no server
  started at all.

The proxy does its own handshake with the real server, with the client's `initialize`
params, whenever it first needs it: a client whose handshake was answered from the recording
can still have one tool call go live.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from agentbench.mcp_proxy.matching import (
    RecordedCalls,
    call_key,
    describe_call,
    tool_list_changes,
)
from agentbench.mcp_proxy.recording import LIST_METHODS, McpRecording, RecordedCall
from agentbench.mcp_proxy.upstream import Message, Upstream, UpstreamError
from agentbench.replay.drift import Change, value_diff
from agentbench.replay.tool_policy import ToolPolicies, ToolPolicy, slow_delay
from agentbench.runtime.mcp.tools import effect_of
from agentbench.runtime.tools import ResultKind

# JSON-RPC codes: the spec's internal error, and one of the implementation-defined range for
# "this proxy has no answer" (the SDKs use -32000 and -32001 for their own).
INTERNAL_ERROR = -32603
NO_RECORDED_ANSWER = -32098
REQUEST_TIMEOUT = -32001
DEFAULT_INITIALIZE: dict[str, Any] = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "agentbench-mcp-proxy", "version": "1"},
}

FindingKind = Literal[
    "tool_list_changed", "initialize_changed", "no_recorded_answer", "answer_changed"
]


class ServerCrash(Exception):  # noqa: N818 - what the client is to see: the server gone
    """An injected `crash`: the front ends the client's connection with no answer."""


@dataclass(frozen=True)
class ToolOutcome:
    """How one tool call through the proxy ended: ok, the tool's own "no" (`isError`), or a
    failure of the protocol, the server or an injected fault."""

    kind: ResultKind
    error: str | None


@dataclass(frozen=True)
class Finding:
    """Something the session did that the recording did not: what, where, and the fields."""

    kind: FindingKind
    server: str
    what: str  # "tools/list", "tools/call find_part {"sku":"A-100"}"
    changes: list[Change] = field(default_factory=list)
    message: str = ""

    def describe(self, width: int = 72) -> str:
        head = f"{self.server}: {self.kind.replace('_', ' ')}: {self.what}"
        if self.message:
            head += f" — {self.message}"
        return head + "".join(f"\n    {c.describe(width)}" for c in self.changes[:6])

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "server": self.server,
            "what": self.what,
            "message": self.message,
            "changes": [c.as_dict() for c in self.changes],
        }


# Every proxy of the process while it lives: the OTel hook tells a boundary target's MCP
# tools by them (`otel.mcp.McpToolIndex`).
_live: weakref.WeakSet[McpProxy] = weakref.WeakSet()


def live_proxies() -> list[McpProxy]:
    return list(_live)


class McpProxy:
    """The proxy for one server, whatever front the client reached it by."""

    def __init__(
        self,
        server: str,
        *,
        recorded: McpRecording | None = None,
        upstream: Callable[[], Upstream] | None = None,
        policies: ToolPolicies | None = None,
        recording: bool = False,
        timeout_s: float = 120.0,
        fault_timeout_s: float = 60.0,
        client_transport: str = "stdio",
    ) -> None:
        self.server = server
        self.client_transport = client_transport  # how the client reaches the proxy
        self.recorded = recorded
        self.policies = policies or ToolPolicies(default=ToolPolicy.RECORDED)
        self.recording = recording
        self.made = McpRecording(server)  # what the real server said in this session
        self.findings: list[Finding] = []
        self.answered = 0
        self.upstream_failures = 0  # requests the real server failed (not there, gone, late)
        self.outcomes: dict[bytes, deque[ToolOutcome]] = {}  # how each tool call ended
        self.on_server_message: Callable[[Message], Awaitable[None]] | None = None
        self._make_upstream = upstream
        self._upstream: Upstream | None = None
        self._init_result: dict[str, Any] | None = None
        self._client_init: dict[str, Any] | None = None
        self._connecting = asyncio.Lock()
        self._calls = RecordedCalls(recorded.calls if recorded else ())
        self._timeout_s = timeout_s
        self._fault_timeout_s = fault_timeout_s
        if recording and upstream is None:
            raise UpstreamError(f"recording MCP server {server!r} needs the real server")
        _live.add(self)

    def listed(self, tool: str) -> dict[str, Any] | None:
        """The tool's entry in the tool list this session showed (live, else recorded)."""
        listed = self.made.tools or (self.recorded.tools if self.recorded else None) or []
        for spec in listed:
            if isinstance(spec, dict) and spec.get("name") == tool:
                return spec
        return None

    @property
    def protocol_version(self) -> str | None:
        handshake = self.made.initialize or (self.recorded.initialize if self.recorded else None)
        version = (handshake or {}).get("protocolVersion")
        return version if isinstance(version, str) else None

    # -- what is live ----------------------------------------------------------------------------
    @property
    def live(self) -> bool:
        """Whether the real server is reached: recording, or some tool's policy is live."""
        if self._make_upstream is None:
            return False
        policies = self.policies
        return (
            self.recording
            or policies.default is ToolPolicy.LIVE
            or ToolPolicy.LIVE in policies.per_tool.values()
        )

    def policy_for(self, tool: str) -> ToolPolicy:
        """A tool's policy, by its own name or `server.name`; recording, `recorded` is live."""
        policies = self.policies
        policy = policies.per_tool.get(f"{self.server}.{tool}") or policies.policy_for(tool)
        if self.recording and policy is ToolPolicy.RECORDED:
            return ToolPolicy.LIVE
        return policy

    def _rule(self, table: dict[str, Any], tool: str, default: Any) -> Any:
        return table.get(f"{self.server}.{tool}", table.get(tool, default))

    # -- messages --------------------------------------------------------------------------------
    async def handle(self, message: Any) -> Message | None:
        """The answer to one message from the client (None for a notification or a response);
        ServerCrash when a fault says the server goes away."""
        if not isinstance(message, dict):
            return _error(None, -32600, "agentbench mcp-proxy: a message is a JSON object")
        method = message.get("method")
        if not isinstance(method, str):
            if ("result" in message or "error" in message) and self._upstream is not None:
                await self._upstream.send_raw(message)  # the client's answer to the server
            return None
        params = message.get("params")
        if params is None:
            params = {}
        if "id" not in message:
            await self._notification(method, params if isinstance(params, dict) else None)
            return None
        if not isinstance(params, dict):
            return _error(message["id"], -32602, f"{method}: params must be an object")
        try:
            answer = await self._answer(method, params)
        except UpstreamError as exc:
            self.upstream_failures += 1
            answer = {"error": {"code": INTERNAL_ERROR, "message": f"agentbench mcp-proxy: {exc}"}}
        self.answered += 1
        return {"jsonrpc": "2.0", "id": message["id"], **answer}

    async def _notification(self, method: str, params: dict[str, Any] | None) -> None:
        if method == "notifications/initialized":
            return  # the proxy's own handshake with the real server sent it
        # Cancellations name the client's request ids, which the server never saw: a
        # cancelled call runs to its end there, and its answer is dropped.
        if self._upstream is not None and method != "notifications/cancelled":
            await self._upstream.notify(method, params)

    async def _answer(self, method: str, params: dict[str, Any]) -> Message:
        if method == "initialize":
            return await self._initialize(params)
        if method == "ping":
            return {"result": {}}
        if method in LIST_METHODS:
            return await self._list(method, params)
        if method == "tools/call":
            try:
                answer = await self._tool_call(params)
            except ServerCrash:
                self._note(params, {"error": {"message": "the server crashed (injected fault)"}})
                raise
            self._note(params, answer)
            return answer
        if self.live:
            return await self._forwarded(method, params)
        return self._from_recording(method, params)

    async def _initialize(self, params: dict[str, Any]) -> Message:
        self._client_init = params
        if self.live:
            result = await self._connect()
            self.made.initialize = result
            recorded = self.recorded.initialize if self.recorded else None
            if recorded is not None:
                changes = [
                    c
                    for c in value_diff(recorded, result, "initialize")
                    if not c.path.startswith("initialize.protocolVersion")
                ]
                if changes:
                    self.findings.append(
                        Finding("initialize_changed", self.server, "initialize", changes)
                    )
            return {"result": result}
        if self.recorded is None or self.recorded.initialize is None:
            return self._missing("initialize", params, "the recording has no handshake")
        return {"result": self.recorded.initialize}

    async def _list(self, method: str, params: dict[str, Any]) -> Message:
        cursor = params.get("cursor")
        key = f"{method}?cursor={cursor}" if cursor else method
        if not self.live:
            lists = self.recorded.lists if self.recorded else {}
            if key not in lists:
                return self._missing(method, params, "the recording never listed it")
            return {"result": lists[key]}
        answer = await self._forwarded_raw(method, params)
        result = answer.get("result")
        if isinstance(result, dict):
            self.made.lists[key] = result
            recorded = (self.recorded.lists if self.recorded else {}).get(key)
            if method == "tools/list" and isinstance(recorded, dict):
                changes = tool_list_changes(recorded.get("tools") or [], result.get("tools") or [])
                if changes:
                    names = sorted({c.path.split(".", 1)[0] for c in changes})
                    self.findings.append(
                        Finding(
                            "tool_list_changed",
                            self.server,
                            "tools/list",
                            changes,
                            f"the server's tools differ from the recording ({', '.join(names)})",
                        )
                    )
        return answer

    async def _tool_call(self, params: dict[str, Any]) -> Message:
        name = params.get("name")
        if not isinstance(name, str):
            return {"error": {"code": -32602, "message": "tools/call: params.name is missing"}}
        policy = self.policy_for(name)
        if policy not in (ToolPolicy.STUB, ToolPolicy.FAULT) and not self.recording:
            injected = self._calls.injected("tools/call", params)
            if injected is not None:  # the recording's fault or stub, injected again
                if injected.injected == "fault:crash":
                    raise ServerCrash(f"tool {name!r}: injected crash, as recorded")
                return injected.answer()
        if policy is ToolPolicy.STUB:
            answer = {"result": _tool_result(self._rule(self.policies.stubs, name, None))}
            return self._injected(params, answer, "stub")
        if policy is ToolPolicy.FAULT:
            kind = self._rule(self.policies.faults, name, "error")
            delay = slow_delay(kind)
            if delay is None:
                if kind == "crash" and self.recording:
                    self._injected(
                        params, {"error": {"code": 0, "message": "crash"}}, "fault:crash"
                    )
                return self._injected(params, await self._fault(kind, name), f"fault:{kind}")
            await asyncio.sleep(delay)
            policy = self._unfaulted()
        if policy is ToolPolicy.LIVE and self._make_upstream is not None:
            return await self._forwarded("tools/call", params)
        return self._from_recording("tools/call", params)

    def _note(self, params: dict[str, Any], answer: Message) -> None:
        """Keep how a tool call ended, for the trace of a target that sees only the text its
        framework made of it (`outcome`)."""
        name = params.get("name")
        if not isinstance(name, str):
            return
        error = answer.get("error")
        result = answer.get("result")
        if isinstance(error, dict):
            ended = ToolOutcome(ResultKind.SYSTEM_ERROR, str(error.get("message") or error))
        elif isinstance(result, dict) and result.get("isError"):
            ended = ToolOutcome(ResultKind.BUSINESS_FAILURE, _text_of(result))
        else:
            ended = ToolOutcome(ResultKind.OK, None)
        key = call_key(name, params.get("arguments") or {})
        self.outcomes.setdefault(key, deque()).append(ended)

    def outcome(self, tool: str, arguments: dict[str, Any]) -> ToolOutcome | None:
        """How the next unclaimed call of `tool` with `arguments` ended, or None."""
        queue = self.outcomes.get(call_key(tool, arguments))
        return queue.popleft() if queue else None

    def effect(self, tool: str) -> str | None:
        """The effect a tool's annotations declare, from the tool list this session saw."""
        spec = self.listed(tool)
        return effect_of(spec.get("annotations") or {}).value if spec is not None else None

    def _injected(self, params: dict[str, Any], answer: Message, how: str) -> Message:
        """Keep an answer a policy gave in place of the server, when recording."""
        if self.recording:
            self.made.calls.append(
                RecordedCall("tools/call", params, answer.get("result"), answer.get("error"), how)
            )
        return answer

    def _unfaulted(self) -> ToolPolicy:
        """What a slow tool does once its delay is over: what the other tools do."""
        if self.recording or self.policies.default is ToolPolicy.LIVE:
            return ToolPolicy.LIVE
        return ToolPolicy.RECORDED

    async def _fault(self, kind: str, name: str) -> Message:
        if kind == "crash":
            raise ServerCrash(f"tool {name!r}: injected crash")
        if kind == "jsonrpc":
            message = f"tool {name!r} failed (injected fault: a JSON-RPC error)"
            return {"error": {"code": INTERNAL_ERROR, "message": message}}
        if kind == "timeout":
            await asyncio.sleep(self._fault_timeout_s)  # the client's own timeout comes first
            message = f"tool {name!r} timed out (injected fault)"
            return {"error": {"code": REQUEST_TIMEOUT, "message": message}}
        text = f"tool {name!r} failed (injected fault)"
        return {"result": {"content": [{"type": "text", "text": text}], "isError": True}}

    # -- the real server -------------------------------------------------------------------------
    async def _connect(self) -> dict[str, Any]:
        """The real server, started and handshaken once; its `initialize` result."""
        async with self._connecting:
            if self._upstream is not None and self._init_result is not None:
                return self._init_result
            if self._make_upstream is None:
                raise UpstreamError(f"MCP server {self.server!r}: no real server to reach")
            upstream = self._make_upstream()
            upstream.on_message = self._from_server
            await upstream.start()
            try:
                answer = await upstream.request(
                    "initialize", self._client_init or DEFAULT_INITIALIZE, self._timeout_s
                )
                if not isinstance(answer.get("result"), dict):
                    raise UpstreamError(
                        f"the MCP server ({upstream.describe()}) refused the handshake: "
                        f"{_error_text(answer)}"
                    )
                await upstream.notify("notifications/initialized", None)
            except BaseException:
                await upstream.close()
                raise
            self._upstream, self._init_result = upstream, answer["result"]
            return answer["result"]

    async def _from_server(self, message: Message) -> None:
        if self.on_server_message is not None:
            await self.on_server_message(message)
        elif "id" in message and "method" in message and self._upstream is not None:
            # A request (sampling, elicitation) with no client to relay it to: say so.
            await self._upstream.send_raw(
                _error(
                    message["id"],
                    -32601,
                    "agentbench mcp-proxy relays no server requests to this client",
                )
            )

    async def _forwarded_raw(self, method: str, params: dict[str, Any]) -> Message:
        await self._connect()
        assert self._upstream is not None
        answer = await self._upstream.request(method, params, self._timeout_s)
        return {k: answer[k] for k in ("result", "error") if k in answer} or {
            "error": {"code": INTERNAL_ERROR, "message": "the server's answer had no result"}
        }

    async def _forwarded(self, method: str, params: dict[str, Any]) -> Message:
        """Asked of the real server; kept, and compared with the recorded answer."""
        answer = await self._forwarded_raw(method, params)
        call = RecordedCall(method, params, answer.get("result"), answer.get("error"))
        self.made.calls.append(call)
        recorded = self._calls.take(method, params)
        if recorded is not None:
            changes = value_diff(recorded.answer(), call.answer(), "")
            if changes:
                self.findings.append(
                    Finding("answer_changed", self.server, describe_call(method, params), changes)
                )
        return answer

    def _from_recording(self, method: str, params: dict[str, Any]) -> Message:
        recorded = self._calls.take(method, params)
        if recorded is None:
            return self._missing(method, params, "the recording never made this call")
        return recorded.answer()

    def _missing(self, method: str, params: dict[str, Any], why: str) -> Message:
        what = describe_call(method, params)
        nearest = self._calls.nearest(method, params)
        if nearest is not None:
            why += f"; nearest recorded: {nearest.describe()}"
        changes = nearest.changes if nearest is not None else []
        self.findings.append(Finding("no_recorded_answer", self.server, what, changes, why))
        message = f"agentbench mcp-proxy: no recorded answer for {what} ({why})"
        return {"error": {"code": NO_RECORDED_ANSWER, "message": message}}

    async def close(self) -> None:
        upstream, self._upstream = self._upstream, None
        if upstream is not None:
            await upstream.close()


def _text_of(result: dict[str, Any]) -> str:
    parts = [c.get("text") for c in result.get("content") or () if isinstance(c, dict)]
    return " ".join(p for p in parts if isinstance(p, str)) or "the tool reported an error"


def _tool_result(value: Any) -> dict[str, Any]:
    """A stub's value as a tool result: text, and structured content for a mapping."""
    text = value if isinstance(value, str) else orjson.dumps(value).decode()
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": False}
    if isinstance(value, dict):
        result["structuredContent"] = value
    return result


def _error(message_id: Any, code: int, text: str) -> Message:
    return {"jsonrpc": "2.0", "id": message_id, "error": {"code": code, "message": text}}


def _error_text(answer: Message) -> str:
    error = answer.get("error")
    if isinstance(error, dict):
        return str(error.get("message") or error)
    return orjson.dumps(answer).decode()[:300]
