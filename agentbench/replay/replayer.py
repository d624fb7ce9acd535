"""`Replayer`: run the current code against a recorded session and report what changed.

The model's answers are held fixed (served from the cassette); tools run live unless a policy
says otherwise; the new run is compared step by step with the recorded trajectory. A session of
several user turns replays turn by turn, each continuing the previous one's conversation and
context as the eval harness does; every turn's steps are aligned with the recording, and each
divergence is told with the turn it happened in. The report names the root cause first (the
changed tool result, request or step; `diff.by_cause`) and lists its downstream effects after
it. Request drift alone is informational when lenient and a divergence when strict; once the
run diverged anyway, its drifted requests join the list in their place either way, so a changed
request is named before what it led to. A model call the recording has no answer for is a
divergence (`extra_step`) whatever the run did after it. The agent is the one given, or the
one the cassette names, imported from the cassette's repository (`recorded_agent`): an
agentbench `Agent`, run by the runner, or a plain function (a boundary target), whose turns
run against a loopback server answering from the same `ReplayModel` (`boundary.session`).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentbench.boundary.target import CallableTarget
from agentbench.errors import UsageError
from agentbench.loading import load_object
from agentbench.replay.cassette import Cassette, CassetteError, RecordMode
from agentbench.replay.diff import Divergence, align, by_cause, drift_divergences
from agentbench.replay.drifted_calls import DriftAt, locate_drifts
from agentbench.replay.mcp_snapshots import session_drifts
from agentbench.replay.models import ReplayModel, unanswered_divergences
from agentbench.replay.session import (
    continue_conversation,
    conversation_metadata,
    recorded_turns,
)
from agentbench.replay.tool_policy import ReplayTools, ToolPolicies
from agentbench.replay.trajectory import Step, trajectory
from agentbench.replay.verdict import divergence_verdict
from agentbench.runtime.agent import Agent
from agentbench.runtime.context import Context
from agentbench.runtime.events import Hook
from agentbench.runtime.models import ChatModel
from agentbench.runtime.run_state import RunResult
from agentbench.runtime.runner import Runner


@dataclass
class ReplayReport:
    source: str
    strict: bool
    result: RunResult
    original: list[Step]
    new: list[Step]
    divergences: list[Divergence]
    drifts: list[DriftAt] = field(default_factory=list)
    saved_to: Path | None = None
    turns: list[RunResult] = field(default_factory=list)  # one per user turn; `result` is last
    turn_starts: list[int] = field(default_factory=list)  # where each turn begins in `new`
    # Request fields the code sent that the recording's trace never recorded: not compared.
    uncompared: list[str] = field(default_factory=list)

    @property
    def errors(self) -> list[str]:
        """Why runs failed, one line per reason (a multi-line message is split, so a report's
        layout never breaks; `nearest:` candidates each get their own line)."""
        found = []
        for turn in self.turns or [self.result]:
            for run in turn.runs or [turn]:
                if run.error is not None:
                    found.extend(" ".join(line.split()) for line in run.error.message.splitlines())
        return [line for line in dict.fromkeys(found) if line]

    @property
    def diverged(self) -> bool:
        return bool(self.divergences)

    @property
    def first(self) -> Divergence | None:
        """The root cause: the earliest divergence, cause before consequence."""
        return self.divergences[0] if self.divergences else None

    def turn_of(self, divergence: Divergence) -> int:
        """The user turn (from 1) a divergence happened in. A step missing right where a turn
        begins would have come at the end of the turn before it."""
        at = divergence.position
        if divergence.cls == "missing_step" and at in self.turn_starts[1:]:
            at -= 1
        return sum(1 for start in self.turn_starts[1:] if start <= at) + 1

    def counterfactual(self) -> str | None:
        """Where the recording stopped applying: once a request drifted, the recorded answers
        from there on answered something the code no longer asks."""
        if not self.drifts:
            return None
        first, drift = self.first, self.drifts[0]
        if first is None and not self.strict:
            # Lenient drift alone is not a divergence: the one verdict stays "unchanged", so
            # this line must not say "diverged" beside it (it did).
            where = f"model call #{drift.call}" if drift.step is None else f"step {drift.step}"
            where += f" ({drift.agent})" if drift.agent else ""
            return (
                f"request drift at {where} (lenient: not counted); its model call and the "
                "steps after it replayed answers recorded for other requests"
            )
        return divergence_verdict(
            {
                "step": first.step if first else drift.step,
                "agent": first.agent if first else drift.agent,
                "class": first.cls if first else "request_drift",
                "call": self.drifts[0].call,
                "stopped": self.strict,
            }
        )

    def _told(self, divergence: Divergence) -> str:
        text = divergence.describe()
        if len(self.turn_starts) > 1:
            text = f"turn {self.turn_of(divergence)}: {text}"
        return text

    def render(self) -> str:
        """The one-screen answer: what changed, at which step, and why."""
        lines = [f"replay of {self.source} ({'strict' if self.strict else 'lenient'})"]
        lines.append(
            f"  original: {len(self.original)} steps; new: {len(self.new)} steps, stop reason "
            f"{self.result.stop_reason}"
        )
        if self.first is None:
            lines.append("  behaviour unchanged: every step matches the recording")
        else:
            lines.append(f"  first divergence — {self.first.describe()}")
            if len(self.turn_starts) > 1:
                lines.append(
                    f"    the root cause, in turn {self.turn_of(self.first)} of "
                    f"{len(self.turn_starts)}"
                )
            later = self.divergences[1:]
            if later:
                lines.append(f"  downstream of it ({len(later)}), in the order they happened:")
                lines.extend(f"    {self._told(d)}".replace("\n", "\n  ") for d in later[:8])
                if len(later) > 8:
                    lines.append(f"    … and {len(later) - 8} more")
        verdict = self.counterfactual()
        if verdict:
            lines.append(f"  {verdict}")
        if self.drifts and not self.strict and not self.diverged:
            count = len(self.drifts)
            lines.append(f"  request drift (lenient: reported, not counted) in {count} call(s):")
            lines.extend(f"    {d.describe()}".replace("\n", "\n  ") for d in self.drifts[:4])
        if self.uncompared:
            lines.append(
                f"  not compared: {', '.join(self.uncompared)} (the trace the recording was "
                "made from did not record them)"
            )
        errors = self.errors
        if errors:
            lines.append(f"  run error: {errors[0]}")
            lines.extend(f"    {line}" for line in errors[1:])
        if self.saved_to is not None:
            lines.append(f"  recorded to {self.saved_to}")
        lines.append(f"verdict: {'DIVERGED' if self.diverged else 'unchanged'}")
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "strict": self.strict,
            "diverged": self.diverged,
            "counterfactual": self.counterfactual(),
            "run_id": self.result.run_id,
            "stop_reason": str(self.result.stop_reason),
            "first": self._as_dict(self.first) if self.first else None,
            "divergences": [self._as_dict(d) for d in self.divergences],
            "downstream": max(len(self.divergences) - 1, 0),
            "drifts": [d.as_dict() for d in self.drifts],
            "uncompared": self.uncompared,
            "turns": len(self.turns) or 1,
            "errors": self.errors,
        }

    def _as_dict(self, divergence: Divergence) -> dict[str, Any]:
        return {**divergence.as_dict(), "turn": self.turn_of(divergence)}


class Replayer:
    """Replays recorded sessions against the current code."""

    def __init__(
        self,
        agent: Agent | CallableTarget | None = None,
        *,
        strict: bool = False,
        tools: ToolPolicies | Mapping[str, str] | None = None,
        live_model: ChatModel | None = None,
        live_from: int | None = None,
        record_mode: RecordMode | str = RecordMode.NONE,
        hooks: Sequence[Hook] = (),
        store: Any = None,
    ) -> None:
        self.agent = agent
        self.strict = strict
        self.tools = ToolPolicies.of(tools)
        self.live_model = live_model
        self.live_from = live_from
        self.record_mode = RecordMode.parse(record_mode)
        self.hooks = list(hooks)
        self.store = store  # a TraceStore: the new run is stored with replay_of set
        if live_from is not None and live_from < 1:
            raise UsageError("--live-from counts model calls from 1")

    def _agent_for(
        self, cassette: Cassette, agent: Agent | CallableTarget | None
    ) -> Agent | CallableTarget:
        chosen = agent or self.agent
        return chosen if chosen is not None else recorded_agent(cassette).agent

    async def replay(
        self,
        cassette: Cassette | str | Path,
        *,
        agent: Agent | CallableTarget | None = None,
        save_to: Path | None = None,
    ) -> ReplayReport:
        """Replay a cassette; the new run is compared with the recorded trajectory."""
        if not isinstance(cassette, Cassette):
            cassette = Cassette.load(cassette)
        info = cassette.info
        if "input" not in info:
            raise UsageError(
                f"{cassette.path}: the cassette has no recorded input (metadata.agentbench.input); "
                "record it with agentbench (record_session) or convert it from a stored trace"
            )
        target = self._agent_for(cassette, agent)
        original_run = info.get("source_run") or next(
            (r.get("run_id") for r in info.get("runs", ())), None
        )
        store = self.store.with_labels(replay_of=original_run) if self.store else None
        live = self.live_model
        if isinstance(target, CallableTarget):
            live = self._boundary_live(live)
        model = ReplayModel(
            cassette,
            strict=self.strict,
            live=live,
            record_mode=self.record_mode,
            live_from=self.live_from,
            # What the recording masked is a secret in the replayed run too.
            on_secrets=store.redactor.learn if store is not None else None,
        )
        model_drifts = model.drifts
        if isinstance(target, CallableTarget):
            mcp = self._mcp_servers(model)
            turns = await self._boundary_turns(target, model, info, cassette, store, mcp)
            model_drifts = mcp.drifts(model.drifts)  # a live server's changed tool list
        else:
            turns = await self._agent_turns(target, model, info, cassette, store)
        events = [event for turn in turns for event in turn.all_events]
        original = [Step.from_dict(s) for s in info.get("trajectory", ())]
        # Every turn's steps, in order: the whole session is aligned with the recording,
        # so a change in turn 1 is found in turn 1, not as what it did to turn 2.
        new = trajectory(events)
        drifts = locate_drifts(session_drifts(model_drifts, target, events, self.tools), events)
        # A call the recording could not answer ended the run in an error of the replay's own:
        # a divergence even when the recorded run ended in an error as well.
        divergences = [*align(original, new), *unanswered_divergences(model.unanswered, events)]
        if self.strict or divergences:
            divergences = by_cause([*divergences, *drift_divergences(drifts, events)])
        saved = self._save_branch(cassette, model, turns, info, save_to)
        return ReplayReport(
            source=str(cassette.path or "cassette"),
            strict=self.strict,
            result=turns[-1],
            original=original,
            new=new,
            divergences=divergences,
            drifts=drifts,
            saved_to=saved,
            turns=turns,
            turn_starts=_turn_starts(turns),
            uncompared=model.uncompared,
        )

    async def _agent_turns(
        self, agent: Agent, model: ReplayModel, info: dict[str, Any], cassette: Cassette, store: Any
    ) -> list[RunResult]:
        tools = ReplayTools(
            self.tools, info.get("tool_results", ()), (i.request for i in cassette.interactions)
        )
        turns: list[RunResult] = []
        context: Context | None = _context(info.get("context"))
        for turn in recorded_turns(info, str(cassette.path or "the cassette")):
            # Each turn continues the last one's dialogue and context, as the harness recorded it.
            result = await Runner.run(
                agent,
                continue_conversation(turns[-1] if turns else None, turn),
                model=model,
                context=context,
                hooks=self.hooks,
                tool_interceptor=tools,
                store=store,
            )
            turns.append(result)
            context = result.context
        return turns

    @staticmethod
    def _boundary_live(live: ChatModel | None) -> ChatModel | None:
        """A boundary target's live model forwards its client's own requests."""
        from agentbench.boundary.session import forwarder_for, keep_offline

        if live is None:
            keep_offline()
            return None
        return forwarder_for(live)

    async def _boundary_turns(
        self,
        target: CallableTarget,
        model: ReplayModel,
        info: dict[str, Any],
        cassette: Cassette,
        store: Any,
        mcp: Any,
    ) -> list[RunResult]:
        from agentbench.boundary.session import run_turns, variables_of

        try:
            return await run_turns(
                target,
                model,
                recorded_turns(info, str(cassette.path or "the cassette")),
                variables=variables_of(_context(info.get("context"))),
                store=store,
                hooks=self.hooks,
                mcp=mcp,
            )
        finally:
            await model.aclose()  # the forwarder to a live endpoint, when there is one

    def _mcp_servers(self, model: ReplayModel) -> Any:
        """A boundary target runs its own tools: the policies reach only the MCP servers it
        reaches through its target context (`target.mcp_stdio`, `target.mcp_url`)."""
        from agentbench.boundary.session import mcp_servers_for

        try:
            return mcp_servers_for(model, self.tools)
        except CassetteError as exc:
            raise UsageError(str(exc)) from None

    async def replay_run(
        self, store: Any, run_id: str, *, agent: Agent | CallableTarget | None = None
    ) -> ReplayReport:
        """Replay a stored run (and the runs it handed off to) from a trace store."""
        from agentbench.replay.convert import cassette_from_store

        cassette = cassette_from_store(store, run_id)
        report = await self.replay(cassette, agent=agent)
        report.source = f"run {cassette.info['source_run']}"
        return report

    def _save_branch(
        self,
        cassette: Cassette,
        model: ReplayModel,
        turns: list[RunResult],
        info: dict[str, Any],
        save_to: Path | None,
    ) -> Path | None:
        """Keep what went live: re-recorded (all), appended (new_episodes), or a fork."""
        if not model.recorded:
            return None
        if self.record_mode is RecordMode.ALL:
            kept = []
        elif self.live_from is not None:
            kept = cassette.interactions[: self.live_from - 1]
        else:  # new_episodes: the recording, then the calls beyond its end
            kept = list(cassette.interactions)
        branch = Cassette(kept + model.recorded, dict(cassette.metadata))
        branch.update_info(
            **conversation_metadata(
                turns,
                inputs=recorded_turns(info, str(cassette.path or "the cassette")),
                context=_context(info.get("context")),
                agent_ref=info.get("agent"),
            )
        )
        if self.live_from is not None:
            branch.update_info(forked_from=str(cassette.path), live_from=self.live_from)
        default = cassette.path if self.live_from is None else _fork_path(cassette.path)
        target = save_to or default
        if target is None:
            return None
        return branch.save(target)


def _fork_path(path: Path | None) -> Path | None:
    if path is None:
        return None
    return path.with_name(f"{path.stem}.fork{path.suffix or '.yaml'}")


def _context(value: Any) -> Context | None:
    if not isinstance(value, dict):
        return None
    return Context(
        session=dict(value.get("session") or {}),
        request=dict(value.get("request") or {}),
        global_=dict(value.get("global") or {}),
        pinned=[str(fact) for fact in value.get("pinned") or ()],
    )


def _turn_starts(turns: list[RunResult]) -> list[int]:
    """Where each turn's steps begin in the session's trajectory."""
    starts, at = [], 0
    for turn in turns:
        starts.append(at)
        at += len(trajectory(turn.all_events))
    return starts


@dataclass(frozen=True)
class RecordedAgent:
    """The agent a cassette names (metadata `agent`), and where its code was imported from."""

    agent: Agent | CallableTarget
    ref: str
    root: Path | None  # the cassette's repository root, when it could be told
    module_file: Path | None

    @property
    def elsewhere(self) -> bool:
        """Imported from outside the cassette's repository (another checkout, site-packages,
        a module imported earlier): worth telling, since it may not be the code meant."""
        if self.root is None or self.module_file is None:
            return False
        return not self.module_file.resolve().is_relative_to(self.root.resolve())

    def note(self) -> str:
        return (
            f"agent {self.ref} loaded from {self.module_file}, which is not under the "
            f"cassette's repository {self.root}"
        )


def suite_folder(cassette: Cassette) -> Path | None:
    """The folder of the suite a cassette was recorded for (metadata `suite_dir`, relative to
    the cassette's folder), when it names one; the folder may since have gone."""
    suite_dir = cassette.info.get("suite_dir")
    if not suite_dir or cassette.path is None:
        return None
    return (cassette.path.resolve().parent / str(suite_dir)).resolve()


def cassette_root(cassette: Cassette) -> Path | None:
    """The repository a cassette belongs to. With `suite_dir` (written by the harness) it is
    the suite's repository root, the parent of the folder holding the suite; otherwise the
    nearest folder above the cassette holding the top-level package of its `agent`."""
    if cassette.path is None:
        return None
    suite = suite_folder(cassette)
    if suite is not None:
        return suite.parent.parent
    folder = cassette.path.resolve().parent
    module = str(cassette.info.get("agent") or "").partition(":")[0]
    if not module or module.endswith(".py"):
        return None
    top = module.split(".")[0]
    return next(
        (
            candidate
            for candidate in (folder, *folder.parents)
            if (candidate / top).is_dir() or (candidate / f"{top}.py").is_file()
        ),
        None,
    )


def recorded_agent(cassette: Cassette) -> RecordedAgent:
    """Import the agent the cassette names, with the cassette's repository root first on
    sys.path, so a cassette replays from any working folder (the working folder when the
    root cannot be told). A `file.py:attribute` ref is relative to the suite folder."""
    ref = cassette.info.get("agent")
    where = cassette.path or "the cassette"
    if not ref:
        raise UsageError(
            f"{where}: metadata.agentbench.agent: the cassette does not name its agent (no "
            "`agent` recorded); pass it with --agent module:attribute"
        )
    if str(ref).startswith("command: "):  # a command agent is run from its suite.yaml
        raise UsageError(
            f"{where}: the cassette was recorded by a command agent ({str(ref)[9:]}) whose "
            "suite folder (metadata.agentbench.suite_dir) has no suite.yaml; pass it with "
            "--suite FOLDER"
        )
    root = cassette_root(cassette)
    module = str(ref).partition(":")[0]
    base = root or Path.cwd()
    if module.endswith(".py"):
        base = suite_folder(cassette) or base
    what = f"{where}: metadata.agentbench.agent"
    loaded = load_object(str(ref), what=what, search_path=base)
    if not isinstance(loaded, Agent):  # a plain function: a boundary target
        loaded = CallableTarget.of(loaded, where=f"{what}: ")
    return RecordedAgent(loaded, str(ref), root, loaded_from(str(ref), base))


def loaded_from(ref: str, base: Path | None = None) -> Path | None:
    """The file the module of an imported `module:attribute` ref was loaded from."""
    module = ref.partition(":")[0]
    if module.endswith(".py"):
        path = Path(module)
        return path if path.is_absolute() or base is None else base / path
    file = getattr(sys.modules.get(module), "__file__", None)
    return Path(file) if file else None
