"""`agentbench replay` and `agentbench diff`: what changed, at which step, and why.

`replay` runs the current code against a recorded session — a cassette file or a stored run
— and exits 0 when behaviour is unchanged, 1 when it diverged. `diff` aligns two stored runs
step by step, or compares two stored evals case by case (exit 1 when the regression gate
fails). Both print a one-screen report, or JSON with `--json`.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import click
import orjson

from agentbench.boundary.target import CallableTarget
from agentbench.commands.traces import open_store, reports_dir, store_options
from agentbench.errors import UsageError
from agentbench.evals.comparing.compare import compare_evals
from agentbench.evals.comparing.compare_text import comparison_text
from agentbench.evals.running.harness import (
    HarnessOptions,
    agent_for,
    live_factory,
    missing_live_model,
    run_setup,
)
from agentbench.evals.storage import results_store
from agentbench.evals.suites.dataset import load_suite
from agentbench.evals.suites.suite_models import Suite
from agentbench.loading import load_object
from agentbench.replay.cassette import Cassette, RecordMode
from agentbench.replay.convert import conversation, stored_trajectory
from agentbench.replay.diff import CallRequest, align, request_divergences, with_request_drift
from agentbench.replay.replayer import (
    RecordedAgent,
    Replayer,
    ReplayReport,
    loaded_from,
    recorded_agent,
    suite_folder,
)
from agentbench.replay.tool_policy import ToolPolicies
from agentbench.runtime.agent import Agent
from agentbench.runtime.models import ChatModel
from agentbench.trace.errors import NoSuchRunError
from agentbench.trace.redaction.redactor import Redactor

EXIT_UNCHANGED, EXIT_DIVERGED = 0, 1


def _agent(ref: str | None) -> Agent | Callable[..., Any] | None:
    """What --agent names: an agentbench Agent, or a function (a boundary target)."""
    if ref is None:
        return None
    loaded = load_object(ref, what="agent", search_path=Path.cwd())
    if not isinstance(loaded, Agent) and (not callable(loaded) or isinstance(loaded, type)):
        raise UsageError(
            f"--agent {ref!r} is a {type(loaded).__name__}: name an agentbench Agent or a "
            "function fn(input, target)"
        )
    return loaded


def _suite_of(suite_dir: Path | None, cassette: Cassette | None) -> Suite | None:
    """The suite whose settings the replay applies: --suite, else the one the cassette was
    recorded by (a cassette the harness wrote names its folder, `suite_dir`), else none."""
    if suite_dir is not None:
        return load_suite(suite_dir)
    folder = suite_folder(cassette) if cassette is not None else None
    if folder is not None and (folder / "suite.yaml").is_file():
        return load_suite(folder)
    return None


def _replayed_agent(
    agent: Agent | Callable[..., Any] | None, suite: Suite | None, cassette: Cassette | None
) -> Agent | CallableTarget:
    """The agent to replay, built as `agentbench run` builds it when a suite applies (the
    suite's model settings, its setup run): --agent, else the suite's, else the one the
    cassette names, imported from the cassette's repository. A function is a boundary
    target."""
    if suite is not None:
        run_setup(suite)  # before the agent: it builds what the agent may open at import
        built = agent_for(suite, agent)
        if agent is None and isinstance(suite.agent, str):  # a command runs where it is
            origin = loaded_from(suite.agent, suite.path)
            _note_origin(RecordedAgent(built, suite.agent, suite.root, origin))
        return built
    if isinstance(agent, Agent):
        return agent
    if agent is not None:
        return CallableTarget.of(agent, where="--agent: ")
    assert cassette is not None  # a run id is replayed with --agent or --suite (_check_run_id)
    recorded = recorded_agent(cassette)
    _note_origin(recorded)
    return recorded.agent


def _note_origin(recorded: RecordedAgent) -> None:
    # Another checkout's cassette may import this checkout's code (or an installed copy):
    # the replay is then of that code, which the user should know.
    if recorded.elsewhere:
        click.echo(f"note: {recorded.note()}", err=True)


def _stored_calls(store: Any, run_id: str) -> list[CallRequest]:
    """The rebuilt request of every model call of a stored run and the runs it led to."""
    calls = []
    for trace in conversation(store, run_id):
        requests = store.requests(trace.run.run_id)
        for call in sorted(trace.llm_calls, key=lambda c: c.seq):
            if call.seq in requests:
                calls.append(
                    CallRequest(
                        call.agent or trace.run.agent,  # a boundary target's handoff in a run
                        call.purpose,
                        call.step or 0,
                        requests[call.seq],
                    )
                )
    return calls


def _live_model(
    why: str | None, suite: Suite | None, name: str | None, base_url: str | None
) -> ChatModel | None:
    """The live model `why` needs (None: none is), resolved as `agentbench run` resolves it:
    --model / --base-url, else the suite's `model:`, else OPENAI_MODEL / OPENAI_BASE_URL."""
    if why is None:
        return None
    suite_model = suite.model if suite is not None else None
    options = HarnessOptions(live=True, model=name, base_url=base_url)
    missing = missing_live_model(suite_model, options)
    if missing is not None:
        raise UsageError(f"{why} calls a live model, and there is {missing}")
    make = live_factory(suite_model, options)
    if make is None:  # cannot happen: options.live is set
        raise UsageError(f"{why} calls a live model, and none could be made")
    return make()


async def _closing(work: Awaitable[ReplayReport], live: ChatModel | None) -> ReplayReport:
    """The replay's report; then the live model this command made lets go of its connections,
    which belong to this event loop."""
    try:
        return await work
    finally:
        closer = getattr(live, "aclose", None)
        if closer is not None:
            await closer()


def _emit(data: dict[str, Any] | str, as_json: bool) -> None:
    # Reports can quote prompts and tool results: scrub them like everything else we write.
    redactor = Redactor()
    if as_json:
        click.echo(orjson.dumps(redactor.value(data), option=orjson.OPT_INDENT_2).decode())
    else:
        click.echo(redactor.text(str(data)))


@click.command(
    epilog="""\b
Examples:
  agentbench replay replays/weather.yaml --strict
  agentbench replay run_630e997e --agent myapp.agents:weather --tool search=recorded
  agentbench replay replays/sre/status-prod-eu.yaml --agent golden.sre.agent:sre_agent
  agentbench replay replays/weather.yaml --live-from 2 --base-url http://127.0.0.1:8000/v1 \\
      --model qwen2.5
""",
)
@click.argument("target")
@click.option(
    "--agent",
    "agent_ref",
    help="The agent to replay, as module:attribute: an agentbench Agent or a function "
    "fn(input, target) (a boundary target).",
)
@click.option(
    "--suite",
    "suite_dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="The golden suite whose model settings, setup, tool policies and model apply "
    "[default: the suite the cassette was recorded by, if any].",
)
@click.option("--strict", is_flag=True, help="Treat request drift as a divergence.")
@click.option(
    "--tools",
    "tools_default",
    type=click.Choice(["live", "recorded"]),
    default="live",
    show_default=True,
    help="Default tool policy; with it or --tool, the suite's tool policies are not used.",
)
@click.option(
    "--tool",
    "tool_specs",
    multiple=True,
    metavar="NAME=POLICY",
    help="Per-tool policy: live, recorded, stub:VALUE, fault, fault:timeout.",
)
@click.option(
    "--live-from",
    type=click.IntRange(min=1),
    default=None,
    help="Replay model calls before N, then continue live (a fork).",
)
@click.option(
    "--record-mode",
    type=click.Choice([m.value for m in RecordMode]),
    default="none",
    show_default=True,
    help="none: replay only; once: the same (the recording exists); new_episodes: record the "
    "calls beyond the recording; all: call the model every time and record anew.",
)
@click.option(
    "--model",
    "model_name",
    default=None,
    help="Live model name, for --live-from or --record-mode new_episodes|all "
    "[default: the suite's model: name, then OPENAI_MODEL].",
)
@click.option(
    "--base-url",
    default=None,
    help="Live OpenAI-compatible endpoint; no API key needed "
    "[default: the suite's model: base_url, then OPENAI_BASE_URL].",
)
@click.option(
    "--save",
    "save_to",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Where to write what went live (default: beside the cassette).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@store_options
def replay(
    target: str,
    agent_ref: str | None,
    suite_dir: Path | None,
    strict: bool,
    tools_default: str,
    tool_specs: tuple[str, ...],
    live_from: int | None,
    record_mode: str,
    model_name: str | None,
    base_url: str | None,
    save_to: Path | None,
    as_json: bool,
    db: Path | None,
    wait_s: float,
) -> int:
    """Replay RUN_ID or CASSETTE against the current code; exit 1 if behaviour diverged.

    The suite that applies is --suite, else the one the cassette was recorded by. Its
    model.settings replace the agent's (with --agent too, as `agentbench run` applies
    them), its setup runs, and its tool policies apply unless --tools or --tool is given.
    The agent is --agent, else the suite's, else the one the cassette names; a function
    is a boundary target, replayed through its own model client (its tools are its own:
    --tools and --tool do not apply). The live model
    is --model and --base-url, else the suite's model:, else OPENAI_MODEL and
    OPENAI_BASE_URL (or OPENAI_API_KEY for OpenAI's).
    """
    path = Path(target)
    cassette = Cassette.load(path) if path.is_file() else None
    if cassette is None:
        _check_run_id(target, path)
        if agent_ref is None and suite_dir is None:
            agent_ref = _serving_agent(db, wait_s, target)
    suite = _suite_of(suite_dir, cassette)
    # Checked before any code of the user's runs: a replay that cannot go live is not begun.
    why = f"--live-from {live_from}" if live_from is not None else None
    if why is None and record_mode in ("new_episodes", "all"):
        why = f"--record-mode {record_mode}"
    live_model = _live_model(why, suite, model_name, base_url)
    agent = _replayed_agent(_agent(agent_ref), suite, cassette)
    tools = ToolPolicies.parse(tools_default, tool_specs)
    source = click.get_current_context().get_parameter_source("tools_default")
    told = tool_specs or source is not click.core.ParameterSource.DEFAULT
    if suite is not None and not told:
        tools = suite.tools.policies()  # as `agentbench run` replays the case
    store = open_store(db, wait_s)
    replayer = Replayer(
        agent,
        strict=strict,
        tools=tools,
        live_model=live_model,
        live_from=live_from,
        record_mode=record_mode,
        store=store,
    )
    if cassette is not None:
        work = replayer.replay(cassette, save_to=save_to)
    else:
        work = replayer.replay_run(store, target)
    report = asyncio.run(_closing(work, live_model))
    store.flush()
    _emit(report.as_dict() if as_json else report.render(), as_json)
    return EXIT_DIVERGED if report.diverged else EXIT_UNCHANGED


def _check_run_id(target: str, path: Path) -> None:
    """A TARGET that is no cassette file must be a run id."""
    if path.suffix in (".yaml", ".yml", ".json") or "/" in target or os.sep in target:
        # Written as a path, so meant as a cassette: "no such run id" would mislead.
        raise UsageError(
            f"cassette file {target} does not exist (a TARGET ending in .yaml, .yml or .json, "
            "or containing '/', is a cassette path; a run id is neither)"
        )


def _serving_agent(db: Path | None, wait_s: float, run_id: str) -> str:
    """The agent reference a served run was recorded with (`agentbench serve` stores it), for
    a run id replayed without --agent or --suite."""
    try:
        ref = open_store(db, wait_s, existing=True).run(run_id).run.agent_ref
        why = "it was not served by `agentbench serve`, which stores the agent"
    except UsageError as exc:  # no store, no such run: said after what to do
        ref, why = None, str(exc)
    if ref is None:
        raise UsageError(
            f"{run_id!r} is not a cassette file, so it is read as a run id; pass the agent "
            f"to replay it with --agent module:attribute (or its suite with --suite DIR): {why}"
        )
    click.echo(f"note: replaying with the agent that served the run, {ref}", err=True)
    return ref


@click.command(
    epilog="""\b
Examples:
  agentbench diff run_630e997e run_8950e51f
  agentbench diff eval_20250130T090000_1a2b3c eval_20250131T090000_4d5e6f --json
""",
)
@click.argument("run_a")
@click.argument("run_b")
@click.option("--json", "as_json", is_flag=True, help="Print the differences as JSON.")
@click.option(
    "--budget-pct",
    type=click.FloatRange(min=0),
    default=20.0,
    show_default=True,
    help="Evals: tokens, cost or latency worse by more than this percent is a budget regression.",
)
@click.option(
    "--fail-on-change",
    is_flag=True,
    help="Evals: exit 1 when any case's trajectory differs, scores equal or not (for upgrades "
    "that must not change behaviour).",
)
@click.option(
    "--report-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Evals: where the HTML diff report is written "
    "[default: reports/ at the root of the git checkout].",
)
@store_options
def diff(
    run_a: str,
    run_b: str,
    as_json: bool,
    budget_pct: float,
    fail_on_change: bool,
    report_dir: Path | None,
    db: Path | None,
    wait_s: float,
) -> int:
    """Compare two stored runs (RUN_A RUN_B) or two evals (EVAL_A EVAL_B); exit 1 if they differ.

    For evals, exit 1 means the gate failed: a case passed in EVAL_A and fails in EVAL_B, the
    pass rate dropped significantly, or (with --fail-on-change) a case behaves differently.
    """
    store = open_store(db, wait_s, existing=True)
    evals = [results_store.eval_exists(store, target) for target in (run_a, run_b)]
    if all(evals):
        return _diff_evals(store, run_a, run_b, as_json, budget_pct, report_dir, fail_on_change)
    if any(evals):
        eval_id, other = (run_a, run_b) if evals[0] else (run_b, run_a)
        raise UsageError(
            f"{eval_id} is an eval but {other} is not: diff two evals (EVAL_A EVAL_B) "
            "or two runs (RUN_A RUN_B)"
        )
    try:
        before, after = stored_trajectory(store, run_a), stored_trajectory(store, run_b)
    except NoSuchRunError as exc:  # and no eval either: say both were looked for
        raise exc.naming("eval or run") from None
    # Same steps can still hide a changed prompt or tool schema: compare the requests too.
    drifts = request_divergences(_stored_calls(store, run_a), _stored_calls(store, run_b), after)
    differences = with_request_drift(align(before, after), drifts)
    if as_json:
        _emit({"a": run_a, "b": run_b, "differences": [d.as_dict() for d in differences]}, True)
    else:
        lines = [f"diff {run_a} → {run_b}: {len(before)} and {len(after)} steps"]
        if not differences:
            lines.append("  same behaviour: every step matches")
        else:
            lines.append(f"  first difference — {differences[0].describe()}")
            lines.extend(f"  {d.describe()}".replace("\n", "\n  ") for d in differences[1:10])
            if len(differences) > 10:
                lines.append(f"  … and {len(differences) - 10} more")
        _emit("\n".join(lines), False)
    return EXIT_DIVERGED if differences else EXIT_UNCHANGED


def _diff_evals(
    store: Any,
    baseline: str,
    current: str,
    as_json: bool,
    budget_pct: float,
    report_dir: Path | None,
    fail_on_change: bool = False,
) -> int:
    comparison = compare_evals(
        store, baseline, current, budget_pct=budget_pct, fail_on_change=fail_on_change
    )
    data = comparison.as_dict()
    report = _diff_report(store, data, reports_dir(report_dir))
    if as_json:
        _emit({**data, "report": str(report) if report else None}, True)
    else:
        text = comparison_text(data)
        _emit(text + (f"\nreport: {report}" if report else ""), False)
    return EXIT_DIVERGED if comparison.gate_failed else EXIT_UNCHANGED


def _diff_report(store: Any, data: dict[str, Any], out_dir: Path) -> Path | None:
    """The HTML diff report, when the report package is installed alongside."""
    try:
        from agentbench.report import write_diff_report  # type: ignore[attr-defined]
    except ImportError:
        return None
    try:
        written = write_diff_report(store, data, out_dir)
    except OSError as exc:  # the comparison is the answer; a report we cannot write is a note
        click.echo(f"warning: could not write the HTML diff report to {out_dir}: {exc}", err=True)
        return None
    return Path(written) if written is not None else out_dir
