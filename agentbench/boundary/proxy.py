"""`agentbench proxy`: a record/replay server any agent reaches by its base URL, in any language.

One `BoundaryServer` on 127.0.0.1 answers every model API it knows (`wire.WIRES`) from a
cassette, from an upstream endpoint, or both. Replay matches by content, not by arrival order,
so several agents and conversations may share one proxy at once: a request is answered by the
first recorded call not yet used whose normalized request is the same (its fingerprint, volatile
ids aside, as drift compares). A request with none is refused with HTTP 400 in the wire's
error shape, naming the nearest recorded call and the first field that differs. With
`live_from_divergence` that request goes to the upstream instead, and so does every later
request of its conversation — the requests whose messages begin with the diverged one's
(each request carries its conversation so far) — since a recorded answer would answer a
question the agent no longer asks; what was forwarded is appended to the cassette. Recording
forwards everything; a live stream is relayed event by event as it arrives and recorded once
it has ended. No request header is stored, and none the agent sends reaches the
upstream but the API version it asks for (`anthropic-version`, `anthropic-beta`): the upstream
gets the proxy's own key. The cassette's redactor masks secrets in every body it writes.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import Any
from urllib.parse import urlsplit

from agentbench.boundary.forward import WireCall, WireForwarder, current_call
from agentbench.boundary.server import Payload
from agentbench.boundary.wire import Wire, wire_for
from agentbench.errors import ModelError
from agentbench.replay.cassette import Cassette, Interaction
from agentbench.replay.drift import (
    FINGERPRINT_VERSION,
    Change,
    Fingerprinter,
    TraceSource,
    nearest,
)
from agentbench.runtime.completions import CompletionFormatError
from agentbench.runtime.retry import is_infrastructure_failure
from agentbench.trace import _json

Reply = tuple[int, str, Payload]  # a body, or a live stream's events as they arrive
# A fingerprinter keeps every part it digested (cached by object), and each request arrives as
# new objects: a proxy that runs for hours takes a fresh one every so many requests, so its
# memory stays bounded (a fresh one only digests the next request whole).
FRESH_FINGERPRINTER_EVERY = 1024
_JSON = "application/json"
_INVALID = "invalid_request_error"


@dataclass(frozen=True)
class Refusal:
    """A request the recording had no answer for: the proxy's call number and why."""

    call: int
    wire: str
    reason: str


class RecordedCalls:
    """A cassette's calls found by what they ask: each answers one request, in recorded order
    among equal ones."""

    def __init__(self, cassette: Cassette) -> None:
        self.cassette = cassette
        info = cassette.info
        # A recording converted from a trace compares only what the trace knew.
        self.source = TraceSource.of(info)
        self._fingerprint = Fingerprinter()
        self._printed = 0
        stored = info.get("fingerprints")
        interactions = cassette.interactions
        if (
            info.get("fingerprint_version") == FINGERPRINT_VERSION
            and isinstance(stored, list)
            and len(stored) == len(interactions)
            and self.source is None
        ):
            # Of the requests as sent, before redaction: a secret in a request still matches.
            prints = [str(p) for p in stored]
        else:
            recorded = Fingerprinter()
            prints = [recorded(self._comparable(i.request)) for i in interactions]
        self._unused: dict[str, deque[int]] = {}
        self._asked: dict[str, int] = {}  # how many recorded calls asked each
        for index, value in enumerate(prints):
            self._unused.setdefault(value, deque()).append(index)
            self._asked[value] = self._asked.get(value, 0) + 1
        self.used: set[int] = set()

    def _comparable(self, request: dict[str, Any]) -> dict[str, Any]:
        return request if self.source is None else self.source.known(request)

    def _print(self, request: dict[str, Any]) -> str:
        self._printed += 1
        if self._printed % FRESH_FINGERPRINTER_EVERY == 0:
            self._fingerprint = Fingerprinter()
        return self._fingerprint(self._comparable(request))

    def take(self, request: dict[str, Any]) -> int | None:
        """The position of the first unused recorded call asked `request`, now used; or None."""
        waiting = self._unused.get(self._print(request))
        if not waiting:
            return None
        index = waiting.popleft()
        self.used.add(index)
        return index

    def unused(self) -> list[int]:
        """Recorded calls (0-based) no request has used."""
        return [i for i in range(len(self.cassette.interactions)) if i not in self.used]

    def why_not(self, request: dict[str, Any]) -> str:
        """Why no recorded call answers `request`: the nearest one and how it differs."""
        asked = self._asked.get(self._print(request), 0)
        if asked:
            return (
                f"the recording asked this {asked} time(s) and each has been answered; "
                "the agent asks it once more"
            )
        requests = list(self.cassette.requests())
        if not requests:
            return "the recording has no calls"
        found = nearest(request, requests, limit=len(requests), source=self.source)
        if not found:
            return f"no recorded call matches (the recording has {len(requests)})"
        # Fewest changes first; among as few, the one whose changed values read most alike.
        number, changes = min(found, key=lambda f: (len(f[1]), -_alike(f[1])))
        first = changes[0].describe(70) if changes else "identical"
        return (
            f"no recorded call matches; nearest is #{number + 1} of {len(requests)} "
            f"({len(changes)} change(s), first {first})"
        )


class LiveConversations:
    """The conversations that went live at their first mismatch, by the messages of the
    request that diverged: a later request whose messages begin with them is the same
    conversation, carried on."""

    def __init__(self) -> None:
        self._prefixes: list[list[bytes]] = []

    @staticmethod
    def _messages(request: dict[str, Any]) -> list[bytes]:
        messages = request.get("messages")
        return [_json.canonical(m) for m in messages] if isinstance(messages, list) else []

    def holds(self, request: dict[str, Any]) -> bool:
        if not self._prefixes:
            return False
        messages = self._messages(request)
        return any(messages[: len(p)] == p for p in self._prefixes if len(p) <= len(messages))

    def add(self, request: dict[str, Any]) -> None:
        self._prefixes.append(self._messages(request))


@dataclass
class Tally:
    """What the proxy did, for its summary."""

    replayed: int = 0
    forwarded: int = 0  # failed ones included
    unreadable: int = 0  # requests not in their API's shape: answered 400, nothing else
    refused: list[Refusal] = field(default_factory=list)
    upstream_failures: list[str] = field(default_factory=list)  # the infrastructure's


class Proxy:
    """Answers model calls from `recording` (replay), `upstream` (record), or both (replay,
    live from divergence); `on_refusal` hears each refusal as it happens."""

    def __init__(
        self,
        *,
        recording: Cassette | None = None,
        upstream: WireForwarder | None = None,
        on_refusal: Callable[[Refusal], None] | None = None,
    ) -> None:
        if recording is None and upstream is None:
            raise ValueError("a proxy needs a recording to replay or an upstream to forward to")
        self.recorded = RecordedCalls(recording) if recording is not None else None
        # What is forwarded is appended to the recording replayed, or to a new one.
        self.cassette = recording if recording is not None else Cassette()
        self._kept = len(self.cassette.interactions)
        self.live = LiveConversations() if upstream is not None else None
        self._upstream = upstream
        self._on_refusal = on_refusal
        self.tally = Tally()
        self.calls = 0

    @property
    def new_calls(self) -> int:
        """Calls forwarded and appended to the cassette (failed ones included)."""
        return len(self.cassette.interactions) - self._kept

    async def answer(self, wire: Wire, body: dict[str, Any], headers: dict[str, str]) -> Reply:
        """The BoundaryServer's answer. Of `headers`, only an API version reaches the upstream
        (the forwarder's rule); none is ever stored."""
        self.calls += 1
        call = self.calls
        try:
            request = wire.normalize(body)
        except CompletionFormatError as exc:  # the client's own request: it hears why
            self.tally.unreadable += 1
            return 400, _JSON, wire.error(f"agentbench proxy: {exc}", _INVALID, None)
        recorded, live = self.recorded, self.live
        if recorded is not None and (live is None or not live.holds(request)):
            index = recorded.take(request)
            if index is not None:
                self.tally.replayed += 1
                return self._replayed(wire, body, request, index, call)
            if live is None:
                return self._refuse(wire, call, recorded.why_not(request))
            live.add(request)  # this conversation goes live from here on
        return await self._forwarded(wire, body, headers, request, call)

    def _replayed(
        self, wire: Wire, body: dict[str, Any], request: dict[str, Any], index: int, call: int
    ) -> Reply:
        interaction = self.cassette.interactions[index]
        if (
            interaction.failure is None
            and interaction.streamed == bool(body.get("stream"))
            and wire_for(urlsplit(interaction.uri).path) is wire
        ):
            # Recorded through this API and delivered as this client asks: the recorded bytes,
            # which is what rendering the parsed answer gives, without parsing it.
            return interaction.status, interaction.content_type, interaction.response_body.encode()
        try:
            response = interaction.response()
        except ModelError as exc:  # a recorded failure: the client gets it as it was sent
            return _failed(wire, exc)
        content_type, payload = wire.render(response, str(request.get("model") or ""), body, call)
        return 200, content_type, payload

    def _refuse(self, wire: Wire, call: int, reason: str) -> Reply:
        refusal = Refusal(call, wire.name, reason)
        self.tally.refused.append(refusal)
        if self._on_refusal is not None:
            self._on_refusal(refusal)
        # 400: a client does not retry it, and shows the message.
        return 400, _JSON, wire.error(f"agentbench proxy: {reason}", _INVALID, "replay")

    async def _forwarded(
        self,
        wire: Wire,
        body: dict[str, Any],
        headers: dict[str, str],
        request: dict[str, Any],
        call: int,
    ) -> Reply:
        upstream = self._upstream
        assert upstream is not None  # `answer` forwards only with an upstream
        # The headers only tell the forwarder the API version a client asked for (Anthropic's).
        token = current_call.set(WireCall(wire, body, headers))
        self.tally.forwarded += 1
        uri = upstream.call_uri
        try:
            answer, url = await upstream.open(request)
            kind = answer.headers.get("content-type", "")
            if answer.status_code < 400 and kind.startswith("text/event-stream"):
                # Relayed as it arrives (the agent sees tokens as they come), kept once whole.
                return answer.status_code, kind, self._relay(wire, request, answer, url, uri)
            response = await upstream.read(answer, url, wire, request)
        except ModelError as exc:
            self._keep_failure(request, exc, uri)
            return _failed(wire, exc)
        finally:
            current_call.reset(token)
        self.cassette.interactions.append(Interaction.of(request, response, uri))
        content_type, payload = wire.render(response, str(request.get("model") or ""), body, call)
        return 200, content_type, payload

    async def _relay(
        self, wire: Wire, request: dict[str, Any], answer: Any, url: str, uri: str
    ) -> AsyncIterator[bytes]:
        """A live stream's events as they arrive; once it has ended, the call is recorded
        (a stream that broke off is recorded as the failure it is, and cut for the client)."""
        received = bytearray()
        pending = b""
        try:
            async for piece in answer.aiter_bytes():
                received += piece
                *events, pending = (pending + piece).split(b"\n\n")
                for event in events:
                    yield event + b"\n\n"
            if pending:
                yield pending
        except Exception as exc:  # the connection to the upstream broke
            failure = ModelError(f"{url}: the stream broke off: {type(exc).__name__}: {exc}")
            self._keep_failure(request, failure, uri)
            raise failure from exc
        finally:
            await answer.aclose()
        kind = answer.headers.get("content-type", "")
        try:
            response = self._upstream.parsed(  # type: ignore[union-attr]
                wire, url, answer.status_code, kind, bytes(received), request
            )
        except ModelError as exc:
            self._keep_failure(request, exc, uri)
            return
        self.cassette.interactions.append(Interaction.of(request, response, uri))

    def _keep_failure(self, request: dict[str, Any], error: ModelError, uri: str) -> None:
        """A forwarded call that failed is recorded too (it replays as the same error)."""
        if is_infrastructure_failure(error.status_code):
            self.tally.upstream_failures.append(str(error))
        self.cassette.interactions.append(Interaction.failed(request, error, uri))

    def summary(self) -> list[str]:
        """The proxy's account of itself, one line each: calls answered, refused (and why),
        recorded calls never asked, upstream failures."""
        tally = self.tally
        lines = [
            f"agentbench proxy: {self.calls} call(s): {tally.replayed} replayed, "
            f"{tally.forwarded} forwarded, {len(tally.refused)} refused"
        ]
        if tally.unreadable:
            lines.append(f"  {tally.unreadable} request(s) not in their API's shape (HTTP 400)")
        lines += [f"  refused call {r.call} ({r.wire}): {r.reason}" for r in tally.refused]
        if self.recorded is not None:
            unused = self.recorded.unused()
            if unused:
                shown = ", ".join(f"#{i + 1}" for i in unused[:10])
                more = f" and {len(unused) - 10} more" if len(unused) > 10 else ""
                lines.append(f"  recorded calls never asked: {shown}{more}")
        lines += [f"  upstream failed: {f}" for f in tally.upstream_failures]
        return lines

    async def aclose(self) -> None:
        if self._upstream is not None:
            await self._upstream.aclose()


def _alike(changes: list[Change]) -> float:
    """How alike the recorded and the current values of `changes` read, 0 to 1."""
    if not changes:
        return 1.0
    ratios = (
        SequenceMatcher(None, _json.canonical(c.old)[:2000], _json.canonical(c.new)[:2000]).ratio()
        for c in changes
    )
    return sum(ratios) / len(changes)


def _failed(wire: Wire, error: ModelError) -> Reply:
    """A failed call as the client gets it: the endpoint's own status and body when there was
    one (recorded or live), else a 502 saying what happened, in the wire's error shape."""
    status = error.status_code or 502
    if error.body:
        return status, _JSON, error.body.encode()
    return status, _JSON, wire.error(str(error), "api_error", None)
