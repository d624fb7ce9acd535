"""OTLP/JSON files: spans (and log records) written and read as the collector's file exporter does.

One `ExportTraceServiceRequest` (or `ExportLogsServiceRequest`) per line, in the OTLP/JSON
encoding: lowerCamelCase keys, enums as integers, 64-bit integers as decimal strings, and
trace and span ids as hex strings, not base64 (the one place it differs from protobuf's
canonical JSON). Writing uses opentelemetry's own OTLP encoder, so what we write is what an
OTLP exporter would send. Reading is lenient where files in the wild differ (ids in base64,
integers as numbers, a whole pretty-printed document instead of lines) and exact about where
a file is wrong: its name, line and the field expected.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentbench.errors import UsageError

_ID_FIELDS = ("traceId", "spanId", "parentSpanId")


class OtlpFileError(UsageError):
    """An OTLP/JSON file that cannot be read: names the file, line and what was expected."""


@dataclass
class SpanEvent:
    name: str
    time_ns: int
    attributes: dict[str, Any]


@dataclass
class Span:
    """One span as read from a file, ids in hex and attribute values decoded."""

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    resource: dict[str, Any]
    scope: str
    scope_version: str
    where: str  # file:line and name, for messages
    file: str = ""
    events: list[SpanEvent] = field(default_factory=list)
    status_code: int = 0  # 0 unset, 1 ok, 2 error
    status_message: str = ""


@dataclass
class LogRecord:
    """One log record (a GenAI event, on the older conventions) tied to its span."""

    trace_id: str | None
    span_id: str | None
    time_ns: int
    event_name: str
    attributes: dict[str, Any]
    body: Any
    where: str


# -- writing -----------------------------------------------------------------------------------
def hex_ids(node: Any) -> Any:
    """Protobuf's JSON gives bytes in base64; OTLP/JSON wants trace and span ids in hex."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in _ID_FIELDS and isinstance(value, str):
                node[key] = base64.b64decode(value).hex()
            else:
                hex_ids(value)
    elif isinstance(node, list):
        for item in node:
            hex_ids(item)
    return node


def span_lines(spans: Sequence[Any]) -> str:
    """Finished SDK spans (`ReadableSpan`) as one OTLP/JSON line (empty for no spans)."""
    if not spans:
        return ""
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    document = MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    return json.dumps(hex_ids(document), ensure_ascii=False, separators=(",", ":")) + "\n"


# -- reading -----------------------------------------------------------------------------------
def value_of(node: Any, where: str) -> Any:
    """An OTLP `AnyValue` as plain Python."""
    if not isinstance(node, dict):
        raise OtlpFileError(f"{where}: expected an AnyValue object, got {type(node).__name__}")
    if not node:
        return None
    if "stringValue" in node:
        return node["stringValue"]
    if "boolValue" in node:
        return bool(node["boolValue"])
    if "intValue" in node:
        try:
            return int(node["intValue"])
        except (TypeError, ValueError):
            raise OtlpFileError(
                f"{where}: intValue {node['intValue']!r} is not an integer"
            ) from None
    if "doubleValue" in node:
        return float(node["doubleValue"])
    if "arrayValue" in node:
        values = (node["arrayValue"] or {}).get("values") or []
        return [value_of(item, f"{where}[{i}]") for i, item in enumerate(values)]
    if "kvlistValue" in node:
        return attributes_of((node["kvlistValue"] or {}).get("values") or [], where)
    if "bytesValue" in node:
        return node["bytesValue"]
    raise OtlpFileError(f"{where}: unknown AnyValue {sorted(node)!r}")


def attributes_of(items: Any, where: str) -> dict[str, Any]:
    if not isinstance(items, list):
        raise OtlpFileError(f"{where}: expected a list of attributes")
    out: dict[str, Any] = {}
    for item in items:
        if not isinstance(item, dict) or "key" not in item:
            raise OtlpFileError(f"{where}: expected attributes as {{key, value}} objects")
        out[item["key"]] = value_of(item.get("value") or {}, f"{where} attribute {item['key']}")
    return out


def _id(value: Any, size: int, where: str, name: str) -> str | None:
    if value in (None, ""):
        return None
    text = str(value)
    if len(text) == size * 2:
        try:
            bytes.fromhex(text)
            return text.lower()
        except ValueError:
            pass
    try:  # protobuf's canonical JSON: base64
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) == size:
        return raw.hex()
    raise OtlpFileError(f"{where}: {name} {text!r} is neither {size * 2} hex digits nor base64")


def _nanos(value: Any, where: str, name: str) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        raise OtlpFileError(f"{where}: {name} {value!r} is not nanoseconds since 1970") from None


def _spans(document: dict[str, Any], where: str, file: str) -> Iterator[Span]:
    for resource_spans in document.get("resourceSpans") or []:
        resource = attributes_of(
            (resource_spans.get("resource") or {}).get("attributes") or [], f"{where} resource"
        )
        for scope_spans in resource_spans.get("scopeSpans") or []:
            scope = scope_spans.get("scope") or {}
            for raw in scope_spans.get("spans") or []:
                name = raw.get("name", "")
                at = f"{where} span {name!r}"
                status = raw.get("status") or {}
                yield Span(
                    trace_id=_id(raw.get("traceId"), 16, at, "traceId") or "",
                    span_id=_id(raw.get("spanId"), 8, at, "spanId") or "",
                    parent_span_id=_id(raw.get("parentSpanId"), 8, at, "parentSpanId"),
                    name=name,
                    start_ns=_nanos(raw.get("startTimeUnixNano"), at, "startTimeUnixNano"),
                    end_ns=_nanos(raw.get("endTimeUnixNano"), at, "endTimeUnixNano"),
                    attributes=attributes_of(raw.get("attributes") or [], at),
                    resource=resource,
                    scope=scope.get("name", ""),
                    scope_version=scope.get("version", ""),
                    where=at,
                    file=file,
                    events=[
                        SpanEvent(
                            name=event.get("name", ""),
                            time_ns=_nanos(event.get("timeUnixNano"), at, "timeUnixNano"),
                            attributes=attributes_of(event.get("attributes") or [], at),
                        )
                        for event in raw.get("events") or []
                    ],
                    status_code=_status_code(status.get("code")),
                    status_message=status.get("message", ""),
                )


def _status_code(code: Any) -> int:
    names = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}
    if isinstance(code, str):
        return names.get(code, 0)
    return int(code or 0)


def _logs(document: dict[str, Any], where: str) -> Iterator[LogRecord]:
    for resource_logs in document.get("resourceLogs") or []:
        for scope_logs in resource_logs.get("scopeLogs") or []:
            for raw in scope_logs.get("logRecords") or []:
                attributes = attributes_of(raw.get("attributes") or [], f"{where} log record")
                yield LogRecord(
                    trace_id=_id(raw.get("traceId"), 16, where, "traceId"),
                    span_id=_id(raw.get("spanId"), 8, where, "spanId"),
                    time_ns=_nanos(raw.get("timeUnixNano"), where, "timeUnixNano"),
                    event_name=raw.get("eventName") or str(attributes.get("event.name", "")),
                    attributes=attributes,
                    body=value_of(raw.get("body") or {}, f"{where} log record body"),
                    where=where,
                )


def _documents(path: Path) -> Iterator[tuple[dict[str, Any], str]]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise OtlpFileError(f"{path}: cannot read it as UTF-8 text ({exc})") from None
    lines = text.splitlines()
    parsed: list[tuple[dict[str, Any], str]] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            document = json.loads(line)
        except ValueError as exc:
            try:  # one pretty-printed document rather than JSON lines
                whole = json.loads(text)
            except ValueError:
                raise OtlpFileError(
                    f"{path}:{number}: not JSON ({exc.args[0] if exc.args else exc}); expected "
                    "one OTLP/JSON export request (resourceSpans or resourceLogs) per line"
                ) from None
            parsed = [(whole, f"{path}:1")]
            break
        parsed.append((document, f"{path}:{number}"))
    for document, where in parsed:
        if not isinstance(document, dict) or not (
            "resourceSpans" in document or "resourceLogs" in document
        ):
            raise OtlpFileError(
                f"{where}: expected an OTLP/JSON object with resourceSpans or resourceLogs"
            )
        yield document, where


def files_in(paths: Iterable[Path]) -> list[Path]:
    """The files to read: files as given, directories' *.json and *.jsonl files, sorted."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found.extend(sorted(p for p in path.rglob("*") if p.suffix in (".json", ".jsonl")))
        elif path.exists():
            found.append(path)
        else:
            raise OtlpFileError(f"{path}: no such file or directory")
    return found


def read(paths: Iterable[Path]) -> tuple[list[Span], list[LogRecord]]:
    """Every span and log record in the files (directories read recursively)."""
    spans: list[Span] = []
    logs: list[LogRecord] = []
    for path in files_in(paths):
        for document, where in _documents(path):
            spans.extend(_spans(document, where, str(path)))
            logs.extend(_logs(document, where))
    return spans, logs
