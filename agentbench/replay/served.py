"""Served replay: a cassette's answers reach the agent through the real openai client.

`ReplayModel` parses each recorded answer above the SDK, so the client code a live run goes
through — retries, `Retry-After`, stream accumulation, a cut stream, a server's quirks, a
`FallbackModel` — never runs in a replay. `ServedReplayModel` is a `ReplayModel` (the request
is compared with the recording exactly as there, strict and lenient alike) whose recorded
answer is instead served by `agentbench.testing.OpenAICompatibleServer` on 127.0.0.1, one
server per case, and fetched through an `OpenAIModel`: the agent's own, when its model is an
`OpenAIModel` or a `FallbackModel` of them (pointed at the server, each keeping its name, retry
policy and timeout), else one named as the recording. The server answers every attempt of a
model call with that call's recorded answer, unless a scripted fault (`replay.faults`) hits the
attempt first; a fault no attempt can meet (a call past the recording's, a model no call asks
for) is refused before the replay starts. Nothing leaves the machine, and no key of the
user's is sent (the server gets `SERVED_API_KEY`).

Live, a served case runs the same client against the real endpoint (`live_client`), its
primary model under the live model's name, so what is recorded is what that client does: a
fallback's record, for one.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable
from typing import Any

from agentbench.errors import UsageError
from agentbench.replay.cassette import Cassette, Interaction
from agentbench.replay.faults import Fault, Served
from agentbench.replay.models import ReplayModel
from agentbench.runtime.fallback import FallbackModel
from agentbench.runtime.models import ChatModel, ChatResponse, TextDeltaHandler
from agentbench.runtime.openai_model import OpenAIModel
from agentbench.testing.server import HTTPFault, OpenAICompatibleServer, ReceivedRequest

# The bundled server takes any key; this one says whose requests they are in its log.
SERVED_API_KEY = "agentbench-served-replay"


def pointed_at(
    model: ChatModel | None,
    base_url: str | None,
    *,
    api_key: str | None,
    name: str,
    max_tokens: int | None = None,
    primary: str | None = None,
) -> ChatModel:
    """`model` (the agent's) pointed at `base_url`: an OpenAIModel keeps its name, timeout and
    retry policy; a FallbackModel keeps its chain and what it falls back on. Without a model of
    its own, an OpenAIModel named `name`. `primary` renames the model asked first (a
    FallbackModel's first, and the chain with it); its backups keep their names. Any other
    model cannot be served over HTTP."""
    if model is None:
        return OpenAIModel(name, base_url=base_url, api_key=api_key, max_tokens=max_tokens)
    if isinstance(model, OpenAIModel):
        return OpenAIModel(
            primary or model.name,
            base_url=base_url,
            api_key=api_key,
            timeout_s=model.timeout_s,
            retry=model.retry,
            max_tokens=max_tokens if max_tokens is not None else model.max_tokens,
        )
    if isinstance(model, FallbackModel):
        chain = [
            pointed_at(
                m,
                base_url,
                api_key=api_key,
                name=m.name,
                max_tokens=max_tokens,
                primary=primary if number == 0 else None,
            )
            for number, m in enumerate(model.models)
        ]
        # The chain's name is what a request asks for, so the primary is asked by its own.
        return FallbackModel(chain, on=[*model.statuses, *model.errors], name=primary or model.name)
    raise UsageError(
        f"a served replay talks to the agent's model over HTTP, so it must be an OpenAIModel "
        f"or a FallbackModel of them; the agent's model is {model!r}"
    )


def live_client(agent_model: ChatModel | None, live: ChatModel) -> ChatModel:
    """The client a served case records with: the agent's own, at the live model's endpoint
    (and with its max_tokens), its primary model named as the live model is (`--model`, else
    the suite's `model:`), as a live run of any suite calls that model; a FallbackModel's
    backups keep their names. The live model itself when the agent has none."""
    if agent_model is None or not isinstance(live, OpenAIModel):
        return live
    return pointed_at(
        agent_model,
        live.base_url,
        api_key=None,
        name=live.name,
        max_tokens=live.max_tokens,
        primary=live.name,
    )


def asked_names(model: ChatModel | None, asked_as: str) -> set[str]:
    """The model names `model` (the agent's) asks the server for, when a request asks for
    `asked_as`: a FallbackModel's primary goes by the request's name, each backup by its own."""
    if not isinstance(model, FallbackModel):
        return {asked_as}
    names = asked_names(model.models[0], asked_as)
    for backup in model.models[1:]:
        names |= asked_names(backup, backup.name)
    return names


def faults_that_never_apply(
    served: Served, cassette: Cassette, agent_model: ChatModel | None, asked_as: str
) -> list[str]:
    """Each fault of `served` no attempt of this replay can meet, and why: a call past the
    recording's, or a model no call asks for."""
    calls = len(cassette.interactions)
    recorded = {str(i.request["model"]) for i in cassette.interactions if i.request.get("model")}
    asked = asked_names(agent_model, asked_as) | recorded
    problems = []
    for number, fault in enumerate(served.faults):
        why = []
        if fault.call is not None and fault.call > calls:
            why.append(f"the recording has {calls} model call{'' if calls == 1 else 's'}")
        if fault.model is not None and fault.model not in asked:
            why.append(
                f"no model call of the case asks for {fault.model!r} (they ask for "
                f"{', '.join(repr(n) for n in sorted(asked))})"
            )
        if why:
            problems.append(f"{served.about(number)} can never apply: {'; '.join(why)}")
    return problems


class _Script:
    """What the server answers, by model call: the staged answer, or a fault first. Read by
    the server's handler threads, written by the event loop; hence the lock."""

    def __init__(self, faults: Iterable[Fault]) -> None:
        self.faults = list(faults)
        self._lock = threading.Lock()
        self._staged: tuple[int, ChatResponse] | None = None
        self._used: dict[tuple[int, int], int] = {}  # (fault, call) -> attempts it took
        self.hits: list[tuple[int, int]] = []  # (call, fault) in the order they struck

    def stage(self, call: int | None, answer: ChatResponse | None) -> None:
        with self._lock:
            self._staged = None if call is None or answer is None else (call, answer)

    def respond(self, body: dict[str, Any]) -> Any:
        asked = body.get("model")
        with self._lock:
            if self._staged is None:
                return HTTPFault(400, "agentbench served replay: no model call is waiting")
            call, answer = self._staged
            for number, fault in enumerate(self.faults):
                if not fault.hits(call, asked):
                    continue
                used = self._used.get((number, call), 0)
                if fault.times != "all" and used >= fault.times:
                    continue
                self._used[(number, call)] = used + 1
                self.hits.append((call, number))
                return fault.answer(answer)
        # In the name of the model asked (a fallback's backup answers as itself).
        return answer.model_copy(update={"model": asked or answer.model})


class ServedReplayModel(ReplayModel):
    """A ReplayModel whose answers come through an OpenAI client and a local server."""

    def __init__(
        self,
        cassette: Cassette,
        served: Served,
        *,
        agent_model: ChatModel | None = None,
        **replay: Any,
    ) -> None:
        super().__init__(cassette, **replay)
        self.served = served
        self._agent_model = agent_model
        self.script = _Script(served.faults)
        self._server: OpenAICompatibleServer | None = None
        self._client: ChatModel | None = None
        self._one_at_a_time = asyncio.Lock()
        self.received: list[ReceivedRequest] = []  # what the server got, once closed
        # Checked now, so a model that cannot be served, or a fault that can never strike,
        # is the case's setup error rather than a replay that silently tests less.
        pointed_at(agent_model, "http://127.0.0.1/v1", api_key=SERVED_API_KEY, name=self.name)
        never = faults_that_never_apply(served, cassette, agent_model, self.name)
        if never:
            raise UsageError("; ".join(never))

    def _ready(self) -> ChatModel:
        if self._client is None:
            self._server = OpenAICompatibleServer(
                responder=self.script.respond, model=self.name, quirks=self.served.quirks
            ).start()
            self._client = pointed_at(
                self._agent_model, self._server.base_url, api_key=SERVED_API_KEY, name=self.name
            )
        return self._client

    async def _answer(
        self,
        recorded: Interaction,
        request: dict[str, Any],
        on_text_delta: TextDeltaHandler | None,
    ) -> ChatResponse:
        answer = recorded.response(None)  # a recorded failure is raised here, as in replay
        # One call on the server at a time: every request it gets belongs to the staged call.
        async with self._one_at_a_time:
            client = self._ready()
            self.script.stage(self.calls, answer)
            try:
                return await client.complete(request, on_text_delta=on_text_delta)
            finally:
                self.script.stage(None, None)

    async def aclose(self) -> None:
        try:
            if self._client is not None:
                closer = getattr(self._client, "aclose", None)
                if closer is not None:
                    await closer()
        finally:
            if self._server is not None:
                self._server.stop()
                self.received = list(self._server.requests)
                self._server = None
            await super().aclose()
