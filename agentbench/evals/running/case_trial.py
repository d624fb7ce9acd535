"""One trial of one case, whatever its target: its plan (`CasePlan`), what running it produced
(`CaseRun`), the model it talks to (`model_for`) and what it leaves once its turns are over
(`settle`: a live model's failure raised, what the replay found, the recording written).
`case_runner` runs an agentbench Agent's turns, `boundary_case` a boundary target's.

Replay is the default: the case's cassette answers every model call and the current agent
code does everything else, so a changed prompt or tool shows up as a changed result. Live
(`always_live`), every model call goes to a real endpoint and the cassette is never read; it is
written only when the record mode says so (`once`: where none exists, `all`: always) — which is
how the shipped cassettes were made. Without `always_live`, `once` replays an existing cassette
and records a missing one, and `new_episodes` replays and records the calls beyond it. A live
call that fails for the infrastructure's sake (no connection, a timeout, a 5xx after retries)
fails the trial as an infrastructure error and leaves the cassette as it was. Multi-turn cases
run turn after turn, each continuing the previous turn's conversation and context, all from one
cassette.

Once a request drifts, every recorded answer from there on answers a question the code no
longer asks: `diverged_at` says where that happened, and with `live_from_divergence` the live
model answers from that call on, so what is scored is the real continuation.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentbench.boundary.target import CallableTarget
from agentbench.errors import AgentbenchError, UsageError
from agentbench.evals.comparing.compare_text import describe_divergence
from agentbench.evals.comparing.stats import divergence_verdict
from agentbench.replay.cassette import Cassette, CassetteError, RecordMode
from agentbench.replay.diff import Divergence, align, by_cause
from agentbench.replay.drifted_calls import Drift, DriftAt, locate_drifts
from agentbench.replay.faults import Served
from agentbench.replay.models import (
    RecordingModel,
    ReplayModel,
    unanswered_divergences,
)
from agentbench.replay.session import conversation_metadata
from agentbench.replay.tool_policy import ToolPolicies
from agentbench.replay.trajectory import Step, model_call_position, trajectory
from agentbench.runtime.agent import Agent
from agentbench.runtime.context import Context
from agentbench.runtime.events import Hook
from agentbench.runtime.models import ChatModel, Usage
from agentbench.runtime.run_state import RunResult


class CaseSetupError(AgentbenchError):
    """A case cannot run: its cassette is missing or unreadable, or no live model is set."""


class LiveModelError(CaseSetupError):
    """A live model call failed for the infrastructure's sake: the trial is an error, not a
    verdict on the code, and nothing of it was written to the cassette."""


@dataclass
class CasePlan:
    """Everything needed to run one trial of one case."""

    suite: str
    case_id: str
    agent: Agent | CallableTarget
    turns: list[str | list[dict[str, Any]]]
    context: Context | dict[str, Any] | None
    cassette: Path
    record_mode: RecordMode
    tools: ToolPolicies
    live: Callable[[], ChatModel] | None  # makes the live model, when one is configured
    strict: bool = False
    store: Any = None
    hooks: Sequence[Hook] = ()
    record: bool = True  # this trial may write the cassette (trial 1 only)
    agent_ref: str | None = None  # the suite's `agent:` reference, recorded in the cassette
    suite_dir: Path | None = None  # the suite folder, recorded relative to the cassette
    live_from_divergence: bool = False  # the live model answers from the first drifted call
    always_live: bool = False  # --live: every call to the live model, the cassette never read
    served: Served | None = None  # answers through the openai client and a local server


@dataclass
class CaseRun:
    """What running a case produced, before scoring."""

    turns: list[RunResult] = field(default_factory=list)
    duration_ms: float = 0.0
    recorded_to: Path | None = None
    drifts: list[Drift] = field(default_factory=list)
    recorded: list[Step] | None = None  # the cassette's trajectory, when one was replayed
    live_from: int | None = None  # the model call (1-based) a live model took over at
    stopped: bool = False  # strict replay stopped the run at its first drifted request
    replayed: bool = False  # every model call was answered from the cassette
    unanswered: list[int] = field(default_factory=list)  # calls the recording had no answer for
    # Where runs stopped by the clock (`replay.models.budget_stop`), for the recording.
    budget_stops: list[dict[str, Any]] = field(default_factory=list)

    @property
    def result(self) -> RunResult:
        return self.turns[-1]

    @property
    def events(self) -> list[Any]:
        """Every event of every run of every turn, in order. Made once per number of turns:
        a run's events are kept packed and each read makes them again, and drift, the
        trajectory and the divergences each read them all."""
        made = self.__dict__.get("_events")
        if made is None or made[0] != len(self.turns):
            events = [e for turn in self.turns for run in turn.runs or [turn] for e in run.events]
            made = self.__dict__["_events"] = (len(self.turns), events)
        return made[1]

    def located_drifts(self) -> list[DriftAt]:
        """Each drifted model call with its run's agent and step."""
        return locate_drifts(self.drifts, self.events)

    @functools.cached_property
    def steps(self) -> list[Step]:
        """The trajectory of every turn (computed once: the runs are over by now)."""
        return trajectory(self.events)

    @functools.cached_property
    def _divergences(self) -> list[Divergence]:
        found = align(self.recorded, self.steps) if self.recorded else []
        if not self.unanswered:
            return found
        # The run ended in the replay's own error, whatever its steps look like.
        return by_cause([*found, *unanswered_divergences(self.unanswered, self.events)])

    def divergences(self) -> list[Divergence]:
        """Where this run behaved differently from the recording it replayed (none if live)."""
        return self._divergences

    def drift_reason(self) -> str | None:
        """Why the requests differ from the recording, from the root: when the run diverged
        before the first drifted call (a tool result, a context value, a handoff changed),
        that divergence is the cause and the drift its consequence. It ends with what that
        means for the answers after it (`divergence_verdict`)."""
        located = self.located_drifts()
        if not located:
            return None
        first_drift = located[0]
        reasons = self.drift_reasons()
        more = f"; {len(located) - 1} more drifted call(s)" if len(located) > 1 else ""
        found = self.diverged_at()
        verdict = divergence_verdict(found) if found else ""
        if self.live_from is None and not self.stopped:
            verdict += (
                " (re-record with --live --record-mode all if the change is intended, or "
                "score the real continuation with --live-from-divergence)"
            )
        cause = self._cause_of(first_drift)
        if cause is None:
            return f"{reasons[0]}; {verdict}{more}"
        changes = first_drift.drift.changes
        field_name = changes[0].path if changes else "the request"
        return (
            f"{cause}; so model call #{first_drift.call} sent a different request "
            f"({field_name}); {verdict}{more}"
        )

    def diverged_at(self) -> dict[str, Any] | None:
        """Where the recording stopped applying (`TrialOutcome.diverged_at`), or None when
        every model call was asked what was recorded. The place named is the root cause: the
        first divergence when it came before the first drifted call, else that call."""
        located = self.located_drifts()
        if located:
            call = located[0].call
        elif self.live_from is not None:
            call = self.live_from
        elif self.unanswered:
            call = self.unanswered[0]
        else:
            return None
        cause = self._first_divergence_before(call)
        if cause is not None:
            step, agent, cls = cause.step, cause.agent, cause.cls
            text = " ".join(describe_divergence(cause.as_dict(), 60).split())
        elif located:
            step, agent, cls = located[0].step, located[0].agent, "request_drift"
            text = self.drift_reasons()[0]
        else:  # a call beyond the recording, with nothing in the trajectory before it
            step, agent, cls = None, None, "extra_step"
            text = f"model call #{call} has no recorded answer"
        return {
            "step": step,
            "agent": agent,
            "class": cls,
            "cause": text,
            "call": call,
            "live_from": self.live_from,
            "stopped": self.stopped,
            **({"unanswered": True} if not located and self.live_from is None else {}),
        }

    def _first_divergence_before(self, call: int) -> Divergence | None:
        at = model_call_position(self.steps, call)
        first = next(iter(self.divergences()), None)
        return first if first is not None and first.position < at else None

    def _cause_of(self, drift: DriftAt) -> str | None:
        first = self._first_divergence_before(drift.call)
        if first is None:
            return None
        return " ".join(describe_divergence(first.as_dict(), 60).split())

    def drift_reasons(self) -> list[str]:
        """Each drifted model call, located in its run, with the first changed field."""
        reasons = []
        for located in self.located_drifts():
            changes = located.drift.changes
            where = f"step {located.step} ({located.agent})" if located.agent else "a step"
            first = changes[0].describe(70) if changes else "?"
            more = f"; {len(changes) - 1} more change(s)" if len(changes) > 1 else ""
            reasons.append(f"model call #{located.call} at {where}: {first}{more}")
        return reasons

    @property
    def usage(self) -> Usage:
        total = Usage()
        for turn in self.turns:
            for run in turn.runs or [turn]:
                total = total + run.usage
        return total


def model_for(plan: CasePlan) -> tuple[ChatModel, Cassette | None]:
    """The model a trial talks to: the cassette, a live endpoint, or both (new episodes)."""
    mode = plan.record_mode
    exists = plan.cassette.is_file()
    live = plan.live() if plan.live is not None else None
    if plan.served is not None and live is not None:
        from agentbench.replay.served import live_client  # the openai SDK, only when served

        try:
            live = live_client(plan.agent.model, live)
        except UsageError as exc:
            raise CaseSetupError(f"case {plan.case_id!r}: {exc}") from None
    if plan.always_live:
        if live is None:
            raise CaseSetupError(
                f"case {plan.case_id!r}: --live needs a live model (--model and --base-url, "
                "OPENAI_BASE_URL / OPENAI_API_KEY, or the suite's model:)"
            )
        return RecordingModel(live), None
    if plan.live_from_divergence and live is None:
        raise CaseSetupError(
            f"case {plan.case_id!r}: --live-from-divergence needs a live model "
            "(--model and --base-url, OPENAI_BASE_URL, or the suite's model:)"
        )
    if mode is RecordMode.ALL or (mode is RecordMode.ONCE and not exists):
        if live is None:
            raise CaseSetupError(
                f"case {plan.case_id!r}: record mode {mode.value!r} needs a live model "
                "(--live, with OPENAI_BASE_URL / OPENAI_API_KEY or --model)"
            )
        return RecordingModel(live), None
    if not exists:
        raise CaseSetupError(
            f"case {plan.case_id!r}: no cassette at {plan.cassette}; record one with "
            "`agentbench run … --live --record-mode once`"
        )
    try:
        cassette = Cassette.load(plan.cassette)
    except CassetteError as exc:
        raise CaseSetupError(f"case {plan.case_id!r}: {exc}") from None
    learned = getattr(plan.store, "redactor", None)
    settings: dict[str, Any] = {
        "strict": plan.strict,
        "live": live,
        "record_mode": mode,
        "live_from_drift": plan.live_from_divergence,
        # What the recording masked is a secret in the replayed runs too.
        "on_secrets": learned.learn if learned is not None else None,
    }
    if plan.served is not None:
        from agentbench.replay.served import ServedReplayModel

        try:
            served = ServedReplayModel(
                cassette, plan.served, agent_model=plan.agent.model, **settings
            )
        except UsageError as exc:
            raise CaseSetupError(f"case {plan.case_id!r}: {exc}") from None
        return served, cassette
    return ReplayModel(cassette, **settings), cassette


def settle(
    plan: CasePlan,
    model: ChatModel,
    cassette: Cassette | None,
    outcome: CaseRun,
    *,
    existed: bool,
    drifts: list[Drift] | None = None,
) -> CaseRun:
    """What a trial's turns leave once they are over, for either kind of target: an
    infrastructure failure of the live model raised (LiveModelError), what the replay found
    (`drifts` in place of the model's own when given), and the recording written."""
    failure = getattr(model, "failure", None)
    if failure is not None:
        raise LiveModelError(
            f"case {plan.case_id!r}: the live model failed, so this trial says nothing about "
            f"the code ({failure}); {left_as_it_was(plan.cassette, existed)}"
        )
    if isinstance(model, ReplayModel):
        outcome.drifts = list(model.drifts) if drifts is None else drifts
        outcome.live_from = model.live_began
        outcome.replayed = not model.recorded  # no call went to a live model
        outcome.stopped = model.strict and bool(model.drifts)
        outcome.unanswered = list(model.unanswered)
    if cassette is not None and "trajectory" in cassette.info:
        outcome.recorded = [Step.from_dict(s) for s in cassette.info["trajectory"]]
    outcome.recorded_to = save_recording(plan, model, outcome, existed=existed)
    return outcome


def left_as_it_was(path: Path, existed: bool) -> str:
    if existed:
        return f"its cassette {path} was left as it was"
    return f"no cassette was written to {path}"


def writes_cassette(mode: RecordMode, *, existed: bool) -> bool:
    """Whether a live trial in record mode `mode` writes its case's cassette."""
    return mode is RecordMode.ALL or (mode is RecordMode.ONCE and not existed)


def save_recording(
    plan: CasePlan, model: ChatModel, outcome: CaseRun, *, existed: bool
) -> Path | None:
    """Write what went to a live model, as the record mode says: a fresh recording, or calls
    beyond the old one."""
    if not plan.record:
        return None
    if isinstance(model, RecordingModel):
        if not writes_cassette(plan.record_mode, existed=existed):
            return None
        cassette = model.cassette
    elif isinstance(model, ReplayModel) and model.live_began is not None:
        # A continuation from a divergence replaces recorded calls: appended to the old
        # recording it would not be a session, and re-recording is --record-mode all's job.
        return None
    elif isinstance(model, ReplayModel) and model.recorded:
        cassette = Cassette(
            list(model.cassette.interactions) + model.recorded, dict(model.cassette.metadata)
        )
    else:
        return None
    metadata = conversation_metadata(
        outcome.turns, inputs=plan.turns, context=plan.context, agent_ref=plan.agent_ref
    )
    metadata["suite"], metadata["case"] = plan.suite, plan.case_id
    metadata["budget_stops"] = outcome.budget_stops
    cap = getattr(getattr(model, "inner", None) or getattr(model, "live", None), "max_tokens", None)
    if cap is not None:
        metadata["live_max_tokens"] = cap
    if plan.suite_dir is not None:
        # Relative to the cassette, so `agentbench replay CASSETTE` finds the suite (and
        # builds its agent as the harness does) from any working folder or checkout.
        folder = os.path.relpath(plan.suite_dir.resolve(), plan.cassette.resolve().parent)
        metadata["suite_dir"] = Path(folder).as_posix()
    cassette.update_info(**metadata)
    if not outcome.budget_stops:  # the usual case: no key at all, rather than an empty one
        cassette.metadata["agentbench"].pop("budget_stops", None)
    # The trial's redactor, when it has one, knows what its runs learned is secret.
    return cassette.save(plan.cassette, redactor=getattr(plan.store, "redactor", None))
