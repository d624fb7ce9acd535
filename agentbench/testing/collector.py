"""A stand-in OpenTelemetry collector on 127.0.0.1: OTLP/HTTP in, OTLP/JSON lines out.

It takes what a real OTLP/HTTP exporter sends — `POST /v1/traces` and `/v1/logs`, protobuf
(`application/x-protobuf`, the exporters' default, gzip or not) or JSON — decodes it with
opentelemetry-proto, keeps every request, and writes them as the collector's file exporter
does: one OTLP/JSON export request per line. Tests point `OTLPSpanExporter(endpoint=...)` at
it to check what really went over the wire; examples use it to turn a program's telemetry
into a file `agentbench traces import-otel` reads. Needs the `otel` extra.
"""

from __future__ import annotations

import gzip
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from google.protobuf.json_format import MessageToDict, ParseDict
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from agentbench.otel.otlp_json import hex_ids

_KINDS = {"/v1/traces": ExportTraceServiceRequest, "/v1/logs": ExportLogsServiceRequest}


class OtlpCollector:
    """`with OtlpCollector() as collector:` … `collector.endpoint` … `collector.spans()`."""

    def __init__(self, out: Path | None = None) -> None:
        self.out = out
        self.requests: list[dict[str, Any]] = []  # OTLP/JSON documents, in arrival order
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> OtlpCollector:
        collector = self

        class Handler(_Handler):
            owner = collector

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> OtlpCollector:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def endpoint(self) -> str:
        """The base URL (`OTEL_EXPORTER_OTLP_ENDPOINT`); traces go to `endpoint + /v1/traces`."""
        assert self._server is not None, "start the collector first"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def received(self, document: dict[str, Any], headers: dict[str, str]) -> None:
        with self._lock:
            self.requests.append(document)
            self.headers.append(headers)
            if self.out is not None:
                with self.out.open("a", encoding="utf-8") as out:
                    out.write(json.dumps(document, separators=(",", ":")) + "\n")

    def spans(self) -> list[dict[str, Any]]:
        """Every span received, as OTLP/JSON objects (ids in hex)."""
        return [
            span
            for document in self.requests
            for resource in document.get("resourceSpans", [])
            for scope in resource.get("scopeSpans", [])
            for span in scope.get("spans", [])
        ]


class _Handler(BaseHTTPRequestHandler):
    owner: OtlpCollector

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        return

    def do_POST(self) -> None:
        kind = _KINDS.get(self.path)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if kind is None:
            self._answer(404, b"")
            return
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        message = kind()
        try:
            if "json" in (self.headers.get("Content-Type") or ""):
                ParseDict(json.loads(body), message)
            else:
                message.ParseFromString(body)
        except Exception as exc:  # a malformed export: tell the exporter, as a collector does
            self._answer(400, str(exc).encode())
            return
        document = hex_ids(MessageToDict(message, use_integers_for_enums=True))
        self.owner.received(document, {k.lower(): v for k, v in self.headers.items()})
        self._answer(200, b"")  # an empty ExportTraceServiceResponse: all accepted

    def _answer(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
