"""What one MCP server said in a session, as data: the recording the proxy writes and replays.

A recording keeps the server's `initialize` answer, the answers to its list methods (tools,
resources, resource templates, prompts: the tool list is what a model is shown, so it is part
of the recording and compared with a live server's) and every other request in the order it
was made (`tools/call`, `resources/read`, `prompts/get`, …), each with its result or its
JSON-RPC error. A case's cassette keeps one per server under `agentbench.mcp.<server>`; the CLI
writes one to a file of its own (YAML, or JSON by suffix).

Reading is total: anything that is not a recording is a `RecordingError` naming where.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from agentbench.errors import AgentbenchError

# The list methods whose answers are kept whole; a paginated one is kept page by page, under
# the method and the cursor it was asked with (`tools/list?cursor=…`).
LIST_METHODS = ("tools/list", "resources/list", "resources/templates/list", "prompts/list")
FORMAT = 1


class RecordingError(AgentbenchError):
    """A recording that cannot be read: the message names the file or the place."""


@dataclass
class RecordedCall:
    """One request the server answered: its method and params, and its result or error."""

    method: str
    params: dict[str, Any]
    result: Any = None
    error: dict[str, Any] | None = None  # the JSON-RPC error object, when it failed
    # The policy that answered in place of the server when it was recorded (`fault:jsonrpc`,
    # `stub`): a replay answers the same way, whatever its own policies say.
    injected: str | None = None

    def answer(self) -> dict[str, Any]:
        """The JSON-RPC answer body (without id) this call was given."""
        return {"error": self.error} if self.error is not None else {"result": self.result}

    @property
    def tool(self) -> str | None:
        name = self.params.get("name") if self.method == "tools/call" else None
        return name if isinstance(name, str) else None

    def as_dict(self, packed: bool = False) -> dict[str, Any]:
        data: dict[str, Any] = {"method": self.method, "params": self.params}
        if self.error is not None:
            data["error"] = _pack(self.error, packed)
        else:
            data["result"] = _pack(self.result, packed)
        if self.injected is not None:
            data["injected"] = self.injected
        return data


@dataclass
class McpRecording:
    """One server's session: its handshake answer, its lists and its calls, in order."""

    server: str
    initialize: dict[str, Any] | None = None
    lists: dict[str, Any] = field(default_factory=dict)  # "tools/list" -> its result
    calls: list[RecordedCall] = field(default_factory=list)

    @property
    def tools(self) -> list[dict[str, Any]] | None:
        """The server's tool list (every page), or None when it was never listed."""
        pages = [v for k, v in self.lists.items() if k.partition("?")[0] == "tools/list"]
        if not pages:
            return None
        return [t for page in pages if isinstance(page, dict) for t in page.get("tools") or ()]

    def as_dict(self, packed: bool = False) -> dict[str, Any]:
        """The recording as data; `packed`, each answer as its JSON text, for a writer that
        sorts mapping keys (a cassette's): a server's key order is what a client passes on
        to the model, so a replay must give it back as it came."""
        data: dict[str, Any] = {}
        if self.initialize is not None:
            data["initialize"] = _pack(self.initialize, packed)
        if self.lists:
            data["lists"] = {key: _pack(value, packed) for key, value in self.lists.items()}
        data["calls"] = [c.as_dict(packed) for c in self.calls]
        return data

    @classmethod
    def from_dict(cls, server: str, data: Any, where: str) -> McpRecording:
        """A recording from its data; RecordingError naming `where` for what is not one."""
        if not isinstance(data, Mapping):
            raise RecordingError(f"{where}: an MCP recording is a mapping, not {_kind(data)}")
        unknown = set(data) - {"initialize", "lists", "calls"}
        if unknown:
            raise RecordingError(
                f"{where}: unknown key(s) {', '.join(sorted(map(str, unknown)))} (expected "
                "initialize, lists, calls)"
            )
        initialize = _unpack(data.get("initialize"), f"{where}.initialize")
        if initialize is not None and not isinstance(initialize, Mapping):
            raise RecordingError(f"{where}.initialize: a mapping, not {_kind(initialize)}")
        lists = data.get("lists") or {}
        if not isinstance(lists, Mapping) or not all(isinstance(k, str) for k in lists):
            raise RecordingError(f"{where}.lists: a mapping of method to result")
        calls = data.get("calls") or []
        if not isinstance(calls, list):
            raise RecordingError(f"{where}.calls: a list, not {_kind(calls)}")
        return cls(
            server,
            dict(initialize) if initialize is not None else None,
            {key: _unpack(value, f"{where}.lists.{key}") for key, value in lists.items()},
            [_call(item, f"{where}.calls[{i}]") for i, item in enumerate(calls)],
        )


def _call(item: Any, where: str) -> RecordedCall:
    if not isinstance(item, Mapping) or not isinstance(item.get("method"), str):
        raise RecordingError(f"{where}: a call is a mapping with a 'method'")
    params = item.get("params") or {}
    if not isinstance(params, Mapping):
        raise RecordingError(f"{where}.params: a mapping, not {_kind(params)}")
    error = _unpack(item.get("error"), f"{where}.error")
    if error is not None and not (isinstance(error, Mapping) and "message" in error):
        raise RecordingError(f"{where}.error: a JSON-RPC error (code, message)")
    if error is None and "result" not in item:
        raise RecordingError(f"{where}: a call has a 'result' or an 'error'")
    injected = item.get("injected")
    if injected is not None and not isinstance(injected, str):
        raise RecordingError(f"{where}.injected: the policy that answered, as text")
    result = _unpack(item.get("result"), f"{where}.result")
    return RecordedCall(
        item["method"], dict(params), result, dict(error) if error else None, injected
    )


def _pack(value: Any, packed: bool) -> Any:
    return orjson.dumps(value).decode() if packed else value


def _unpack(value: Any, where: str) -> Any:
    """An answer as kept: data, or its JSON text (an MCP answer is never a bare string)."""
    if not isinstance(value, str):
        return value
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        raise RecordingError(f"{where}: not JSON text ({exc})") from None


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


# -- several servers, as a cassette or a file keeps them ---------------------------------------


def recordings_from(data: Any, where: str) -> dict[str, McpRecording]:
    """The recordings of `{server: recording}` data (a cassette's `mcp` info)."""
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise RecordingError(f"{where}: a mapping of server name to recording")
    return {
        str(name): McpRecording.from_dict(str(name), value, f"{where}.{name}")
        for name, value in data.items()
    }


def recordings_data(recordings: Mapping[str, McpRecording], packed: bool = False) -> dict[str, Any]:
    return {name: recording.as_dict(packed) for name, recording in recordings.items()}


def load_file(path: Path) -> dict[str, McpRecording]:
    """The recordings of a file the CLI wrote (`{format, servers: {...}}`, YAML or JSON)."""
    data = _read(path)
    if not isinstance(data, Mapping) or "servers" not in data:
        raise RecordingError(
            f"{path}: not an MCP recording (no 'servers' key; write one with "
            "`agentbench mcp-proxy --record`)"
        )
    if data.get("format") != FORMAT:
        raise RecordingError(f"{path}: MCP recording format {data.get('format')!r}, not {FORMAT}")
    return recordings_from(data["servers"], f"{path}: servers")


def save_file(path: Path, recordings: Mapping[str, McpRecording], redactor: Any = None) -> Path:
    """Write the recordings, every value through the redactor; replaced whole, never half."""
    from agentbench.trace.redaction.redactor import Redactor  # only when a file is written

    data = {"format": FORMAT, "servers": recordings_data(recordings)}
    data = (redactor or Redactor()).value(data)
    if path.suffix.lower() == ".json":
        text = orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n"
    else:
        import yaml

        text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise
    return path


def _read(path: Path) -> Any:
    from agentbench.yaml_source import SourceError, load_yaml, read_source

    try:
        text = read_source(path)  # bounded: a regular file of at most AGENTBENCH_MAX_FILE_MB
        if path.suffix.lower() == ".json":
            return orjson.loads(text)
        return load_yaml(text).data
    except orjson.JSONDecodeError as exc:
        raise RecordingError(f"{path}: not JSON ({exc})") from None
    except SourceError as exc:
        where = f":{exc.position.line}" if exc.position else ""
        raise RecordingError(f"{path}{where}: {exc.message}") from None
