"""`ReplayModel` serves a cassette in order; `RecordingModel` writes one while calling a model.

Matching is sequential: the n-th model call of a session gets the n-th recorded interaction, a
dict lookup and a parse, with no SDK, no HTTP and no global patching, so any number of
cassettes replay concurrently in one process. Each request is compared with the recorded one
(a fingerprint first, the JSON-aware diff only when they differ); lenient replay serves the
recorded answer and keeps the drift, strict replay stops. Beyond the end of the recording a
live model can take over (record modes `new_episodes` and `all`, or a fork with `live_from`);
with `live_from_drift` it takes over at the first call the recording no longer answers — a
drifted request, or one beyond its end — since every recorded answer from there on would answer
a question the code no longer asks. A call that failed live (a `ModelError`: an HTTP 500
after retries, a timeout) is recorded too, and replays as the same error. One that failed for
the infrastructure's sake (no connection, a timeout, 401/403/404, 408/409/429, a 5xx after
retries, as opposed to a request the provider refused as malformed) is also kept in `failure`:
it says nothing about the code, so the eval harness then writes no cassette at all and reports
the case as an infrastructure error (`case_trial`). A call the recording has no answer for is
kept in
`ReplayModel.unanswered`: the run then ends in an error the recording never had, which is a
divergence however alike the two runs end (`unanswered_divergences`).

A live run that ran out of its time budget stopped after some number of answered calls;
replayed, its calls take microseconds and it would ask the recording for one more. So a
recording keeps where each such stop happened (`budget_stops`: after how many answered calls,
and, when it cut tool calls short, after how many finished tool calls), and replay ends the run
there with the same timeout (`RecordedTimeout`) instead of asking for an answer that was never
given, or running a tool call the live run never completed.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable, Iterable
from typing import Any

from agentbench.errors import AgentbenchError, ModelError
from agentbench.replay.cassette import DEFAULT_URI, Cassette, Interaction, RecordMode
from agentbench.replay.diff import Divergence
from agentbench.replay.drift import (
    FINGERPRINT_VERSION,
    Change,
    Fingerprinter,
    TraceSource,
    nearest,
    request_diff,
)
from agentbench.replay.drifted_calls import Drift
from agentbench.replay.masked import has_mask, revealed
from agentbench.replay.trajectory import trajectory
from agentbench.runtime.models import ChatModel, ChatResponse, TextDeltaHandler
from agentbench.runtime.records import assign
from agentbench.runtime.retry import is_infrastructure_failure

# Whether a cassette's requests hold a mask, by the cassette (looked at once, however many
# trials replay it): only then does a replay look for what the masks stand for.
_MASKED: dict[int, tuple[weakref.ref[Cassette], bool]] = {}
_MASKED_ENTRIES = 256


def _masked(cassette: Cassette) -> bool:
    known = _MASKED.get(id(cassette))
    if known is not None and known[0]() is cassette:
        return known[1]
    found = any(has_mask(interaction.request) for interaction in cassette.interactions)
    if len(_MASKED) >= _MASKED_ENTRIES:
        _MASKED.clear()
    _MASKED[id(cassette)] = (weakref.ref(cassette), found)
    return found


# The stop reasons a live run reaches by the wall clock: replay takes no time, so it stops where
# the recording did (every other stop reason follows from the answers and the code).
CLOCK_STOPS = ("timeout",)


class ReplayMissingError(AgentbenchError):
    """The code under test made a model call the cassette has no answer for."""


class RecordedTimeout(TimeoutError):  # noqa: N818 - a TimeoutError, as the live run's was
    """The recorded run ran out of its time budget at this point: the replayed run stops here
    too. A TimeoutError, so the run's deadline handling ends the run with stop reason
    `timeout` and its usual message, as it ended live."""


class RequestDriftError(AgentbenchError):
    """Strict replay: the request differs from the recorded one."""

    def __init__(self, message: str, changes: list[Change]) -> None:
        super().__init__(message)
        self.changes = changes


def _endpoint(model: ChatModel) -> str:
    uri = getattr(model, "call_uri", None)  # a model that knows the API path it was called at
    if uri:
        return str(uri)
    base = getattr(model, "endpoint", None)
    return (
        f"{str(base).rstrip('/')}/chat/completions"
        if base
        else f"agentbench://{model.name}/chat/completions"
    )


def unanswered_divergences(calls: list[int], events: list[Any]) -> list[Divergence]:
    """Each model call (1-based, of the session) the recording had no answer for, as an
    `extra_step` where its request was sent: the current code asks more than was recorded,
    so the replay ended in an error of its own, never "unchanged" — even when the recorded
    run ended in an error too (a failure recorded before failures were)."""
    requests: list[Any] = []
    positions: list[int] = []
    steps = 0
    for event in events:  # where each request was sent: the step that came next
        if event.kind == "model_request":
            requests.append(event)
            positions.append(steps)
        steps += len(trajectory([event]))
    found = []
    for call in calls:
        event = requests[call - 1] if call <= len(requests) else None
        agent = event.agent if event is not None else "?"
        purpose = getattr(event, "purpose", None)
        found.append(
            Divergence(
                "extra_step",
                positions[call - 1] if call <= len(positions) else steps,
                agent,
                event.step if event is not None else 0,
                f"the recording has no answer for model call #{call}",
                new={"signature": ["model_call", agent, purpose], "call": call},
            )
        )
    return found


def budget_stop(
    answered: int, event: Any, tools: tuple[int, int] = (0, 0)
) -> dict[str, Any] | None:
    """What a recording keeps of a run that stopped by the clock (`event`, its RunFinished),
    after `answered` model calls of the session and with `tools` (tool calls started,
    finished) so far; None for any other stop. A stop that cut tool calls short keeps how many
    had finished (`after_tools`): replayed, the calls it cut are not run either."""
    if str(event.stop_reason) not in CLOCK_STOPS:
        return None
    stop = {"after_calls": answered, "stop_reason": str(event.stop_reason), "agent": event.agent}
    started, finished = tools
    if started > finished:
        stop["after_tools"] = finished
    return stop


def tool_stops(info: dict[str, Any]) -> list[int]:
    """The recorded clock stops that cut tool calls short: after how many finished calls."""
    return sorted(
        stop["after_tools"]
        for stop in info.get("budget_stops") or ()
        if isinstance(stop, dict) and isinstance(stop.get("after_tools"), int)
    )


class RecordingModel:
    """Wraps any ChatModel and appends every call to a cassette, failed calls included; the
    first infrastructure failure is also kept in `failure`."""

    def __init__(self, inner: ChatModel, cassette: Cassette | None = None) -> None:
        self.inner = inner
        self.name = inner.name
        self.cassette = cassette if cassette is not None else Cassette()
        self.failure: ModelError | None = None  # the first infrastructure failure, if any

    @property
    def answered(self) -> int:
        """Model calls of the session answered so far (a refusal of the request counts)."""
        return len(self.cassette.interactions)

    async def complete(
        self, request: dict[str, Any], *, on_text_delta: TextDeltaHandler | None = None
    ) -> ChatResponse:
        try:
            response = await self.inner.complete(request, on_text_delta=on_text_delta)
        except ModelError as exc:
            if is_infrastructure_failure(exc.status_code):
                self.failure = self.failure or exc
            # The failure is part of the session: without it, replay would run out of
            # recorded answers where the live run got an error.
            self.cassette.interactions.append(
                Interaction.failed(request, exc, _endpoint(self.inner))
            )
            raise
        self.cassette.interactions.append(Interaction.of(request, response, _endpoint(self.inner)))
        return response

    async def aclose(self) -> None:
        closer = getattr(self.inner, "aclose", None)
        if closer is not None:
            await closer()


class ReplayModel:
    """Answers from a cassette, in order, and reports how each request drifted."""

    def __init__(
        self,
        cassette: Cassette,
        *,
        strict: bool = False,
        live: ChatModel | None = None,
        record_mode: RecordMode | str = RecordMode.NONE,
        live_from: int | None = None,
        live_from_drift: bool = False,
        on_secrets: Callable[[Iterable[str]], None] | None = None,
    ) -> None:
        if live_from_drift and live is None:
            raise ValueError("live_from_drift needs a live model to hand over to")
        self.cassette = cassette
        # Told what the recording's masks stand for in the requests (`masked.revealed`): the
        # replayed run's redactor, so a case's input that holds a password the recorded run
        # learned is masked in the replayed one too. (A recording with no mask has none.)
        self.on_secrets = on_secrets if on_secrets is not None and _masked(cassette) else None
        self._revealed = 0  # messages of the requests looked at so far
        self.strict = strict
        self.live = live
        self.record_mode = RecordMode.parse(record_mode)
        self.live_from = live_from  # 1-based model call from which the live model answers
        self.live_from_drift = live_from_drift
        self.live_began: int | None = None  # 1-based call the live model took over at
        first = cassette.interactions[0].request.get("model") if cassette.interactions else None
        self.name = str(first or (live.name if live is not None else "replay"))
        self.calls = 0
        self.drifts: list[Drift] = []
        self.recorded: list[Interaction] = []  # interactions answered live, to append
        self.unanswered: list[int] = []  # 1-based calls the recording had no answer for
        self.failure: ModelError | None = None  # an infrastructure failure of a live call
        # Where the recorded runs stopped by the clock, in the order they did: after how many
        # answered calls (see the module docstring).
        self._stops = sorted(
            stop["after_calls"]
            for stop in cassette.info.get("budget_stops") or ()
            if isinstance(stop, dict)
            and isinstance(stop.get("after_calls"), int)
            and "after_tools" not in stop  # a stop among tool calls: `ReplayTools` makes it
        )
        # A recording converted from a trace compares only what the trace recorded; the
        # fields of the current requests it could not know are kept to be said.
        self.source = TraceSource.of(cassette.info)
        self.uncompared: list[str] = []
        self._fingerprints: dict[int, str] = {}
        self._fingerprint = Fingerprinter()  # the current side: incremental per step
        # The recorded side, for a cassette saved without fingerprints: incremental too (its
        # requests repeat each other's messages by value), so a step stays O(new messages).
        self._recorded_fingerprint = Fingerprinter()
        stored = cassette.info.get("fingerprints")
        if (
            cassette.info.get("fingerprint_version") == FINGERPRINT_VERSION
            and isinstance(stored, list)
            and self.source is None  # a trace's: fingerprinted on what it knew, below
        ):
            self._fingerprints = dict(enumerate(stored))
        self._forked = False
        self._reordered = False  # `prefer` moved a call: this replay's cassette is its own

    @property
    def exhausted(self) -> bool:
        return self.calls >= len(self.cassette.interactions)

    @property
    def answered(self) -> int:
        """Model calls of the session answered so far, recorded or live."""
        return self.calls

    async def complete(
        self, request: dict[str, Any], *, on_text_delta: TextDeltaHandler | None = None
    ) -> ChatResponse:
        started = time.perf_counter()
        index = self.calls
        live = self._goes_live(index)
        if self._stops and self._stops[0] <= index and not live:
            self._stops.pop(0)
            raise RecordedTimeout(
                f"the recorded run ran out of its time budget after model call #{index}; "
                "replayed, it stops there too"
            )
        self.calls += 1
        if live:
            return await self._live(request, on_text_delta)
        if index >= len(self.cassette.interactions):
            if self.live_from_drift:
                return await self._hand_over(index, request, on_text_delta)
            self.unanswered.append(index + 1)
            raise ReplayMissingError(self._missing_message(index, request))
        recorded = self.cassette.interactions[index]
        answered_by = recorded.request.get("model")
        if answered_by != self.name and request.get("model") == self.name:
            # A fork's live calls went out under the live model's name (see `_live`); the
            # code asks under this replay's name, which is no change of the code's.
            request = {**request, "model": answered_by}
        changes = self._changes(index, recorded.request, request)
        if changes:
            self.drifts.append(Drift(index, changes))
            if self.live_from_drift:
                return await self._hand_over(index, request, on_text_delta)
            if self.strict:
                summary = "; ".join(c.describe(60) for c in changes[:3])
                raise RequestDriftError(
                    f"model call #{index + 1}: the request differs from the recording "
                    f"({len(changes)} change(s): {summary})",
                    changes,
                )
        if self.on_secrets is not None:
            self._reveal(recorded.request, request)
        # A recorded failure raises its error here, as the live call did.
        response = await self._answer(recorded, request, on_text_delta)
        # Parsed just now and ours alone, so set in place: what model_copy(update=) would give.
        assign(response, "latency_ms", (time.perf_counter() - started) * 1000)
        return response

    def prefer(self, request: dict[str, Any], among: Iterable[int]) -> int | None:
        """Answer the next call with whichever recorded call of `among` (0-based positions,
        not yet answered) was asked exactly `request`, moving it to the next position; None
        when the next one is asked it already, or none of them was. For calls an agent made
        at once (sub-agents gathered, parallel branches): they reach the replay in whatever
        order the machine runs them, so the recording's order among them says nothing.
        Returns the position moved."""
        index = self.calls
        interactions = self.cassette.interactions
        if index >= len(interactions) or self._same(index, request):
            return None
        for other in sorted(among):
            if index < other < len(interactions) and self._same(other, request):
                if not self._reordered:  # the cassette may be shared with other trials
                    self.cassette = Cassette(
                        list(interactions), self.cassette.metadata, self.cassette.path
                    )
                    self._reordered = True
                moved = self.cassette.interactions
                moved[index], moved[other] = moved[other], moved[index]
                first, second = self._fingerprints.get(index), self._fingerprints.get(other)
                for position, value in ((index, second), (other, first)):
                    if value is None:
                        self._fingerprints.pop(position, None)
                    else:
                        self._fingerprints[position] = value
                return other
        return None

    def _same(self, index: int, request: dict[str, Any]) -> bool:
        """Whether `request` is the recorded request of position `index`, by fingerprint."""
        compared, asked = self._comparable(self.cassette.interactions[index].request, request)
        expected = self._fingerprints.get(index)
        if expected is None:
            expected = self._fingerprints[index] = self._recorded_fingerprint(compared)
        return expected == self._fingerprint(asked)

    def _comparable(
        self, recorded: dict[str, Any], request: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The recorded and the current request as they are fingerprinted: for a recording
        from a trace, what the trace knew of each (`TraceSource.known`)."""
        source = self.source
        if source is None:
            return recorded, request
        return source.known(recorded), source.known(request)

    def _changes(
        self, index: int, recorded: dict[str, Any], request: dict[str, Any]
    ) -> list[Change]:
        """How `request` differs from the recorded request of call `index` (0-based)."""
        compared, asked = self._comparable(recorded, request)
        if self.source is not None:
            for key in self.source.unknown(request):
                if key not in self.uncompared:
                    self.uncompared.append(key)
        expected = self._fingerprints.get(index)
        if expected is None:
            expected = self._fingerprints[index] = self._recorded_fingerprint(compared)
        # A different fingerprint is only a hint: the recording may hold masked secrets, or
        # have been converted from a stored run, where the same request differs in bytes.
        if expected == self._fingerprint(asked):
            return []
        return request_diff(recorded, request, self.source)

    def _reveal(self, recorded: dict[str, Any], request: dict[str, Any]) -> None:
        """Hand on what the recording's masks stand for in this request: its parameters and
        messages the first time, then the messages since the last request (a step's new ones)."""
        old, new = recorded.get("messages") or [], request.get("messages") or []
        seen = self._revealed if self._revealed <= min(len(old), len(new)) else 0
        found: list[str] = []
        if not seen:
            for key, part in recorded.items():
                if key != "messages" and key in request:
                    found.extend(revealed(part, request[key]))
        for before, now in zip(old[seen:], new[seen:], strict=False):
            found.extend(revealed(before, now))
        self._revealed = min(len(old), len(new))
        if found and self.on_secrets is not None:
            self.on_secrets(found)

    async def _answer(
        self,
        recorded: Interaction,
        request: dict[str, Any],
        on_text_delta: TextDeltaHandler | None,
    ) -> ChatResponse:
        """The recorded answer to a request that matched (or drifted leniently): parsed here;
        `replay.served` delivers it through a real client and server instead."""
        return recorded.response(on_text_delta if request.get("stream") else None)

    def _goes_live(self, index: int) -> bool:
        if self.record_mode is RecordMode.ALL or self.live_began is not None:
            return True
        if self.live_from is not None and index + 1 >= self.live_from:
            return True
        return self.record_mode is RecordMode.NEW_EPISODES and index >= len(
            self.cassette.interactions
        )

    async def _hand_over(
        self, index: int, request: dict[str, Any], on_text_delta: TextDeltaHandler | None
    ) -> ChatResponse:
        self.live_began = index + 1
        return await self._live(request, on_text_delta)

    async def _live(
        self, request: dict[str, Any], on_text_delta: TextDeltaHandler | None
    ) -> ChatResponse:
        if self.live is not None and "model" in request:
            # The request was built under the recorded model's name; whatever a live model
            # answers (a fork, a continuation, a new recording) is the configured model's
            # (`--model`): a server that serves one name would refuse the recorded one.
            request = {**request, "model": self.live.name}
        if self.live is None:
            self.unanswered.append(self.calls)
            raise ReplayMissingError(
                f"model call #{self.calls} should go to a live model (record mode "
                f"{self.record_mode.value!r}, live_from={self.live_from}) but none is configured; "
                "pass --live with a model, or set OPENAI_BASE_URL / OPENAI_API_KEY"
            )
        uri = _endpoint(self.live) or DEFAULT_URI
        try:
            response = await self.live.complete(request, on_text_delta=on_text_delta)
        except ModelError as exc:
            if is_infrastructure_failure(exc.status_code):
                self.failure = self.failure or exc
            self.recorded.append(Interaction.failed(request, exc, uri))
            raise
        self.recorded.append(Interaction.of(request, response, uri))
        return response

    def _missing_message(self, index: int, request: dict[str, Any]) -> str:
        total = len(self.cassette.interactions)
        where = f" in {self.cassette.path}" if self.cassette.path else ""
        lines = [
            f"model call #{index + 1} has no recorded interaction{where} (the recording has "
            f"{total}); the code under test makes more model calls than were recorded"
        ]
        for number, changes in nearest(request, list(self.cassette.requests()), source=self.source):
            first = changes[0].describe(60) if changes else "identical"
            lines.append(f"  nearest: #{number + 1} ({len(changes)} change(s); {first})")
        return "\n".join(lines)

    async def aclose(self) -> None:
        closer = getattr(self.live, "aclose", None)
        if closer is not None:
            await closer()
