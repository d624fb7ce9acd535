"""Cassettes: recorded model calls in vcrpy's file format.

Each interaction is one model call: the OpenAI chat-completions request body the runtime built
and the response body the provider returned (a `chat.completion` JSON, or the server-sent-events
text of a stream, so a streamed call replays as a stream). Files are read and written with
vcrpy's own serializers (YAML by default, JSON optional), so they look like the cassettes
pytest-recording users know; agentbench's extra knowledge of the session — the input, the
original trajectory, the tool results — lives under `metadata.agentbench`. Secrets are
scrubbed with the trace redaction rules before anything is written.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import yaml
from vcr import serialize as vcr_serialize
from vcr.request import Request
from vcr.serializers import jsonserializer, yamlserializer

from agentbench.errors import AgentbenchError, UsageError
from agentbench.replay.drift import FINGERPRINT_VERSION, Fingerprinter
from agentbench.runtime.completions import (
    STREAM_OBJECT,
    CompletionFormatError,
    completion_body,
    parse_completion,
    parse_sse,
    parse_stream,
    sse_text,
)
from agentbench.runtime.models import ChatResponse, TextDeltaHandler
from agentbench.trace.redact import Redactor

CASSETTE_FORMAT = 1
DEFAULT_URI = "https://api.openai.com/v1/chat/completions"
_JSON = "application/json"
_SSE = "text/event-stream"


class RecordMode(enum.StrEnum):
    """vcrpy's record modes, as a string enum that rejects typos."""

    NONE = "none"  # replay only; a call beyond the recording is an error
    ONCE = "once"  # record if the cassette does not exist, else replay only
    NEW_EPISODES = "new_episodes"  # replay what is recorded, record calls beyond it
    ALL = "all"  # call the model every time and record everything anew

    @classmethod
    def parse(cls, value: RecordMode | str) -> RecordMode:
        try:
            return cls(value)
        except ValueError:
            valid = ", ".join(repr(mode.value) for mode in cls)
            raise UsageError(f"{value!r} is not a record mode; valid modes are: {valid}") from None


class CassetteError(AgentbenchError):
    """A cassette file is missing, corrupt or not an agentbench/vcrpy cassette."""


@dataclass
class Interaction:
    """One model call: the request body sent and the response body received."""

    request: dict[str, Any]
    response_body: str
    content_type: str = _JSON
    status: int = 200
    uri: str = DEFAULT_URI

    @property
    def streamed(self) -> bool:
        return self.content_type.startswith(_SSE)

    @classmethod
    def of(
        cls, request: dict[str, Any], response: ChatResponse, uri: str = DEFAULT_URI
    ) -> Interaction:
        """An interaction from a live call; a model without a wire body gets one built."""
        raw = response.raw
        if raw is not None and raw.get("object") == STREAM_OBJECT:
            return cls(request, sse_text(raw["chunks"]), _SSE, uri=uri)
        body = raw if raw is not None else completion_body(response, str(request.get("model", "")))
        return cls(request, orjson.dumps(body).decode(), _JSON, uri=uri)

    def response(self, on_text_delta: TextDeltaHandler | None = None) -> ChatResponse:
        """The recorded response, parsed exactly as a live one is (streams replay as streams)."""
        if self.streamed:
            return parse_stream(parse_sse(self.response_body), on_text_delta)
        return parse_completion(orjson.loads(self.response_body))


@dataclass
class Cassette:
    """The interactions of one recorded session, and what agentbench knows about it."""

    interactions: list[Interaction] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None

    # -- files ---------------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | Path) -> Cassette:
        path = Path(path)
        if not path.is_file():
            raise CassetteError(f"{path}: no such cassette file")
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise CassetteError(
                f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})"
            ) from None
        if not text.strip():
            raise CassetteError(f"{path}: the file is empty; expected a vcrpy cassette")
        try:
            loaded = vcr_serialize.deserialize(text, _serializer(path))
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            raise CassetteError(
                f"{path}:{where} is not valid YAML: {getattr(exc, 'problem', exc)}"
            ) from None
        except (ValueError, KeyError, TypeError) as exc:
            raise CassetteError(
                f"{path}: not a vcrpy cassette (expected a mapping with 'interactions', each with "
                f"a 'request' and a 'response'): {type(exc).__name__}: {exc}"
            ) from None
        requests, responses = loaded[0], loaded[1]
        metadata = loaded[2] if len(loaded) > 2 else {}
        interactions = [
            _interaction(path, number, request, response)
            for number, (request, response) in enumerate(zip(requests, responses, strict=True), 1)
        ]
        info = (metadata or {}).get("agentbench", {})
        if info.get("format", CASSETTE_FORMAT) > CASSETTE_FORMAT:
            raise CassetteError(
                f"{path}: cassette format {info['format']} is newer than this agentbench "
                f"understands ({CASSETTE_FORMAT}); upgrade agentbench"
            )
        return cls(interactions, dict(metadata or {}), path)

    def save(self, path: str | Path | None = None, *, redactor: Redactor | None = None) -> Path:
        """Write the cassette, secrets scrubbed; the format follows the suffix (.json or YAML)."""
        target = Path(path or self.path or "cassette.yaml")
        redactor = redactor or Redactor()
        requests, responses = [], []
        for interaction in self.interactions:
            body = orjson.dumps(redactor.value(interaction.request)).decode()
            requests.append(Request("POST", interaction.uri, body, {"content-type": _JSON}))
            responses.append(
                {
                    "status": {"code": interaction.status, "message": "OK"},
                    "headers": {"content-type": [interaction.content_type]},
                    "body": {"string": redactor.text(interaction.response_body)},
                }
            )
        # Fingerprints of the requests as sent (before redaction), so replay compares the
        # current code with exactly what was recorded, in O(1) a step.
        fingerprinter = Fingerprinter()
        info = {
            **self.info,
            "format": CASSETTE_FORMAT,
            "fingerprint_version": FINGERPRINT_VERSION,
            "fingerprints": [fingerprinter(i.request) for i in self.interactions],
        }
        metadata = redactor.value({**self.metadata, "agentbench": info})
        text = vcr_serialize.serialize(
            {"requests": requests, "responses": responses, "metadata": metadata},
            _serializer(target),
        )
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(target)  # never leave a half-written cassette behind
        self.path = target
        return target

    # -- agentbench's own metadata ------------------------------------------------------
    @property
    def info(self) -> dict[str, Any]:
        return dict(self.metadata.get("agentbench", {}))

    def update_info(self, **values: Any) -> None:
        self.metadata["agentbench"] = {**self.info, **values}

    def requests(self) -> Iterable[dict[str, Any]]:
        return (interaction.request for interaction in self.interactions)


def _serializer(path: Path) -> Any:
    return jsonserializer if path.suffix.lower() == ".json" else yamlserializer


def _interaction(
    path: Path, number: int, request: Request, response: dict[str, Any]
) -> Interaction:
    where = f"{path}: interaction {number}"
    try:
        request_body = orjson.loads(request.body or b"{}")
    except orjson.JSONDecodeError as exc:
        raise CassetteError(f"{where}: the request body is not JSON ({exc})") from None
    if not isinstance(request_body, dict) or "messages" not in request_body:
        raise CassetteError(f"{where}: the request body is not a chat-completions request")
    try:
        body = response["body"]["string"]
        status = int(response.get("status", {}).get("code", 200))
        headers = response.get("headers") or {}
    except (KeyError, TypeError, AttributeError) as exc:
        raise CassetteError(f"{where}: the response has no body string ({exc!r})") from None
    text = body.decode("utf-8") if isinstance(body, bytes) else str(body)
    content_type = next(
        (
            v[0] if isinstance(v, list) else v
            for k, v in headers.items()
            if k.lower() == "content-type"
        ),
        _JSON,
    )
    interaction = Interaction(request_body, text, content_type, status, request.uri)
    try:
        interaction.response()
    except (CompletionFormatError, orjson.JSONDecodeError) as exc:
        raise CassetteError(f"{where}: the response is not a chat completion ({exc})") from None
    return interaction
