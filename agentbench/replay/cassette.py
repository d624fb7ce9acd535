"""Cassettes: recorded model calls in vcrpy's file format.

Each interaction is one model call: the OpenAI chat-completions request body the runtime built
(for a call in the Responses API, its request in that shape) and the response body the provider
returned (a `chat.completion` or Responses API `response` JSON, or the server-sent-events text of
a stream, so a streamed call replays as a stream) — or, for a call that failed, the
error response the server sent (its status and body) and how agentbench reported the failure,
so replay raises the same error again. Files are read and written with
vcrpy's own serializers (YAML by default, JSON optional), so they look like the cassettes
pytest-recording users know; agentbench's extra knowledge of the session — the input, the
original trajectory, the tool results — lives under `metadata.agentbench`. Secrets are
scrubbed with the trace redaction rules before anything is written. A file is read within the
bounds suite files are (size, nesting, YAML aliases: `agentbench.yaml_source`), and one of
a vcrpy or agentbench format version this code does not know is refused, not half-read.
"""

from __future__ import annotations

import contextlib
import enum
import http
import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import yaml
from vcr import serialize as vcr_serialize
from vcr.request import Request
from vcr.serializers import jsonserializer, yamlserializer

from agentbench.boundary import messages_api, responses_api
from agentbench.errors import AgentbenchError, ModelError, ModelTimeoutError, UsageError
from agentbench.replay import cassette_cache
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
from agentbench.runtime.message_view import materialized
from agentbench.runtime.models import ChatResponse, TextDeltaHandler
from agentbench.trace import _json
from agentbench.trace.redaction.redactor import Redactor
from agentbench.trace.redaction.stream import redact_chunks
from agentbench.yaml_fast import NotPlainError, fast_path_for, load_plain
from agentbench.yaml_source import (
    MAX_DEPTH,
    Position,
    SourceError,
    check_json_depth,
    check_yaml_bounds,
    read_source,
)

CASSETTE_FORMAT = 2  # 2: a request may keep its messages as a tail after another's (below)
# A request whose first messages are another request's keeps only the rest, and says whose:
# `"agentbench_prefix": [N, K]` — the first K messages of interaction N (1-based, earlier),
# as that one has them when read. Each request repeats the whole conversation before it, so
# a cassette kept them all grew with the square of the session's length (123 MB at 1,000
# steps); this way each message is written once. The body stays JSON in vcrpy's format.
PREFIX_KEY = "agentbench_prefix"
_PREFIX_CANDIDATES = 8  # the earlier requests looked at for the longest shared beginning
_MIN_PREFIX = 2  # fewer shared messages than this are written out
# vcrpy's own file format (`version:` at the top, vcr/serialize.py): 1 since vcrpy 1.0. A file
# of another version may keep its calls elsewhere; read as version 1 it would replay nothing.
VCR_FORMAT_VERSIONS = (1,)
DEFAULT_URI = "https://api.openai.com/v1/chat/completions"
RESPONSES_URI = "https://api.openai.com/v1/responses"
MESSAGES_URI = "https://api.anthropic.com/v1/messages"
# An Anthropic Messages stream: its events are named, and the first is always this one.
_MESSAGES_STREAM = "event: message_start"
_JSON = "application/json"
_SSE = "text/event-stream"
_TEXT = "text/plain"
# The status a failed call is written with when no HTTP response came back at all (connection
# refused, a timeout, a stream cut short): 0, as browsers report a network error; the failure
# record says so too (`http_response: false`).
NO_RESPONSE = 0
# The errors a recorded failure replays as, by the class name the cassette keeps. A closed
# set: a cassette names a class, it never makes agentbench import one.
_FAILURES: dict[str, type[ModelError]] = {e.__name__: e for e in (ModelError, ModelTimeoutError)}


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


@dataclass(frozen=True)
class Failure:
    """How a model call failed, kept so replay raises the same error: the error's class name,
    its exact message, the attempts it took, and whether an HTTP response came back (when it
    did, its status and body are the interaction's own `status` and `response_body`)."""

    type: str
    message: str
    attempts: int = 1
    http_response: bool = True

    def as_dict(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "message": self.message,
            "attempts": self.attempts,
            "http_response": self.http_response,
        }

    @classmethod
    def from_dict(cls, data: Any, where: str) -> Failure:
        """The failure record of a cassette's response; CassetteError names what is wrong."""
        field_name = f"{where}: response.agentbench.error"
        if not isinstance(data, dict):
            raise CassetteError(f"{field_name}: expected a mapping (type, message, attempts)")
        kind, message = data.get("type"), data.get("message")
        attempts, http_response = data.get("attempts", 1), data.get("http_response", True)
        if kind not in _FAILURES:
            known = ", ".join(_FAILURES)
            raise CassetteError(
                f"{field_name}.type: {kind!r} is not an error agentbench replays (known: {known})"
            )
        if not isinstance(message, str):
            raise CassetteError(f"{field_name}.message: expected the error's message as text")
        if type(attempts) is not int or attempts < 1:
            raise CassetteError(f"{field_name}.attempts: expected a whole number from 1")
        if not isinstance(http_response, bool):
            raise CassetteError(f"{field_name}.http_response: expected true or false")
        return cls(kind, message, attempts, http_response)


@dataclass
class Interaction:
    """One model call: the request body sent and the response body received (for a call
    that failed, the error response, if any, and the `failure`)."""

    request: dict[str, Any]
    response_body: str
    content_type: str = _JSON
    status: int = 200
    uri: str = DEFAULT_URI
    failure: Failure | None = None
    # The response parsed when the cassette was loaded (to check it), handed to the first
    # replay that needs no text deltas instead of being parsed a second time.
    _checked: ChatResponse | None = field(default=None, repr=False, compare=False)

    @property
    def streamed(self) -> bool:
        return self.content_type.startswith(_SSE)

    @classmethod
    def of(
        cls, request: dict[str, Any], response: ChatResponse, uri: str | None = None
    ) -> Interaction:
        """An interaction from a live call; a model without a wire body gets one built.
        `uri` names the API called; by default OpenAI's, for the kind of body the call got."""
        request = materialized(request)  # a cassette body holds a list, not the run's view
        raw = response.raw
        kind = raw.get("object") if raw is not None else None
        if kind == STREAM_OBJECT:
            return cls(request, sse_text(raw["chunks"]), _SSE, uri=uri or DEFAULT_URI)
        if kind == responses_api.RESPONSES_STREAM_OBJECT:
            text = responses_api.sse_text(raw["events"])
            return cls(request, text, _SSE, uri=uri or RESPONSES_URI)
        if kind == messages_api.MESSAGES_STREAM_OBJECT:
            text = messages_api.sse_text(raw["events"])
            return cls(request, text, _SSE, uri=uri or MESSAGES_URI)
        body = raw if raw is not None else completion_body(response, str(request.get("model", "")))
        default = RESPONSES_URI if kind == "response" else DEFAULT_URI
        if raw is not None and raw.get("type") == "message":
            default = MESSAGES_URI
        return cls(request, wire_json(body), _JSON, uri=uri or default)

    @classmethod
    def failed(
        cls, request: dict[str, Any], error: ModelError, uri: str = DEFAULT_URI
    ) -> Interaction:
        """An interaction from a live call that failed: the server's status and body where
        there was an HTTP response, and how the failure was reported."""
        request = materialized(request)
        kind = type(error).__name__
        if kind not in _FAILURES:  # a subclass of ours replays as the class it derives from
            kind = "ModelTimeoutError" if isinstance(error, ModelTimeoutError) else "ModelError"
        answered = error.status_code is not None
        body = error.body or ""
        failure = Failure(kind, str(error), error.attempts, answered)
        status = error.status_code if error.status_code is not None else NO_RESPONSE
        return cls(request, body, _body_type(body), status, uri, failure)

    @classmethod
    def stored_failure(
        cls, request: dict[str, Any], error_type: str, message: str, attempts: int = 1
    ) -> Interaction | None:
        """The failed call of a stored run that ended in a model error (the store keeps the
        error's type and message, not the server's status or body); None for an error that is
        not a model call's."""
        if error_type not in _FAILURES:
            return None
        failure = Failure(error_type, message, max(1, attempts), http_response=False)
        return cls(materialized(request), "", _JSON, NO_RESPONSE, DEFAULT_URI, failure)

    def error(self) -> ModelError:
        """The recorded failure as the error to raise again (the body empty: None)."""
        if self.failure is None:
            raise ValueError("this interaction did not fail")
        return _FAILURES[self.failure.type](
            self.failure.message,
            status_code=self.status if self.failure.http_response else None,
            attempts=self.failure.attempts,
            body=self.response_body or None,
        )

    def response(self, on_text_delta: TextDeltaHandler | None = None) -> ChatResponse:
        """The recorded response, parsed exactly as a live one is (streams replay as streams);
        a recorded failure raises its error again, as the live call did."""
        if self.failure is not None:
            raise self.error()
        checked, self._checked = self._checked, None
        if checked is not None and on_text_delta is None:
            return checked
        # With the request, a body without usage gets the estimate the live call made.
        if self.streamed:
            if self.response_body.startswith(_MESSAGES_STREAM):
                events = responses_api.parse_sse(self.response_body)
                return messages_api.parse_stream(events, self.request)
            if _responses_stream(self.response_body):
                events = responses_api.parse_sse(self.response_body)
                return responses_api.parse_stream(events, on_text_delta, self.request)
            return parse_stream(parse_sse(self.response_body), on_text_delta, self.request)
        body = read_wire_json(self.response_body)
        if type(body) is dict and body.get("object") == "response":
            return responses_api.parse_response(body, self.request)
        if type(body) is dict and body.get("type") == "message":
            return messages_api.parse_message(body, self.request)
        return parse_completion(body, self.request)


def _responses_stream(text: str) -> bool:
    """Whether an event stream is the Responses API's: its events are named (`event:
    response.created`), a chat stream's never are."""
    return text.startswith("event:")


@dataclass
class Cassette:
    """The interactions of one recorded session, and what agentbench knows about it."""

    interactions: list[Interaction] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None

    # -- files ---------------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | Path) -> Cassette:
        """The cassette at `path`; CassetteError names the file (and line) of what is wrong."""
        path = Path(path)
        if not os.path.lexists(path):  # a link that loops or leads nowhere is read, and says so
            raise CassetteError(f"{path}: no such cassette file")
        try:
            loaded = vcr_serialize.deserialize("", _Parsed(_parse(path)))
        except (ValueError, KeyError, TypeError) as exc:
            raise CassetteError(
                f"{path}: not a vcrpy cassette (a request needs 'method', 'uri', 'body' and "
                f"'headers'): {type(exc).__name__}: {exc}"
            ) from None
        requests, responses = loaded[0], loaded[1]
        metadata = _metadata(path, loaded[2] if len(loaded) > 2 else {})
        interactions = [
            _interaction(path, number, request, response)
            for number, (request, response) in enumerate(zip(requests, responses, strict=True), 1)
        ]
        _expand(path, interactions)
        return cls(interactions, metadata, path)

    def save(self, path: str | Path | None = None, *, redactor: Redactor | None = None) -> Path:
        """Write the cassette, secrets scrubbed; the format follows the suffix (.json or YAML)."""
        target = Path(path or self.path or "cassette.yaml")
        redactor = redactor or Redactor()
        # Fingerprints of the requests as sent (before redaction), so replay compares the
        # current code with exactly what was recorded, in O(1) a step. (A hash, not the
        # bytes; where it differs, replay diffs against the redacted request, masks matching.)
        fingerprinter = Fingerprinter()
        info = {
            **self.info,
            "format": CASSETTE_FORMAT,
            "fingerprint_version": FINGERPRINT_VERSION,
            "fingerprints": [fingerprinter(i.request) for i in self.interactions],
        }
        known = len(redactor.learned)
        requests, responses, metadata = self._scrubbed(info, redactor)
        if len(redactor.learned) > known:
            # A secret learned part way (a tool call's `password` argument) is masked in the
            # calls before it too: the user's message that held it came first.
            requests, responses, metadata = self._scrubbed(info, redactor)
        text = vcr_serialize.serialize(
            {"requests": requests, "responses": responses, "metadata": metadata},
            _serializer(target),
        )
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp")
        try:
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(target)  # never leave a half-written cassette behind
        except OSError as exc:  # a full disk, say: named by the cassette, not the temp file
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            raise OSError(exc.errno, exc.strerror, str(target)) from None
        self.path = target
        return target

    def _scrubbed(
        self, info: dict[str, Any], redactor: Redactor
    ) -> tuple[list[Request], list[dict[str, Any]], dict[str, Any]]:
        """The requests, responses and metadata as written: every value redacted."""
        requests, responses = [], []
        written: list[list[Any]] = []  # each request's messages, as the session has them
        for interaction in self.interactions:
            request = interaction.request
            messages = request.get("messages")
            written.append(messages if isinstance(messages, list) else [])
            body = wire_json(_tail_of(request, written, redactor))
            requests.append(Request("POST", interaction.uri, body, {"content-type": _JSON}))
            responses.append(_response_dict(interaction, redactor))
        metadata = redactor.value({**self.metadata, "agentbench": _keyed_steps(info, redactor)})
        # YAML holds no lone surrogate (half an emoji): what the run said is stored as the
        # trace store stores it, U+FFFD in its place (bodies keep their JSON escapes).
        metadata = _json.storable(metadata)
        return requests, responses, metadata

    # -- agentbench's own metadata ------------------------------------------------------
    @property
    def info(self) -> dict[str, Any]:
        return dict(self.metadata.get("agentbench", {}))

    def update_info(self, **values: Any) -> None:
        self.metadata["agentbench"] = {**self.info, **values}

    def requests(self) -> Iterable[dict[str, Any]]:
        return (interaction.request for interaction in self.interactions)


def _tail_of(request: dict[str, Any], written: list[list[Any]], redactor: Redactor) -> Any:
    """The request as written (redacted): its messages after the longest beginning it shares
    with one of the few requests before it, or whole when it shares little."""
    messages = written[-1]
    number, shared = _longest_prefix(messages, written)
    if shared < _MIN_PREFIX:
        return redactor.value(request)
    # Redacted as one request, as a whole one is (a value is masked by its key's name too).
    scrubbed = redactor.value({**request, "messages": messages[shared:]})
    body: dict[str, Any] = {}
    for key, value in scrubbed.items():
        body[key] = value
        if key == "messages":
            body[PREFIX_KEY] = [number, shared]
    return body


def _longest_prefix(messages: list[Any], written: list[list[Any]]) -> tuple[int, int]:
    """(interaction number, shared count) of the earlier request whose messages begin this
    one's the longest way (the latest on a tie); (0, 0) when none does."""
    best = (0, 0)
    last = len(written) - 1
    for index in range(last - 1, max(-1, last - 1 - _PREFIX_CANDIDATES), -1):
        earlier = written[index]
        limit = min(len(earlier), len(messages))
        shared = 0
        while shared < limit and (
            earlier[shared] is messages[shared] or earlier[shared] == messages[shared]
        ):
            shared += 1
        if shared > best[1]:
            best = (index + 1, shared)
        if shared == limit == len(earlier):
            break  # the whole earlier conversation: nothing before it shares more
    return best


def _expand(path: Path, interactions: list[Interaction]) -> None:
    """Give each request kept as a tail the messages it shares with an earlier one (the
    same message objects: a long session's requests take no memory per repeated message)."""
    for number, interaction in enumerate(interactions, 1):
        request = interaction.request
        prefix = request.get(PREFIX_KEY)
        if prefix is None:
            continue
        if (
            not isinstance(prefix, list)
            or len(prefix) != 2
            or not all(type(n) is int for n in prefix)
            or not 1 <= prefix[0] < number
        ):
            raise CassetteError(
                f"{path}: interaction {number}: {PREFIX_KEY} must be [an earlier "
                f"interaction's number, how many of its messages]; got {prefix!r}"
            )
        earlier = interactions[prefix[0] - 1].request["messages"]
        if not 0 <= prefix[1] <= len(earlier):
            raise CassetteError(
                f"{path}: interaction {number}: {PREFIX_KEY} asks for {prefix[1]} messages of "
                f"interaction {prefix[0]}, which has {len(earlier)}"
            )
        interaction.request = {
            key: ([*earlier[: prefix[1]], *value] if key == "messages" else value)
            for key, value in request.items()
            if key != PREFIX_KEY
        }


def _response_dict(interaction: Interaction, redactor: Redactor) -> dict[str, Any]:
    """vcrpy's response mapping: the real status and body, so a plain vcrpy user sees the
    real HTTP 500. How agentbench reported a failure lives beside them, in the response's
    own `agentbench` key rather than in `metadata.agentbench`: it then travels with its
    interaction when cassettes are cut and joined (a fork keeps the calls before it,
    new_episodes appends), needing no index that could go stale, and vcrpy ignores a key
    of a response it does not know. The message is scrubbed like the body."""
    status = interaction.status
    if interaction.failure is None:
        reason = "OK"
    elif not interaction.failure.http_response:
        reason = "no response"
    else:
        reason = _reason(status)
    response: dict[str, Any] = {
        "status": {"code": status, "message": reason},
        "headers": {"content-type": [interaction.content_type]},
        "body": {"string": _scrubbed_body(interaction, redactor)},
    }
    if interaction.failure is not None:
        failure = interaction.failure.as_dict()
        failure["message"] = redactor.text(failure["message"])
        response["agentbench"] = {"error": failure}
    return response


def _reason(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return "error"


def wire_json(value: Any) -> str:
    """A body as JSON text, as the wire had it: a lone surrogate (half an emoji a model or a
    tool cut in two), which orjson refuses, is written as its JSON escape (`\\ud83d`), so a
    replay serves what the live call saw; the trace store repairs it where it stores text."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value)


def read_wire_json(text: str | bytes) -> Any:
    """`wire_json`'s reverse: orjson's parse, or Python's for a lone surrogate's escape."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def _body_type(body: str) -> str:
    """The content type of a failed call's body: JSON when it reads as JSON, else text."""
    if body.lstrip()[:1] not in ("{", "["):
        return _TEXT
    try:
        orjson.loads(body)
    except orjson.JSONDecodeError:
        return _TEXT
    return _JSON


def _scrubbed_body(interaction: Interaction, redactor: Redactor) -> str:
    """The response body as written: a stream's fragments are redacted joined (a secret split
    over chunks matches no rule chunk by chunk), and the stream re-encoded only if that
    masked something; a JSON body keeps its bytes except the values masked."""
    body = interaction.response_body
    if interaction.streamed:
        responses = _responses_stream(body)
        parse = responses_api.parse_sse if responses else parse_sse
        try:
            chunks = parse(body)
        except CompletionFormatError:
            return redactor.text(body)
        masked = redact_chunks(chunks, redactor)
        if masked != chunks:
            body = responses_api.sse_text(masked) if responses else sse_text(masked)
    return redactor.text(body)


def _keyed_steps(info: dict[str, Any], redactor: Redactor) -> dict[str, Any]:
    """A context step of the trajectory names its key in its signature, not beside its value
    (which key rules look for): mask the value when the key is secret."""
    steps = info.get("trajectory")
    if not isinstance(steps, list):
        return info
    masked = []
    for step in steps:
        signature = step.get("signature") if isinstance(step, dict) else None
        detail = step.get("detail") if isinstance(step, dict) else None
        if isinstance(signature, list) and signature[:1] == ["context"] and len(signature) > 3:
            key = str(signature[3])
            if isinstance(detail, dict):
                step = {**step, "detail": {k: redactor.keyed(key, v) for k, v in detail.items()}}
        masked.append(step)
    return {**info, "trajectory": masked}


def _serializer(path: Path) -> Any:
    return jsonserializer if path.suffix.lower() == ".json" else yamlserializer


class _Parsed:
    """A serializer that hands vcrpy data already parsed (and checked) here."""

    def __init__(self, data: Any) -> None:
        self.data = data

    def deserialize(self, text: str) -> Any:
        return self.data


def _parse(path: Path) -> dict[str, Any]:
    """The file's data, read within bounds, in vcrpy's format at a version vcrpy writes."""
    serializer = _serializer(path)
    try:
        text = read_source(path)
        if not text.strip():
            raise CassetteError(f"{path}: the file is empty; expected a vcrpy cassette")
        if serializer is jsonserializer:
            check_json_depth(text)
            data = serializer.deserialize(text)
        else:
            data = cassette_cache.parsed(text, lambda text: _yaml_data(text, serializer))
    except SourceError as exc:
        raise CassetteError(f"{_at(path, exc.position)}: {exc.message}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = _at(path, Position(mark.line + 1, mark.column + 1) if mark else None)
        problem = getattr(exc, "problem", None) or exc
        raise CassetteError(f"{where}: the file is not valid YAML: {problem}") from None
    except json.JSONDecodeError as exc:
        where = _at(path, Position(exc.lineno, exc.colno))
        raise CassetteError(f"{where}: the file is not valid JSON: {exc.msg}") from None
    except ValueError as exc:  # a number Python will not convert (over 4,300 digits)
        raise CassetteError(f"{path}: the file cannot be read: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("interactions"), list):
        raise CassetteError(
            f"{path}: not a vcrpy cassette (expected a mapping with 'version: "
            f"{VCR_FORMAT_VERSIONS[-1]}' and a list of 'interactions', each with a 'request' "
            "and a 'response')"
        )
    version = data.get("version", VCR_FORMAT_VERSIONS[-1])  # vcrpy itself reads it without
    if type(version) is not int or version not in VCR_FORMAT_VERSIONS:
        known = ", ".join(str(v) for v in VCR_FORMAT_VERSIONS)
        raise CassetteError(
            f"{_at(path, _version_line(text, serializer))}: cassette format version "
            f"{version!r} is not one this agentbench reads (known: {known}, vcrpy's format); "
            "re-record the cassette"
        )
    for number, entry in enumerate(data["interactions"], 1):
        if not isinstance(entry, dict) or not {"request", "response"} <= entry.keys():
            raise CassetteError(
                f"{path}: interaction {number}: expected a mapping with a 'request' and a "
                "'response'"
            )
        if not isinstance(entry["request"], dict) or not isinstance(entry["response"], dict):
            raise CassetteError(
                f"{path}: interaction {number}: the request and the response must be mappings"
            )
    return data


def _yaml_data(text: str, serializer: Any) -> Any:
    """What `serializer` reads from `text`, within bounds: a plain document (all vcrpy and
    agentbench write) is built in one walk of libyaml's events; anything else, valid or not,
    takes the full path, which reports what is wrong as it always has."""
    loader = getattr(serializer, "_CassetteLoader", None)
    if fast_path_for(loader):
        try:
            return load_plain(text, loader, MAX_DEPTH)
        except NotPlainError:
            pass
    check_yaml_bounds(text)
    return serializer.deserialize(text)


def _metadata(path: Path, metadata: Any) -> dict[str, Any]:
    """The cassette's metadata, refused when agentbench's part is of a format it does not know."""
    if not isinstance(metadata, dict):
        raise CassetteError(f"{path}: metadata: expected a mapping")
    if not isinstance(metadata.get("agentbench", {}), dict):
        raise CassetteError(f"{path}: metadata.agentbench: expected a mapping")
    found = metadata.get("agentbench", {}).get("format", CASSETTE_FORMAT)
    if type(found) is int and found > CASSETTE_FORMAT:
        raise CassetteError(
            f"{path}: cassette format {found} is newer than this agentbench "
            f"understands ({CASSETTE_FORMAT}); upgrade agentbench"
        )
    if type(found) is not int or found < 1:
        raise CassetteError(
            f"{path}: metadata.agentbench.format {found!r} is not a cassette format "
            f"(known: 1 to {CASSETTE_FORMAT})"
        )
    return dict(metadata)


def _at(path: Path, position: Position | None) -> str:
    if position is None:
        return str(path)
    column = f":{position.column}" if position.column is not None else ""
    return f"{path}:{position.line}{column}"


def _version_line(text: str, serializer: Any) -> Position | None:
    """The line of the top-level `version`: vcrpy's YAML writes it unindented, JSON first."""
    pattern = r'"version"\s*:' if serializer is jsonserializer else r"^version\s*:"
    found = re.search(pattern, text, re.MULTILINE)
    return Position(text.count("\n", 0, found.start()) + 1) if found else None


def _interaction(
    path: Path, number: int, request: Request, response: dict[str, Any]
) -> Interaction:
    where = f"{path}: interaction {number}"
    try:
        request_body = read_wire_json(request.body or b"{}")
    except ValueError as exc:
        raise CassetteError(f"{where}: the request body is not JSON ({exc})") from None
    if not isinstance(request_body, dict) or "messages" not in request_body:
        raise CassetteError(f"{where}: the request body is not a chat-completions request")
    try:
        body = response["body"]["string"]
        status = int(response.get("status", {}).get("code", 200))
        headers = response.get("headers") or {}
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise CassetteError(
            f"{where}: the response needs a body string and a numeric status code ({exc!r})"
        ) from None
    text = body.decode("utf-8") if isinstance(body, bytes) else str(body)
    content_type = next(
        (
            v[0] if isinstance(v, list) else v
            for k, v in headers.items()
            if k.lower() == "content-type"
        ),
        _JSON,
    )
    extra = response.get("agentbench")
    if extra is not None and (not isinstance(extra, dict) or "error" not in extra):
        raise CassetteError(f"{where}: response.agentbench: expected a mapping with an 'error'")
    failure = Failure.from_dict(extra["error"], where) if extra is not None else None
    interaction = Interaction(request_body, text, content_type, status, request.uri, failure)
    if failure is not None:
        return interaction  # a failed call's body is the server's error, not a completion
    try:
        interaction._checked = interaction.response()
    except (CompletionFormatError, ValueError) as exc:
        problem = f"the response is not a chat completion ({exc})"
        if status >= 400:
            problem = (
                f"the response is HTTP {status}, not a chat completion, and has no "
                "response.agentbench.error saying how the call failed; re-record it with agentbench"
            )
        raise CassetteError(f"{where}: {problem}") from None
    except ModelError as exc:  # a Responses API body whose status says the call failed
        raise CassetteError(
            f"{where}: {exc}, and the response has no response.agentbench.error saying how "
            "to replay the failure; re-record it with agentbench"
        ) from None
    return interaction
