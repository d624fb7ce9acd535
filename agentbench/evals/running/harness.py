"""The harness: run golden suites' cases × trials, score them, store everything under one eval.

For each suite: load its agent (and run its setup), then run every selected case `trials`
times, at most `concurrency` at once — from the case's cassette by default, live when asked —
score each trial, and write the runs (through the trace store, labelled with the eval, case
and trial) and the scored result (the `results` table) as each trial finishes, so an
interrupted eval can be resumed. A suite that cannot load never stops the others.
"""

from __future__ import annotations

import copy
import difflib
import fnmatch
import importlib.util
import operator
import os
import shutil
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agentbench.boundary.command import CommandAgent, CommandTarget
from agentbench.boundary.target import CallableTarget
from agentbench.errors import AgentbenchError, UsageError, one_line
from agentbench.evals.comparing.stats import Summary, TrialOutcome, divergence_verdict, summarize
from agentbench.evals.running.case_runner import run_case
from agentbench.evals.running.case_trial import CasePlan, CaseSetupError, LiveModelError
from agentbench.evals.running.executors import Executor, LocalExecutor
from agentbench.evals.running.judging import JudgeRecorder
from agentbench.evals.running.outcome_spool import OutcomeSpool
from agentbench.evals.running.shards import Shard, recorded_calls, shared_eval_id, trial_name
from agentbench.evals.scorers import Score, ScoreContext, score_all
from agentbench.evals.storage import results_store
from agentbench.evals.suites.case_files import CaseBrief
from agentbench.evals.suites.suite_models import DEFAULT_LIVE_MAX_TOKENS
from agentbench.replay import cassette_cache
from agentbench.replay.cassette import RecordMode
from agentbench.replay.faults import Served
from agentbench.runtime.agent import Agent
from agentbench.runtime.agent_tree import reachable_tools
from agentbench.runtime.models import ChatModel
from agentbench.trace.code_version import code_version
from agentbench.trace.redaction.redactor import Redactor
from agentbench.trace.redaction.rules import RedactionRules


@dataclass
class HarnessOptions:
    trials: int | None = None  # None: each suite's own
    concurrency: int = 4
    record_mode: RecordMode = RecordMode.NONE
    live: bool = False
    model: str | None = None  # overrides the suites' model names when live
    base_url: str | None = None
    filters: Sequence[str] = ()  # case ids (glob) or tag:NAME
    strict: bool = False  # stop a case at its first drifted request
    allow_drift: bool = False  # a drifted request is reported, not a failure by itself
    # Replay each case up to its first drifted request, then let the live model answer the
    # rest: the real continuation is what is scored.
    live_from_divergence: bool = False
    resume: str | None = None
    shard: Shard | None = None  # run only this part of the trials (a CI job matrix)
    eval_id: str | None = None  # record under this id (the shards of one run share it)


@dataclass
class EvalRun:
    eval_id: str
    # The harness spools an eval's outcomes to disk (`OutcomeSpool`: the driver keeps nothing
    # per trial); a list serves evals put together by hand.
    outcomes: OutcomeSpool | list[TrialOutcome] = field(default_factory=list)
    suite_errors: list[str] = field(default_factory=list)
    code_version: str | None = None
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    resumed: int = 0  # trials taken from the stored eval instead of run again
    _summary: Summary | None = field(default=None, repr=False, compare=False)

    @property
    def summary(self) -> Summary:
        """The eval's numbers: made once for a complete (sealed) spool, each time for a list,
        which may still change."""
        if self._summary is not None:
            return self._summary
        summary = summarize(self.outcomes)
        if isinstance(self.outcomes, OutcomeSpool) and self.outcomes.sealed:
            self._summary = summary
        return summary

    def close(self) -> None:
        """Close the spool's file now: an eval ended by an error is otherwise held by its
        traceback until a garbage collection finds it."""
        if isinstance(self.outcomes, OutcomeSpool):
            self.outcomes.close()


Progress = Callable[[TrialOutcome], None]
MAX_DIVERGENCES = 10  # kept per trial: the first is the one that matters, a few show the spread


def new_eval_id() -> str:
    return f"eval_{datetime.now(UTC):%Y%m%dT%H%M%S}_{uuid.uuid4().hex[:6]}"


def selected(case: Any, suite: Any, filters: Sequence[str]) -> bool:
    """A case is selected when any filter matches its id (glob) or a tag (`tag:NAME`)."""
    if not filters:
        return True
    tags = set(case.tags) | set(suite.tags)
    for item in filters:
        if item.startswith("tag:"):
            if item[4:] in tags:
                return True
        elif fnmatch.fnmatchcase(case.id, item) or fnmatch.fnmatchcase(
            f"{suite.name}/{case.id}", item
        ):
            return True
    return False


def _plannable(suite: Any) -> Sequence[Any]:
    """A suite's cases for planning: briefs of a loaded suite's, a built suite's own."""
    briefs = getattr(suite.cases, "briefs", None)
    return briefs() if briefs is not None else suite.cases


def live_factory(model: Any, options: HarnessOptions) -> Callable[[], ChatModel] | None:
    """What makes the live model for a suite whose `model:` block is `model` (or None): the
    options' --model / --base-url win over the suite's, the environment fills the rest."""
    if not (options.live or options.live_from_divergence or _records_without_live(options)):
        return None
    name = options.model or (model.name if model else None)
    base_url = options.base_url or (model.base_url if model else None)

    cap = model.max_tokens if model is not None else DEFAULT_LIVE_MAX_TOKENS

    def make() -> ChatModel:
        from agentbench.runtime.openai_model import OpenAIModel

        return OpenAIModel(name, base_url=base_url, max_tokens=cap)

    return make


def _records_without_live(options: HarnessOptions) -> bool:
    """`--record-mode once|new_episodes` without --live: replay what is recorded, and call the
    live model for what is not (a case without a cassette, calls beyond a recording)."""
    return options.record_mode in (RecordMode.ONCE, RecordMode.NEW_EPISODES)


def missing_live_model(model: Any, options: HarnessOptions) -> str | None:
    """What a suite whose `model:` block is `model` (or None) lacks to call a live model, in
    the user's words (None: nothing)."""
    name = (
        options.model
        or (model.name if model else None)
        or os.environ.get("AGENTBENCH_MODEL")
        or os.environ.get("OPENAI_MODEL")
    )
    if not name:
        return "no model name (pass --model NAME, or set the suite's model: name)"
    endpoint = options.base_url or (model.base_url if model else None)
    if not (endpoint or os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_KEY")):
        return (
            "no endpoint for model "
            f"{name!r} (pass --base-url URL, or set OPENAI_BASE_URL, or OPENAI_API_KEY for "
            "OpenAI's, or the suite's model: base_url)"
        )
    return None


def agent_for(suite: Any, agent: Any = None) -> Agent | CallableTarget:
    """The suite's agent (or `agent`, when one is given in its place, as `agentbench replay
    --agent` does) with the suite's `model.settings` as its model settings; a plain function
    is a boundary target (its model calls recorded and replayed over HTTP)."""
    model = suite.model.name if suite.model else None
    if agent is None and isinstance(suite.agent, CommandAgent):
        loaded: Any = CommandTarget.of_command(
            suite.agent, suite.path, where=suite.where("agent"), model=model
        )
    else:
        loaded = suite.load_object(suite.agent, what="agent") if agent is None else agent
    if not isinstance(loaded, Agent):
        target = (
            loaded
            if isinstance(loaded, CommandTarget)
            else CallableTarget.of(loaded, where=suite.where("agent"), model=model)
        )
        refused = agent_only_settings(suite, command=isinstance(target, CommandTarget))
        if refused:
            raise UsageError(
                f"{suite.where('agent')}agent {suite.agent_ref!r} is a "
                f"{'command' if isinstance(target, CommandTarget) else 'function'} (a boundary "
                f"target): {refused} apply to an agentbench Agent only; its framework makes "
                "its own requests and runs its own tools, so remove them"
            )
        return target
    unknown_tools(suite, loaded)
    settings = suite.model.settings if suite.model else None
    if settings is not None and settings.model_fields_set:
        # The suite's settings apply to its entry agent; a shallow copy keeps the original.
        loaded = copy.copy(loaded)
        loaded.model_settings = settings
    return loaded


def unknown_tools(suite: Any, agent: Agent) -> None:
    """UsageError for a `tools: overrides:` entry (the suite's or a case's) naming no tool
    the agent can reach: misspelt, it would leave the tool live where it was meant to be
    recorded, stubbed or faulted, and nothing would say so."""
    names = {tool.name for _, tool in reachable_tools(agent)}
    written = [(suite.where("tools"), suite.tools)] + [
        (_case_where(case), case.tools)
        for case in getattr(suite, "cases", ()) or ()
        if getattr(case, "tools", None) is not None
    ]
    for where, config in written:
        for name in config.overrides:
            if name not in names:
                close = difflib.get_close_matches(name, sorted(names), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise UsageError(
                    f"{where}tools.overrides: {name!r} is no tool of agent "
                    f"{suite.agent_ref!r}{hint}; its tools: {', '.join(sorted(names))}"
                )


def _case_where(case: Any) -> str:
    source = getattr(case, "source", None)
    place = f"{source[0]}:{source[1]}: " if source else ""
    return f"{place}case {case.id!r}: "


def agent_only_settings(suite: Any, *, command: bool = False) -> str:
    """The keys of `suite` that its target cannot honour, set by the suite: a function's MCP
    servers follow `tools:` (reached through its target context); a command's cannot."""
    keys = []
    model = suite.model
    if model is not None and model.settings is not None and model.settings.model_fields_set:
        keys.append("model.settings")
    if command and suite.tools.model_fields_set:
        keys.append("tools (replay policies)")
    if getattr(suite, "serve", None):
        keys.append("serve")
    return " and ".join(keys)


def missing_requirements(suite: Any) -> str | None:
    """Why the suite cannot run here (a module its agent needs is not installed, a program
    not on PATH, a file not in its folder), or None."""
    modules, programs, files = [], [], []
    for entry in getattr(suite, "requires", ()) or ():
        kind, _, name = entry.partition(":")
        if kind == "program" and name:
            programs += [] if shutil.which(name) else [f"{name} on PATH"]
        elif kind == "file" and name:
            files += [] if (suite.path / name).exists() else [name]
        elif not _installed(entry):
            modules.append(entry)
    needs = [*programs, *_missing_files(files, suite.path)]
    if modules:
        needs.append(
            f"{', '.join(modules)}, not installed here (agentbench's own suites: "
            "pip install 'agentbench[frameworks,mcp]')"
        )
    return f"suite {suite.name!r} needs {'; '.join(needs)}" if needs else None


def _missing_files(names: list[str], folder: Path) -> list[str]:
    """The files a suite lacks, with how to make them where that can be told (a Node
    package's: `npm ci`)."""
    try:
        shown = folder.resolve().relative_to(Path.cwd())
    except ValueError:
        shown = folder
    packages = [n for n in names if n.startswith("node_modules")]
    if not (packages and (folder / "package-lock.json").is_file()):
        packages = []
    others = [n for n in names if n not in packages]
    return [
        *([f"{', '.join(packages)}: run `npm ci` in {shown}"] if packages else []),
        *([f"{', '.join(others)}, not in {shown}"] if others else []),
    ]


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package that is missing or broken
        return False


@dataclass(frozen=True)
class SkippedSuite:
    """Stands for the agent of a suite that cannot run here: each case is skipped with why."""

    reason: str


def run_setup(suite: Any) -> None:
    """Call the suite's `setup:` function, if it has one; whatever it raises is a suite error."""
    if not suite.setup:
        return
    function = suite.load_object(suite.setup, what="setup")
    try:
        function()
    except (Exception, SystemExit) as exc:
        raise UsageError(
            f"{suite.where('setup')}setup: {suite.setup}() raised {type(exc).__name__}: "
            f"{one_line(exc)}"
        ) from exc


class Harness:
    """Runs suites into one eval."""

    def __init__(
        self,
        store: Any,
        options: HarnessOptions,
        progress: Progress | None = None,
        executor: Executor | None = None,
    ) -> None:
        self.store = store
        self.options = options
        self._plan: tuple[list[Any], list[tuple[Any, Any, int]]] | None = None
        self.progress = progress
        self.executor = executor or LocalExecutor()
        # How far `run` got, for an interrupted command to say: the eval is stored (so it can
        # be resumed), and how many of its trials are.
        self.eval_started = False
        self.finished_trials = 0
        # Scores, reasons and drifts quote the current run (its requests, tool arguments and
        # results): they are redacted once here, with the store's rules, so every output
        # built from a trial's outcome — results rows, JUnit, summaries, reports — is clean.
        self.redactor = Redactor(getattr(store, "redaction", None) or RedactionRules())
        if options.record_mode is RecordMode.ALL and not options.live:
            raise UsageError(
                "--record-mode all records every case anew, which calls the model for every "
                "call: add --live"
            )
        if options.record_mode is RecordMode.NEW_EPISODES and options.live:
            raise UsageError(
                "--live calls the model for every call and reads no cassette, and --record-mode "
                "new_episodes replays each cassette and records only the calls beyond it; drop "
                "--live for new_episodes (it still needs a model endpoint for those calls)"
            )
        if options.live_from_divergence and options.live:
            raise UsageError(
                "--live-from-divergence replays each case up to its first divergence and "
                "--live replays nothing; give one"
            )
        if options.live_from_divergence and options.strict:
            raise UsageError(
                "--live-from-divergence continues a case live at its first drifted request and "
                "--strict stops it there; give one"
            )

    def check_live_model(self, suites: Sequence[Any]) -> None:
        """With --live, --live-from-divergence or a record mode that records, every suite must
        have a model to call: a name (--model or the suite's `model: name`) and an endpoint
        (--base-url, the suite's `model: base_url`, OPENAI_BASE_URL, or OPENAI_API_KEY for
        OpenAI's)."""
        options = self.options
        if options.live:
            why = "--live calls a live model for every case"
        elif options.live_from_divergence:
            why = "--live-from-divergence continues diverged cases with a live model"
        elif options.record_mode is RecordMode.ONCE:
            why = "--record-mode once records the cases without a cassette with a live model"
        elif options.record_mode is RecordMode.NEW_EPISODES:
            why = "--record-mode new_episodes records the calls beyond each cassette live"
        else:
            return
        for suite in suites:
            missing = missing_live_model(suite.model, options)
            if missing is not None:
                raise UsageError(f"{why}; suite {suite.name!r} has {missing}")

    def planned(self, suites: Sequence[Any]) -> list[tuple[Any, Any, int]]:
        """The (suite, case, trial) this eval runs: the selected ones, of this shard only. A
        loaded suite's case stands here as its `CaseBrief` (what planning reads of it): the
        case itself is read when its trial runs, so planning holds ~200 bytes a case. Made
        once for the same suites: `run` counts the trials first (its progress bar), and a
        shard's plan reads every cassette of the suites for its weights."""
        if (
            self._plan is not None
            and len(self._plan[0]) == len(suites)
            and all(map(operator.is_, self._plan[0], suites))
        ):
            return self._plan[1]
        plan = self._plan_for(suites)
        self._plan = (list(suites), plan)
        return plan

    def _plan_for(self, suites: Sequence[Any]) -> list[tuple[Any, Any, int]]:
        trials = [
            (suite, case, trial)
            for suite in suites
            for case in _plannable(suite)
            if selected(case, suite, self.options.filters)
            for trial in range(1, (self.options.trials or suite.trials_for(case)) + 1)
        ]
        shard = self.options.shard
        if shard is None:
            return trials
        weights: dict[tuple[str, str], int] = {}

        def weight(item: tuple[Any, Any, int]) -> int:
            suite, case, _ = item
            key = (suite.name, case.id)
            if key not in weights:
                weights[key] = recorded_calls(suite.cassette_for(case))
            return weights[key]

        return shard.pick(trials, name=lambda item: trial_name(*item), weight=weight)

    def planned_trials(self, suites: Sequence[Any]) -> int:
        return len(self.planned(suites))

    def eval_id_for(self, suites: Sequence[Any], version: str | None) -> str:
        options = self.options
        if options.resume or options.eval_id:
            return options.resume or options.eval_id  # type: ignore[return-value]
        if options.shard is not None:
            return shared_eval_id(version, options.shard, suites)
        return new_eval_id()

    async def run(self, suites: Sequence[Any], suite_errors: Sequence[str] = ()) -> EvalRun:
        version = code_version()
        eval_id = self.eval_id_for(suites, version)
        spool = OutcomeSpool()
        run = EvalRun(eval_id, spool, suite_errors=list(suite_errors), code_version=version)
        try:
            await self._fill(run, suites)
        except BaseException:
            # The eval ends here (an infrastructure error, a store that refuses writes,
            # Ctrl-C): its spool file is closed now, not left to whichever garbage collection
            # finds the traceback's frames.
            spool.close()
            raise
        return run

    async def _fill(self, run: EvalRun, suites: Sequence[Any]) -> None:
        """Every planned trial of `suites` run (or resumed) into `run`, the eval kept."""
        options, eval_id = self.options, run.eval_id
        planned = self.planned(suites)
        done: set[tuple[str, str, int]] = set()
        if options.resume:
            done = self._resumed(eval_id, run, planned)
        self.finished_trials = len(done)
        self.check_live_model(suites)
        results_store.start_eval(self.store, run, suites, options, planned=len(planned))
        self.eval_started = True
        self._writer = results_store.ResultWriter(self.store, eval_id)
        agents: dict[str, Agent | CallableTarget | SkippedSuite | None] = {}
        for suite in suites:
            skip = missing_requirements(suite)
            if skip is not None:
                agents[suite.name] = SkippedSuite(skip)
                continue
            try:
                # Setup first: it builds what the agent's module may open when imported.
                run_setup(suite)
                agents[suite.name] = agent_for(suite)
            except AgentbenchError as exc:  # the suite's problem; the other suites still run
                agents[suite.name] = None
                run.suite_errors.append(str(exc))
        # Replayed, each trial reads its case's cassette: a first run parses them meanwhile.
        cassettes = (
            []
            if options.live
            else (s.cassette_for(c) for s, c, t in planned if (s.name, c.id, t) not in done)
        )
        try:
            with cassette_cache.prefetching(cassettes):
                await self._run_queued(self._queued(planned, agents, done), run)
        finally:
            self._writer.flush()  # interrupted or not, every finished trial is kept
        run.outcomes.seal()
        results_store.finish_eval(self.store, run)

    def _resumed(
        self, eval_id: str, run: EvalRun, planned: Sequence[tuple[Any, Any, int]]
    ) -> set[tuple[str, str, int]]:
        """The planned trials `--resume` takes from the stored eval, spooled into `run` as
        they are read (only their keys are kept, to skip them)."""
        wanted = {(suite.name, case.id, trial) for suite, case, trial in planned}
        done: set[tuple[str, str, int]] = set()
        stored = False
        for outcome in results_store.iter_stored_outcomes(self.store, eval_id):
            stored = True
            key = (outcome.suite, outcome.case_id, outcome.trial)
            if key in wanted:
                run.outcomes.append(outcome)
                done.add(key)
        if not stored and not results_store.eval_exists(self.store, eval_id):
            raise UsageError(f"--resume {eval_id}: no such eval in {self.store.path}")
        run.resumed = len(done)
        return done

    @staticmethod
    def _queued(
        planned: Sequence[tuple[Any, Any, int]],
        agents: dict[str, Agent | None],
        done: set[tuple[str, str, int]],
    ) -> Iterator[tuple[Any, Agent, Any, int]]:
        """The trials still to run, made as the executor takes them (each case read from its
        suite's files now, not before)."""
        for suite, case, trial in planned:
            agent = agents[suite.name]
            if agent is not None and (suite.name, case.id, trial) not in done:
                if isinstance(case, CaseBrief):
                    case = suite.cases[case.index]
                yield (suite, agent, case, trial)

    async def _run_queued(
        self, queued: Iterator[tuple[Any, Agent, Any, int]], run: EvalRun
    ) -> None:
        """Run the trials on the executor; keep each result as its trial finishes."""

        def finished(outcome: TrialOutcome) -> None:
            run.outcomes.append(outcome)
            self._writer.add(outcome)
            self.finished_trials += 1
            if self.progress is not None:
                self.progress(outcome)

        await self.executor.run(self, queued, run.eval_id, finished)

    async def run_trial(
        self, suite: Any, agent: Agent, case: Any, trial: int = 1, *, eval_id: str | None = None
    ) -> TrialOutcome:
        """Run and score one trial of one case (the pytest plugin calls this per item)."""
        source = f"{case.source[0]}:{case.source[1]}" if case.source else None
        base = {
            "suite": suite.name,
            "case_id": case.id,
            "trial": trial,
            "tags": list(case.tags),
            "source": source,
        }
        redact = self.redactor
        if case.skip:
            return TrialOutcome(**base, status="skipped", score=0.0, error=redact.text(case.skip))
        if isinstance(agent, SkippedSuite):
            return TrialOutcome(**base, status="skipped", score=0.0, error=agent.reason)
        options = self.options
        cassette = suite.cassette_for(case)
        plan = CasePlan(
            suite=suite.name,
            case_id=case.id,
            agent=agent,
            turns=case.turns,
            context=case.run_context(),
            cassette=cassette,
            record_mode=options.record_mode,
            tools=(
                case.tools.over(suite.tools.policies())
                if case.tools is not None
                else suite.tools.policies()
            ),
            live=live_factory(suite.model, options),
            strict=options.strict,
            store=(
                self.store.with_labels(eval_id=eval_id, case_id=case.id, trial=trial)
                if self.store is not None
                else None
            ),
            record=trial == 1,
            agent_ref=suite.agent_ref,
            suite_dir=suite.path,
            live_from_divergence=options.live_from_divergence,
            always_live=options.live,
            served=Served.of(getattr(suite, "serve", None), getattr(case, "serve", None)),
        )
        try:
            outcome = await run_case(plan)
        except CaseSetupError as exc:
            return TrialOutcome(
                **base,
                status="error",
                score=0.0,
                error=redact.text(str(exc)),
                live_model_failed=isinstance(exc, LiveModelError),
            )
        # What the trial's runs learned is secret (a `password` argument the output repeats)
        # is masked in what is kept of the trial too: scores' reasons, drifts, divergences.
        learned = getattr(plan.store, "redactor", None)
        if learned is not None and learned.learned:
            redact = learned
        usage = outcome.usage
        pricing = suite.model.pricing if suite.model else None
        cost = pricing.cost(usage) if pricing is not None else None
        expectations = suite.expectations_for(case)
        judge = JudgeRecorder.for_case(
            suite, case, options, cassette.with_suffix(".judge.yaml"), expectations
        )
        context = ScoreContext.from_runs(
            case.id,
            case.input if case.input is not None else case.inputs,
            outcome.turns,
            duration_ms=outcome.duration_ms,
            cost_usd=cost,
            judge=judge.model if judge else None,
            steps=outcome.steps,  # the trajectory the divergences are found in, made once
            replayed=outcome.replayed,
        )
        root = suite.root  # once: for a suite loaded by a relative path it asks the OS
        scorers = [spec.build(base_dir=root) for spec in expectations]
        try:
            scores = await score_all(scorers, context)
        finally:
            if judge is not None:
                await judge.aclose()
        # Change values carry the current request text: redacted before anything keeps them.
        drifts = redact.value([d.as_dict() for d in outcome.located_drifts()])
        drift_reason = outcome.drift_reason()
        drift_reason = None if drift_reason is None else redact.text(drift_reason)
        diverged_at = redact.value(outcome.diverged_at())
        scores += _divergence_scores(drift_reason, drifts, diverged_at, options)
        if judge is not None:
            judge.save(record=trial == 1)
        passed = all(s.passed for s in scores)
        value = sum(s.value for s in scores) / len(scores) if scores else 1.0
        status = "passed" if passed else "failed"
        if case.xfail:
            status = "xpassed" if passed else "xfailed"
        final = outcome.result
        return TrialOutcome(
            **base,
            status=status,
            score=value,
            scores=results_store.redacted_rows([_score_row(s) for s in scores], redact),
            run_id=(final.runs or [final])[0].run_id if outcome.turns else None,
            duration_ms=outcome.duration_ms,
            tokens=usage.total_tokens,
            cost_usd=cost,
            error=redact.text(case.xfail) if status == "xfailed" else None,
            drifts=drifts,
            divergences=redact.value(
                [d.as_dict() for d in outcome.divergences()[:MAX_DIVERGENCES]]
            ),
            turn_runs=[(t.runs or [t])[0].run_id for t in outcome.turns]
            if len(outcome.turns) > 1
            else [],
            diverged_at=diverged_at,
        )


def _divergence_scores(
    drift_reason: str | None,
    drifts: list[dict[str, Any]],
    diverged_at: dict[str, Any] | None,
    options: HarnessOptions,
) -> list[Score]:
    """What a divergence from the recording does to the verdict.

    Continued live, the scorers judged real answers: the drift is reported, not failed. Else
    the drift fails the trial (`request_drift`) unless --allow-drift; even then, a trial that
    went on with recorded answers to requests the code no longer sends cannot pass — those
    answers are counterfactual, so whatever the scorers made of them is not evidence.
    """
    if diverged_at is not None and diverged_at.get("live_from"):
        return []
    if drift_reason is not None and not options.allow_drift:
        return [
            Score(
                name="request_drift",
                value=0.0,
                passed=False,
                reason=drift_reason,
                details={"drifts": drifts},
            )
        ]
    if diverged_at is not None and not diverged_at.get("stopped"):
        return [
            Score(
                name="diverged",
                value=0.0,
                passed=False,
                reason=(
                    f"{divergence_verdict(diverged_at)} ({diverged_at['cause']}); the other "
                    "scores judged recorded answers to requests the code no longer sends, "
                    "so they are not evidence — score the real continuation with "
                    "--live-from-divergence, or re-record"
                ),
            )
        ]
    return []


def _score_row(score: Score) -> dict[str, Any]:
    """A score as stored; request drift keeps where and what changed, for comparisons."""
    row = {"name": score.name, "value": score.value, "passed": score.passed, "reason": score.reason}
    if score.name == "request_drift" and score.details.get("drifts"):
        row["drifts"] = score.details["drifts"]
    return row
