"""`agentbench promote RUN_ID --suite golden/NAME`: a stored run becomes a golden case.

The run (and the runs it handed off to) is converted to a cassette in the suite's cassette
folder, and a case is appended to the suite's `cases/promoted.yaml` with expectations drawn
from what the run did: its stop reason, the tools it called and its final output. The suite
is loaded again afterwards; if the new case does not validate, nothing is kept.

Expectations copied from a run are only as good as the run, so a run handed off from another
is promoted from the root of its conversation (the suite's agent starts there), and a run that
did not finish, failed its eval case or had request drift is refused unless `--force` is given.

A run imported from a trace (`traces import-otel`) bears the name its service had; its steps
are recorded under the name of the suite's agent (an agentbench `Agent`, or the user's own
function: a boundary target), which replays it, and the command says which request fields
the trace did not record (replay does not compare them).
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
import duckdb
import orjson
import yaml

from agentbench.commands.traces import open_store, store_options
from agentbench.errors import UsageError, one_line
from agentbench.evals.comparing.baseline import git
from agentbench.evals.suites.dataset import load_suite
from agentbench.evals.suites.suite_files import SUITE_FILE
from agentbench.evals.suites.suite_models import Suite, repository_root
from agentbench.replay.convert import cassette_from_store
from agentbench.replay.drift import TraceSource
from agentbench.trace.storage import queries
from agentbench.trace.store import TraceStore

PROMOTED = Path("cases") / "promoted.yaml"
UNFINISHED = ("incomplete", "error", "cancelled")  # run statuses with no whole behaviour to copy
GOOD_RESULTS = ("passed", "xpassed")
# Every run of the conversation that starts at the root: the runs it handed off to, and theirs.
_CONVERSATION = """
WITH RECURSIVE tree(run_id) AS (
    SELECT CAST(? AS VARCHAR)
    UNION
    SELECT runs.run_id FROM runs JOIN tree ON runs.parent_run_id = tree.run_id
)
SELECT run_id, agent, status, stop_reason, error, not_replayable, model, origin FROM runs
WHERE run_id IN (SELECT run_id FROM tree) ORDER BY started_at, run_id
"""


@dataclass
class StoredConversation:
    """What the store says about the run asked for: its root, its runs, its eval result."""

    asked: str
    root: str
    runs: list[dict[str, Any]] = field(default_factory=list)
    result: dict[str, Any] | None = None  # the newest eval result of the run or its root
    missing_parent: str | None = None  # a parent the store does not hold (a partial import)

    def problems(self) -> list[str]:
        """Why expectations drawn from this conversation may be wrong; empty when sound."""
        found = [
            f"run {run['run_id']} ({run['agent']}) did not finish (status {run['status']}"
            + (f": {_error_text(run['error'])}" if run["error"] else "")
            + "), so the case would expect half a run"
            for run in self.runs
            if run["status"] in UNFINISHED
        ]
        if self.result is not None:
            result = self.result
            where = (
                f"eval {result['eval_id']}, case {result['suite']}/{result['case_id']}, "
                f"trial {result['trial']}"
            )
            failure = _first_failure(result)
            if result["status"] not in GOOD_RESULTS and failure is not None:
                found.append(
                    f"it {result['status']} its case ({where}): {failure}; the new case "
                    "would expect that behaviour, which may also be a replayed recording "
                    "rather than the agent's own"
                )
            if (drift := _drift(result)) is not None:
                found.append(
                    f"its case had request drift ({where}): {drift}; the recorded answers "
                    "were served to different requests, so they are not the agent's behaviour"
                )
        return found


def read_conversation(store: TraceStore, run_id: str) -> StoredConversation:
    """The run `run_id` names (an id or unique prefix), walked up to its root."""
    with store.reading() as conn:
        asked = queries.resolve_run_id(conn, run_id, store.path)
        found = StoredConversation(asked=asked, root=asked)
        seen = {asked}  # a damaged store could link runs in a circle
        while (parent := _parent(conn, found.root)) is not None and parent not in seen:
            if not conn.execute("SELECT 1 FROM runs WHERE run_id = ?", [parent]).fetchone():
                found.missing_parent = parent
                break
            seen.add(parent)
            found.root = parent
        found.runs = queries.fetch(conn, _CONVERSATION, [found.root])
        found.result = _result_of(conn, asked, found.root)
    return found


def _result_of(conn: duckdb.DuckDBPyConnection, asked: str, root: str) -> dict[str, Any] | None:
    """The newest eval result whose run is `asked` or `root`, or whose multi-turn case had
    `root` as the root of an earlier turn (`turn_runs` in its details)."""
    sql = (
        "SELECT * FROM results WHERE run_id IN (?, ?) OR contains(coalesce(details, ''), ?) "
        "ORDER BY recorded_at DESC"
    )
    for row in queries.fetch(conn, sql, [asked, root, f'"{root}"']):
        row["details"] = orjson.loads(row.get("details") or "{}")
        if row["run_id"] in (asked, root) or root in row["details"].get("turn_runs", ()):
            return row
    return None


def _parent(conn: duckdb.DuckDBPyConnection, run_id: str) -> str | None:
    row = conn.execute("SELECT parent_run_id FROM runs WHERE run_id = ?", [run_id]).fetchone()
    return str(row[0]) if row and row[0] else None


def _error_text(stored: str) -> str:
    """A run's stored error (JSON: type, message, step) as "ModelError: gateway down"."""
    try:
        error = orjson.loads(stored)
    except orjson.JSONDecodeError:
        return stored
    if isinstance(error, dict) and error.get("message"):
        return f"{error.get('type') or 'error'}: {error['message']}"
    return stored


def _first_failure(result: dict[str, Any]) -> str | None:
    """The first reason the case failed other than request drift (reported on its own, as is
    `diverged`: the drift's verdict under --allow-drift)."""
    scores = orjson.loads(result["scores"] or "[]")
    drift_scores = ("request_drift", "diverged")
    for score in scores:
        if not score.get("passed", True) and score.get("name") not in drift_scores:
            return f"{score.get('name')}: {score.get('reason')}"
    if result["error"]:
        return str(result["error"])
    drifted = any(score.get("name") in drift_scores for score in scores)
    return None if drifted else f"status {result['status']}"


def _drift(result: dict[str, Any]) -> str | None:
    """The request drift a result recorded: its failing score, or (with --allow-drift,
    where drift passes) the drifts kept in its details."""
    for score in orjson.loads(result["scores"] or "[]"):
        if score.get("name") == "request_drift":
            return str(score.get("reason"))
    drifts = result["details"].get("drifts") or []
    if not drifts:
        return None
    first = drifts[0]
    changed = ", ".join(c.get("path", "?") for c in first.get("changes", ())[:3]) or "the request"
    more = f"; {len(drifts) - 1} more drifted call(s)" if len(drifts) > 1 else ""
    return f"model call #{first.get('call')} ({first.get('agent')}) changed {changed}{more}"


def _suite_for(folder: Path, agent_ref: str | None, stored: StoredConversation) -> Suite:
    """The suite to add the case to; with --agent and no suite in `folder`, a new one."""
    made = agent_ref is not None and not (folder / SUITE_FILE).exists()
    if not made:
        return target_suite(folder, agent_ref)
    assert agent_ref is not None
    if folder.is_dir() and any(folder.glob(f"*/{SUITE_FILE}")):
        target_suite(folder)  # says it is a folder of suites
    new_suite(folder, agent_ref, stored.runs[0].get("model") if stored.runs else None)
    click.echo(f"new suite {folder.name} in {folder} for agent {agent_ref}")
    warning = _outside_repository(agent_ref, folder)
    if warning:
        click.echo(warning, err=True)
    try:
        return target_suite(folder)
    except UsageError:
        (folder / SUITE_FILE).unlink()
        raise


def new_suite(folder: Path, agent_ref: str, model: str | None) -> None:
    """A suite folder for promoted cases of `agent_ref` (cassettes kept inside it)."""
    folder.mkdir(parents=True, exist_ok=True)
    agent = _suite_agent(agent_ref, folder)  # as the suite names it, in both places
    suite = {
        "name": folder.name,
        "description": f"Cases promoted from stored runs, replayed against {agent}.",
        "agent": agent,
        "model": {"name": model or "recorded"},
        "cassettes": "cassettes",
    }
    (folder / SUITE_FILE).write_text(yaml.safe_dump(suite, sort_keys=False, allow_unicode=True))


def _suite_agent(agent_ref: str, folder: Path) -> str:
    """The agent as the suite names it: a file path is resolved from the suite's folder, so
    one given relative to where the command ran (or absolute) is rewritten relative to the
    suite, for the suite to work in any checkout of its repository. Only a file outside the
    repository holding the suite stays absolute (`_outside_repository` warns of it)."""
    module, _, attribute = agent_ref.rpartition(":")
    if not module.endswith(".py"):
        return agent_ref
    path = Path(module).resolve()
    if not _inside(path, _repository_of(folder)):
        return f"{path}:{attribute}"
    return f"{Path(os.path.relpath(path, folder.resolve())).as_posix()}:{attribute}"


def _repository_of(folder: Path) -> Path:
    """The checkout holding the suite folder: git's top level, else the suite's repository
    root (the parent of the folder holding the suite folders)."""
    start = folder.resolve()
    while not start.exists():
        start = start.parent
    top = git(["rev-parse", "--show-toplevel"], start)
    return Path(top.strip()).resolve() if top else repository_root(folder)


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _outside_repository(agent_ref: str, folder: Path) -> str | None:
    """A warning when the suite will name its agent by an absolute path (this machine only)."""
    module = _suite_agent(agent_ref, folder).rpartition(":")[0]
    if not (module.endswith(".py") and Path(module).is_absolute()):
        return None
    return (
        f"warning: the agent's file is outside the repository holding {folder} "
        f"({_repository_of(folder)}), so suite.yaml names it by its absolute path and the "
        "suite runs only on this machine; move the agent into the repository to share it"
    )


def target_suite(folder: Path, agent_ref: str | None = None) -> Suite:
    """The suite in `folder`, or one line saying why `folder` is not a suite folder."""
    if agent_ref is not None and (folder / SUITE_FILE).is_file():
        suite = load_suite(folder)
        if suite.agent not in (agent_ref, _suite_agent(agent_ref, folder)):
            raise UsageError(
                f"--agent {agent_ref}: suite {suite.name!r} in {folder} already runs agent "
                f"{suite.agent_ref}; leave --agent out, or promote into a new folder"
            )
        return suite
    if not folder.is_dir():
        raise UsageError(
            f"--suite {folder}: no such folder (expected a suite folder holding {SUITE_FILE}, "
            "such as golden/sre)"
        )
    if not (folder / SUITE_FILE).is_file():
        below = sorted(str(p.parent) for p in folder.glob(f"*/{SUITE_FILE}"))
        if below:
            raise UsageError(
                f"--suite {folder}: not a suite folder but one holding suites "
                f"({', '.join(below[:6])}{', …' if len(below) > 6 else ''}); name the one to "
                "add the case to"
            )
        raise UsageError(f"--suite {folder}: no {SUITE_FILE} in this folder (not a suite folder)")
    return load_suite(folder)


def case_entry(case_id: str, info: dict[str, Any]) -> dict[str, Any]:
    """A case for the recorded session, expecting what it did."""
    expect: list[dict[str, Any]] = [{"stop_reason": info.get("stop_reason") or "completed"}]
    tools = []
    for result in info.get("tool_results", ()):
        if result["tool"] not in tools and not result["tool"].startswith("transfer_to_"):
            tools.append(result["tool"])
    expect += [{"tool_called": {"name": tool}} for tool in tools]
    output = info.get("output")
    if isinstance(output, str) and output:
        expect.append({"output_equals": {"value": output, "strip": True}})
    elif output is not None:
        expect.append({"output_equals": {"value": orjson.dumps(output).decode()}})
    entry: dict[str, Any] = {
        "id": case_id,
        "description": f"Promoted from stored run {info.get('source_run')}.",
        "input": info.get("input"),
    }
    session = (info.get("context") or {}).get("session") or {}
    if session:
        entry["context"] = session
    entry["tags"] = ["promoted"]
    entry["expect"] = expect
    return entry


def _write_whole(path: Path, text: str) -> None:
    """Write `text` to `path` through a file beside it, renamed when whole: a disk that
    fills half-way leaves the suite's cases file as it was (the error names the file)."""
    partial = path.with_name(f".{path.name}.tmp")
    try:
        partial.write_text(text)
        partial.replace(path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)
        raise OSError(exc.errno, exc.strerror, str(path)) from None


@click.command(
    epilog="""\b
Examples:
  agentbench promote run_630e997e4ac54a5a8c591e404b948c8e --suite golden/sre
  agentbench promote run_630e997e4ac54a5a8c591e404b948c8e --suite golden/sre --id disk-full \\
      --db prod-traces.duckdb
""",
)
@click.argument("run_id")
@click.option(
    "--suite",
    "suite_dir",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="The golden suite folder to add the case to.",
)
@click.option("--id", "case_id", default=None, help="Case id (default: promoted-<run id>).")
@click.option(
    "--agent",
    "agent_ref",
    default=None,
    metavar="MODULE:ATTR",
    help="The agent the suite replays; with a folder that holds no suite yet, a new suite for "
    "it is made there (for runs recorded elsewhere, such as imported OpenTelemetry traces).",
)
@click.option(
    "--force",
    is_flag=True,
    help="Promote even a run that did not finish, failed its eval case or had request drift "
    "(its expectations then copy that behaviour; check them).",
)
@store_options
def promote(
    run_id: str,
    suite_dir: Path,
    case_id: str | None,
    agent_ref: str | None,
    force: bool,
    db: Path | None,
    wait_s: float,
) -> int:
    """Turn stored run RUN_ID into a golden case of the suite."""
    store = open_store(db, wait_s, existing=True)
    stored = read_conversation(store, run_id)
    blocked = next((run for run in stored.runs if run.get("not_replayable")), None)
    if blocked is not None:  # no --force: without its messages there is nothing to replay
        raise UsageError(f"run {blocked['run_id']} cannot be promoted: {blocked['not_replayable']}")
    suite = _suite_for(suite_dir, agent_ref, stored)
    if stored.missing_parent is not None:
        click.echo(
            f"warning: run {stored.root} was handed off from {stored.missing_parent}, which is "
            f"not in {store.path}; promoting from {stored.root}",
            err=True,
        )
    elif stored.root != stored.asked:
        click.echo(
            f"run {stored.asked} was handed off from {stored.root}; promoting the conversation "
            f"from its root {stored.root}"
        )
    problems = stored.problems()
    if problems and not force:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise UsageError(
            f"refusing to promote run {stored.root}: {problems[0]}{more}; pass --force to "
            "promote it anyway"
        )
    for problem in problems:
        click.echo(f"warning: promoting anyway (--force): {problem}", err=True)
    imported = any(run.get("origin") for run in stored.runs)
    agent = _agent_name(suite) if imported else None
    cassette = cassette_from_store(store, stored.root, agent=agent)
    info = cassette.info
    case_id = case_id or f"promoted-{re.sub(r'[^A-Za-z0-9]', '', info['source_run'])[-10:]}"
    if any(case.id == case_id for case in suite.cases):
        raise UsageError(f"suite {suite.name!r} already has a case {case_id!r}; pass --id")
    cassette_path = (suite.cassette_dir / f"{case_id}.yaml").resolve()
    if cassette_path.exists():  # another suite's case, or a case file edited by hand
        raise UsageError(f"cassette {cassette_path} already exists; pass another --id")
    cases_file = suite_dir / PROMOTED
    before = cases_file.read_text() if cases_file.exists() else None
    text = yaml.safe_dump([case_entry(case_id, info)], sort_keys=False, allow_unicode=True)
    cases_file.parent.mkdir(parents=True, exist_ok=True)
    _write_whole(cases_file, (before.rstrip() + "\n\n" if before else "") + text)
    try:
        reloaded = load_suite(suite_dir)
        # As the harness writes it: `agentbench replay CASSETTE` then finds the suite, and
        # so the agent, from the cassette alone.
        folder = os.path.relpath(suite_dir.resolve(), cassette_path.parent)
        cassette.update_info(suite=reloaded.name, case=case_id, suite_dir=Path(folder).as_posix())
        cassette.save(cassette_path)  # a full disk: no case is left without its cassette
    except (UsageError, OSError):
        if before is None:
            cases_file.unlink()
        else:
            _write_whole(cases_file, before)
        raise
    source = next((c.source for c in reloaded.cases if c.id == case_id), None)
    at = f"{source[0].resolve()}:{source[1]}" if source else str(cases_file.resolve())
    click.echo(f"case {case_id} added to suite {reloaded.name} at {at}")
    click.echo(f"cassette {cassette_path}")
    source = TraceSource.of(info)
    if source is not None and source.recorded_fields is not None:
        click.echo(
            f"the trace recorded only {', '.join(sorted(source.recorded_fields))} of each "
            "request: replay compares those, and not what it could not know (tool "
            "definitions, tool_choice, other settings)"
        )
    return 0


def _agent_name(suite: Suite) -> str | None:
    """The name the suite's agent goes by (an Agent's name, a function's), None with a
    warning when its module cannot be imported here."""
    from agentbench.evals.running.harness import agent_for, run_setup

    try:
        run_setup(suite)  # as `run` does: it builds what the agent's module may open
        return str(agent_for(suite).name)
    except Exception as exc:  # the user's module ran: whatever its import raised
        click.echo(
            f"warning: agent {suite.agent_ref} could not be loaded ({type(exc).__name__}: "
            f"{one_line(exc)}); the case's steps keep the trace's agent name",
            err=True,
        )
        return None
