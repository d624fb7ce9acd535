"""OTLP files read within bounds: how much, in which encoding, as JSON lines or protobuf.

`read(paths, max_bytes)` reads every file given (a folder's `*.json`, `*.jsonl` and `*.pb`
files) and returns their spans and log records, or raises `OtlpFileError` naming the file,
the line and what is wrong, before anything is stored. Bounds, so that no file can hang the
import or exhaust memory: all files together hold at most `max_bytes` (checked from their
sizes before any is read, and no file is read past what is left: one that grew is refused
too); only regular files (a named pipe would block forever); JSON nested at most
`MAX_DEPTH` levels and integers within 64 bits (`bounded_json`, `otlp_json`).

A file is read as what it is: OTLP/JSON lines (the collector's file exporter, `agentbench
traces export-otel`) or one pretty-printed OTLP/JSON document; OTLP protobuf, either a
stream of messages each after its 4-byte big-endian length (the file exporter's `format:
proto`) or one whole `ExportTraceServiceRequest` / `ExportLogsServiceRequest` (an OTLP/HTTP
body). Text in another encoding (UTF-16, Latin-1) and compressed files are named as such.
Each line is parsed and turned into spans at once, so a file costs its bytes and its spans,
never the parsed documents of all its lines at the same time.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

from agentbench.errors import UsageError
from agentbench.otel.bounded_json import JsonBoundsError, loads
from agentbench.otel.otlp_json import LogRecord, OtlpFileError, Span, logs_of, spans_of
from agentbench.yaml_source import SourceError, not_utf8, read_bytes, wrong_encoding

DEFAULT_MAX_MB = 100  # the collector's file exporter rotates its files at 100 MB by default
MAX_MB_ENV = "AGENTBENCH_OTEL_MAX_MB"
SUFFIXES = (".json", ".jsonl", ".pb")
_COMPRESSED = ((b"\x1f\x8b", "gzip", "gunzip"), (b"\x28\xb5\x2f\xfd", "zstd", "zstd -d"))
_JSON_EXPECTED = "expected one OTLP/JSON export request (resourceSpans or resourceLogs) per line"


def max_bytes_of(megabytes: float | None) -> int:
    """The import's bound in bytes: `megabytes` as given (`--max-mb`), else DEFAULT_MAX_MB."""
    chosen = DEFAULT_MAX_MB if megabytes is None else megabytes
    if not 0 < chosen < 2**30:  # also refuses nan and inf
        raise UsageError(f"--max-mb {chosen!r}: expected a positive number of megabytes")
    return max(1, int(chosen * 2**20))


def files_in(paths: Iterable[Path]) -> list[Path]:
    """The files to read: files as given, folders' *.json, *.jsonl and *.pb files, sorted."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found.extend(sorted(p for p in path.rglob("*") if p.suffix in SUFFIXES))
        elif path.exists() or path.is_symlink():
            found.append(path)  # a dangling link or a loop is named when it is read
        else:
            raise OtlpFileError(f"{path}: no such file or directory")
    return found


def read(paths: Iterable[Path], max_bytes: int) -> tuple[list[Span], list[LogRecord]]:
    """Every span and log record in the files (folders read recursively), within bounds."""
    paths = list(paths)
    files = files_in(paths)
    _check_total(paths, files, max_bytes)
    spans: list[Span] = []
    logs: list[LogRecord] = []
    left = max_bytes
    for file in files:
        try:
            data = read_bytes(file, left, partial(_too_big, max_bytes=max_bytes))
        except SourceError as exc:
            raise OtlpFileError(f"{file}: {exc.message}") from None
        left -= len(data)
        for document, where in _documents(file, data):
            spans.extend(spans_of(document, where, str(file)))
            logs.extend(logs_of(document, where))
    return spans, logs


def _check_total(paths: list[Path], files: list[Path], max_bytes: int) -> None:
    sizes = []
    for file in files:
        try:
            sizes.append(file.stat().st_size)
        except OSError:
            sizes.append(0)  # reading it says what is wrong, by name
    total = sum(sizes)
    if total <= max_bytes:
        return
    if len(files) == 1:
        raise OtlpFileError(f"{files[0]}: {_too_big(total, max_bytes, max_bytes=max_bytes)}")
    named = (
        ", ".join(map(str, paths)) if len(paths) <= 3 else f"{paths[0]} and {len(paths) - 1} more"
    )
    raise OtlpFileError(
        f"{named}: {len(files)} files of {total:,} bytes in all, over the import's limit of "
        f"{_limit(max_bytes)}: import them a few at a time, or raise the limit with --max-mb "
        f"(or {MAX_MB_ENV}); an import holds about five times its files' size in memory"
    )


def _too_big(size: int, left: int, *, max_bytes: int) -> str:
    if left < max_bytes:
        return (
            f"its {size:,} bytes take the files read before it past the import's limit "
            f"of {_limit(max_bytes)} (it grew since the import began): import fewer files at once"
        )
    return (
        f"{size:,} bytes, over the import's limit of {_limit(max_bytes)}: raise it with "
        f"--max-mb (or {MAX_MB_ENV}); an import holds about five times its files' size in memory"
    )


def _limit(max_bytes: int) -> str:
    return f"{max_bytes:,} bytes ({max_bytes / 2**20:g} MB)"


# -- one file's export requests ---------------------------------------------------------------
def _documents(path: Path, data: bytes) -> Iterator[tuple[dict[str, Any], str]]:
    """The export requests in a file's bytes, each with where it is (`file:line`)."""
    for magic, name, command in _COMPRESSED:
        if data.startswith(magic):
            raise OtlpFileError(
                f"{path}: {name}-compressed; decompress it first ({command} {path.name})"
            )
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]  # a UTF-8 byte-order mark: JSON takes the text after it
    first = data.lstrip()[:1]
    encoding = wrong_encoding(data)
    if first in (b"{", b"") and encoding is None:  # UTF-16LE JSON starts with "{" too
        yield from _json_documents(path, data)
        return
    messages = _protobuf_documents(path, data)
    if messages is not None:
        yield from messages
        return
    if encoding is not None:
        raise OtlpFileError(f"{path}: {encoding}; OTLP/JSON is UTF-8")
    shown = first.decode("latin-1")
    raise OtlpFileError(
        f"{path}:1: not OTLP/JSON (it starts with {shown!r}, not '{{') nor OTLP protobuf; "
        + _JSON_EXPECTED
    )


def _json_documents(path: Path, data: bytes) -> Iterator[tuple[dict[str, Any], str]]:
    """One document per line; a file whose first line is not JSON may be one pretty-printed
    document, read whole."""
    number, start = 0, 0
    while start < len(data):
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end
        line, number, line_start, start = data[start:end], number + 1, start, end + 1
        if not line.strip():
            continue
        try:
            document = loads(line, walked=True)
        except JsonBoundsError as exc:
            raise OtlpFileError(f"{path}:{number}: {exc}") from None
        except UnicodeDecodeError as exc:
            message, _ = not_utf8(line, exc, number)
            raise OtlpFileError(f"{path}:{number}: {message}; OTLP/JSON is UTF-8") from None
        except ValueError as exc:
            if line_start == _first_text(data):
                whole = _whole(path, data)
                if whole is not None:
                    yield whole
                    return
            reason = str(exc).split("\n")[0]
            raise OtlpFileError(f"{path}:{number}: not JSON ({reason}); {_JSON_EXPECTED}") from None
        yield _request(document, f"{path}:{number}"), f"{path}:{number}"


def _first_text(data: bytes) -> int:
    return len(data) - len(data.lstrip())


def _whole(path: Path, data: bytes) -> tuple[dict[str, Any], str] | None:
    """The file as one pretty-printed document, or None if it is not one."""
    try:
        document = loads(data, walked=True)
    except JsonBoundsError as exc:
        raise OtlpFileError(f"{path}: {exc}") from None
    except ValueError:
        return None
    return _request(document, f"{path}:1"), f"{path}:1"


def _request(document: Any, where: str) -> dict[str, Any]:
    if not isinstance(document, dict) or not (
        "resourceSpans" in document or "resourceLogs" in document
    ):
        raise OtlpFileError(
            f"{where}: expected an OTLP/JSON object with resourceSpans or resourceLogs"
        )
    return document


# -- protobuf ---------------------------------------------------------------------------------
def _protobuf_documents(path: Path, data: bytes) -> list[tuple[dict[str, Any], str]] | None:
    """The file's OTLP protobuf messages as OTLP/JSON documents (what `spans_of` reads), or
    None when it is not OTLP protobuf."""
    framed = _length_prefixed(data)
    pieces = framed if framed is not None else [(0, data)]
    documents = []
    for offset, piece in pieces:
        document = _message(piece)
        if document is None:
            if framed is None:
                return None
            raise OtlpFileError(
                f"{path}: the protobuf message at byte {offset} is neither an OTLP trace nor "
                "logs export request: the file is damaged, or not OTLP"
            )
        where = f"{path}:message {len(documents) + 1}" if framed is not None else str(path)
        documents.append((document, where))
    return documents


def _length_prefixed(data: bytes) -> list[tuple[int, bytes]] | None:
    """The messages of a stream of [4-byte big-endian length][message], if `data` is exactly
    that (the collector's file exporter in `format: proto`), else None."""
    pieces: list[tuple[int, bytes]] = []
    at = 0
    while at < len(data):
        if at + 4 > len(data):
            return None
        size = int.from_bytes(data[at : at + 4], "big")
        if size == 0 or at + 4 + size > len(data):
            return None
        pieces.append((at + 4, data[at + 4 : at + 4 + size]))
        at += 4 + size
    return pieces or None


def _message(data: bytes) -> dict[str, Any] | None:
    """One protobuf message as an OTLP/JSON document: a trace export request whose spans all
    have their ids, else a logs export request with log records, else None."""
    try:
        from google.protobuf.json_format import MessageToDict
        from google.protobuf.message import DecodeError
        from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
    except ModuleNotFoundError:  # pragma: no cover - the otel extra brings them
        return None
    traces = trace_service_pb2.ExportTraceServiceRequest()
    try:
        traces.ParseFromString(data)
    except (DecodeError, ValueError, RuntimeError):
        traces = None
    if traces is not None and _whole_spans(traces):
        return MessageToDict(traces, use_integers_for_enums=True)
    logs = logs_service_pb2.ExportLogsServiceRequest()
    try:
        logs.ParseFromString(data)
    except (DecodeError, ValueError, RuntimeError):
        return None
    if any(scope.log_records for resource in logs.resource_logs for scope in resource.scope_logs):
        return MessageToDict(logs, use_integers_for_enums=True)
    return None


def _whole_spans(request: Any) -> bool:
    """Does the request hold spans, each with a trace id and a span id of the right size? (A
    logs request read as a trace request parses, but its 'spans' have no ids.)"""
    spans = [s for r in request.resource_spans for scope in r.scope_spans for s in scope.spans]
    return bool(spans) and all(len(s.trace_id) == 16 and len(s.span_id) == 8 for s in spans)
