"""OTLP/JSON: spans (and log records) written as the collector's file exporter writes them,
and read back from the export requests a file holds.

One `ExportTraceServiceRequest` (or `ExportLogsServiceRequest`) per line, in the OTLP/JSON
encoding: lowerCamelCase keys, enums as integers, 64-bit integers as decimal strings, and
trace and span ids as hex strings, not base64 (the one place it differs from protobuf's
canonical JSON). Writing uses opentelemetry's own OTLP encoder, so what we write is what an
OTLP exporter would send. `spans_of` and `logs_of` read one parsed request (files are read by
`otlp_files`): lenient where files in the wild differ (ids in base64, integers as numbers,
enums by name) and exact about what is wrong and where — the file, line, span name and id,
and the field expected — for every shape a value can have, so nothing malformed gets past
here as anything but an `OtlpFileError`. Attribute values nest at most `MAX_DEPTH` levels,
integers fit in 64 bits, times are nanoseconds since 1970 that fit in 64 bits.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentbench.errors import UsageError
from agentbench.otel.bounded_json import INT_MAX, MAX_DEPTH

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
_INT64 = (-(2**63), 2**63 - 1)
_FIXED64 = (0, INT_MAX)
_STATUS_NAMES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}


def _kind(node: Any) -> str:
    return "null" if node is None else type(node).__name__


def _list(node: Any, where: str, name: str) -> list[Any]:
    if node is None:
        return []
    if not isinstance(node, list):
        raise OtlpFileError(f"{where}: {name}: expected a list, got {_kind(node)}")
    return node


def _object(node: Any, where: str, name: str) -> dict[str, Any]:
    if node is None:
        return {}
    if not isinstance(node, dict):
        raise OtlpFileError(f"{where}: {name}: expected an object, got {_kind(node)}")
    return node


def _objects(node: Any, where: str, name: str) -> list[dict[str, Any]]:
    items = _list(node, where, name)
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise OtlpFileError(f"{where}: {name}[{index}]: expected an object, got {_kind(item)}")
    return items


def _text(node: Any, where: str, name: str) -> str:
    if node is None:
        return ""
    if not isinstance(node, str):
        raise OtlpFileError(f"{where}: {name}: expected a string, got {_kind(node)}")
    return node


def _integer(value: Any, bounds: tuple[int, int], where: str, name: str, what: str) -> int:
    """An integer given as a JSON number or decimal text, within `bounds` (64 bits)."""
    number: int | None = None
    if type(value) is int:
        number = value
    elif isinstance(value, str) and value.strip().lstrip("-").isdigit() and len(value) <= 21:
        number = int(value)
    if number is None or not bounds[0] <= number <= bounds[1]:
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:39] + "…"
        raise OtlpFileError(f"{where}: {name} {shown} is not {what}")
    return number


def value_of(node: Any, where: str, depth: int = 1) -> Any:
    """An OTLP `AnyValue` as plain Python; arrays and key-value lists at most MAX_DEPTH deep."""
    if not isinstance(node, dict):
        raise OtlpFileError(f"{where}: expected an AnyValue object, got {_kind(node)}")
    if not node:
        return None
    if "stringValue" in node:
        return _text(node["stringValue"], where, "stringValue")
    if "boolValue" in node:
        if not isinstance(node["boolValue"], bool):
            raise OtlpFileError(f"{where}: boolValue: expected true or false")
        return node["boolValue"]
    if "intValue" in node:
        return _integer(node["intValue"], _INT64, where, "intValue", "a 64-bit integer")
    if "doubleValue" in node:
        return _double(node["doubleValue"], where)
    if "arrayValue" in node or "kvlistValue" in node:
        if depth > MAX_DEPTH:
            raise OtlpFileError(f"{where}: nested deeper than {MAX_DEPTH} levels of values")
        if "arrayValue" in node:
            values = _list(
                _object(node["arrayValue"], where, "arrayValue").get("values"), where, "values"
            )
            # Indexes name a value a few levels down; past that they would only make the
            # message long.
            return [
                value_of(item, f"{where}[{i}]" if depth <= 3 else where, depth + 1)
                for i, item in enumerate(values)
            ]
        items = _object(node["kvlistValue"], where, "kvlistValue").get("values")
        return attributes_of(items, where, depth + 1)
    if "bytesValue" in node:
        return _text(node["bytesValue"], where, "bytesValue")
    raise OtlpFileError(f"{where}: unknown AnyValue {sorted(node)[:5]!r}")


def _double(value: Any, where: str) -> float:
    # Protobuf's JSON writes NaN and the infinities as strings, numbers as numbers or text.
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise OtlpFileError(f"{where}: doubleValue: expected a number, got {_kind(value)}")
    try:
        return float(value)
    except ValueError:
        raise OtlpFileError(f"{where}: doubleValue {value[:40]!r} is not a number") from None


def attributes_of(items: Any, where: str, depth: int = 1) -> dict[str, Any]:
    if items is not None and not isinstance(items, list):
        raise OtlpFileError(f"{where}: expected a list of attributes, got {_kind(items)}")
    out: dict[str, Any] = {}
    for item in items or []:
        if not isinstance(item, dict) or not isinstance(item.get("key"), str):
            raise OtlpFileError(f"{where}: expected attributes as {{key, value}} objects")
        key = item["key"]
        out[key] = value_of(item.get("value") or {}, f"{where} attribute {key}", depth)
    return out


def _id(value: Any, size: int, where: str, name: str) -> str | None:
    if value in (None, ""):
        return None
    if not isinstance(value, str):
        raise OtlpFileError(f"{where}: {name}: expected {size * 2} hex digits, got {_kind(value)}")
    text = value
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
    shown = text if len(text) <= 40 else text[:39] + "…"
    raise OtlpFileError(f"{where}: {name} {shown!r} is neither {size * 2} hex digits nor base64")


def _nanos(value: Any, where: str, name: str) -> int:
    if value in (None, ""):
        return 0
    return _integer(value, _FIXED64, where, name, "nanoseconds since 1970 (64 bits)")


def _status_code(code: Any, where: str) -> int:
    if isinstance(code, str) and code in _STATUS_NAMES:
        return _STATUS_NAMES[code]
    if code is None:
        return 0
    return _integer(code, (0, 2), where, "status.code", "0, 1 or 2 (unset, ok, error)")


def _span(raw: dict[str, Any], where: str, file: str, scope: dict[str, Any], resource: Any) -> Span:
    name = _text(raw.get("name"), where, "name")
    span_id = _id(raw.get("spanId"), 8, f"{where} span {name!r}", "spanId")
    at = f"{where} span {name!r}" + (f" ({span_id})" if span_id else "")
    if span_id is None:
        raise OtlpFileError(f"{at}: no spanId; every span has one (16 hex digits)")
    trace_id = _id(raw.get("traceId"), 16, at, "traceId")
    if trace_id is None:
        raise OtlpFileError(f"{at}: no traceId; every span has one (32 hex digits)")
    status = _object(raw.get("status"), at, "status")
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=_id(raw.get("parentSpanId"), 8, at, "parentSpanId"),
        name=name,
        start_ns=_nanos(raw.get("startTimeUnixNano"), at, "startTimeUnixNano"),
        end_ns=_nanos(raw.get("endTimeUnixNano"), at, "endTimeUnixNano"),
        attributes=attributes_of(raw.get("attributes"), at),
        resource=resource,
        scope=_text(scope.get("name"), at, "scope.name"),
        scope_version=_text(scope.get("version"), at, "scope.version"),
        where=at,
        file=file,
        events=[
            SpanEvent(
                name=_text(event.get("name"), at, "events.name"),
                time_ns=_nanos(event.get("timeUnixNano"), at, "timeUnixNano"),
                attributes=attributes_of(event.get("attributes"), f"{at} event"),
            )
            for event in _objects(raw.get("events"), at, "events")
        ],
        status_code=_status_code(status.get("code"), at),
        status_message=_text(status.get("message"), at, "status.message"),
    )


def spans_of(document: dict[str, Any], where: str, file: str) -> Iterator[Span]:
    """The spans of one parsed `ExportTraceServiceRequest`; `where` is its file and line."""
    for resource_spans in _objects(document.get("resourceSpans"), where, "resourceSpans"):
        resource_node = _object(resource_spans.get("resource"), where, "resource")
        resource = attributes_of(resource_node.get("attributes"), f"{where} resource")
        for scope_spans in _objects(resource_spans.get("scopeSpans"), where, "scopeSpans"):
            scope = _object(scope_spans.get("scope"), where, "scope")
            for raw in _objects(scope_spans.get("spans"), where, "spans"):
                yield _span(raw, where, file, scope, resource)


def logs_of(document: dict[str, Any], where: str) -> Iterator[LogRecord]:
    """The log records of one parsed `ExportLogsServiceRequest`."""
    for resource_logs in _objects(document.get("resourceLogs"), where, "resourceLogs"):
        for scope_logs in _objects(resource_logs.get("scopeLogs"), where, "scopeLogs"):
            for raw in _objects(scope_logs.get("logRecords"), where, "logRecords"):
                at = f"{where} log record"
                attributes = attributes_of(raw.get("attributes"), at)
                event_name = raw.get("eventName") or attributes.get("event.name", "")
                yield LogRecord(
                    trace_id=_id(raw.get("traceId"), 16, at, "traceId"),
                    span_id=_id(raw.get("spanId"), 8, at, "spanId"),
                    time_ns=_nanos(raw.get("timeUnixNano"), at, "timeUnixNano"),
                    event_name=event_name if isinstance(event_name, str) else str(event_name),
                    attributes=attributes,
                    body=value_of(raw.get("body") or {}, f"{at} body"),
                    where=at,
                )
