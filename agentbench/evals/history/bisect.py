"""Find the first commit where one case's behaviour changed: `agentbench bisect`.

The commits from GOOD to BAD (BAD's first-parent line) are searched by halving. A commit is
"changed" when the case, evaluated at that commit, differs from the case at GOOD the way
`compare_evals` sees differences — its result (newly failing, score changed, ...) or, with
equal scores, its trajectory (`behaviour_changed`). Each commit is evaluated once: a stored
eval of that commit (its `code_version`, a clean tree) that holds the case is reused;
otherwise the commit is checked out in a temporary git worktree and `agentbench run SUITE
--filter CASE` runs there into the same store, so the next bisect of the range evaluates
nothing. The answer is the first changed commit, its message, and the first divergence
between it and the commit before it, as `agentbench diff` names it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import yaml

from agentbench.errors import AgentbenchError, UsageError
from agentbench.evals.comparing.case_changes import CaseChange
from agentbench.evals.comparing.compare import compare_evals
from agentbench.evals.history.git_commits import describe_commits, git_text

# One case, offline: a replayed run takes seconds; this bounds a hung one.
PROBE_TIMEOUT_S = 900.0


class BisectError(AgentbenchError):
    """A commit could not be evaluated (its run failed to start or crashed)."""

    exit_code = 3


@dataclass
class Probe:
    """One commit evaluated: which eval holds the case there, and how it compares with GOOD."""

    sha: str
    eval_id: str
    reused: bool
    changed: bool | None = None  # None for GOOD itself
    kind: str | None = None  # the comparison's word for the case: newly_failing, unchanged, ...


@dataclass
class BisectResult:
    suite: str
    case_id: str
    good: str
    bad: str
    commits: int  # commits after GOOD up to BAD, the range searched
    first: str  # the first changed commit
    subject: str
    parent: str  # the commit before it on BAD's first-parent line
    change: CaseChange  # the case at `parent` compared with the case at `first`
    probes: list[Probe] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "suite": self.suite,
            "case_id": self.case_id,
            "good": self.good,
            "bad": self.bad,
            "commits": self.commits,
            "first": self.first,
            "subject": self.subject,
            "parent": self.parent,
            "change": self.change.as_dict(),
            "probes": [p.__dict__ for p in self.probes],
        }


@dataclass
class _Target:
    """What is bisected: the case, and the suite folder (relative to the repository)."""

    case_id: str
    suite_path: str
    suite: str | None = None  # the suite's name, learned from the first eval that ran it


def _normal(path: str) -> str:
    return Path(path).as_posix().strip("/").removeprefix("./")


def bisect(
    store: Any,
    repo: Path,
    case_id: str,
    good_ref: str,
    bad_ref: str,
    suite_path: str,
    *,
    on_probe: Callable[[Probe], None] | None = None,
) -> BisectResult:
    """Search GOOD..BAD for the first commit where `case_id` behaves differently from GOOD."""
    good = _resolve("--good", good_ref, repo)
    bad = _resolve("--bad", bad_ref, repo)
    if good == bad:
        raise UsageError(f"--good {good_ref} and --bad {bad_ref} are the same commit")
    if git_text(["merge-base", "--is-ancestor", good, bad], repo) is None:
        raise UsageError(f"--good {good_ref} ({good[:12]}) is not an ancestor of --bad {bad_ref}")
    line = git_text(["rev-list", "--first-parent", "--reverse", f"{good}..{bad}"], repo) or ""
    chain = [good, *line.split()]
    target = _Target(case_id, _normal(suite_path))
    probes: dict[str, Probe] = {}

    def probe(sha: str) -> Probe:
        if sha not in probes:
            eval_id, reused = _evaluation(store, repo, target, sha)
            found = Probe(sha, eval_id, reused)
            if sha != good:
                change = _case_change(store, probes[good].eval_id, eval_id, target)
                found.kind = change.kind
                found.changed = change.kind != "unchanged"
            probes[sha] = found
            if on_probe is not None:
                on_probe(found)
        return probes[sha]

    probe(good)
    if not probe(bad).changed:
        raise UsageError(
            f"{target.suite}/{case_id} behaves the same at --good {good_ref} and --bad {bad_ref}: "
            "nothing to bisect"
        )
    low, high = 0, len(chain) - 1  # chain[low] behaves as GOOD; chain[high] does not
    while high - low > 1:
        middle = (low + high) // 2
        if probe(chain[middle]).changed:
            high = middle
        else:
            low = middle
    first, parent = chain[high], chain[low]
    change = _case_change(store, probes[parent].eval_id, probes[first].eval_id, target)
    info = describe_commits([first], repo).get(first)
    return BisectResult(
        suite=target.suite or "?",
        case_id=case_id,
        good=good,
        bad=bad,
        commits=len(chain) - 1,
        first=first,
        subject=info.subject if info else "",
        parent=parent,
        change=change,
        probes=[probes[sha] for sha in chain if sha in probes],
    )


def _resolve(flag: str, ref: str, repo: Path) -> str:
    if git_text(["rev-parse", "--git-dir"], repo) is None:
        raise UsageError(f"{flag} {ref}: {repo} is not a git checkout (or git is not installed)")
    sha = git_text(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], repo)
    if not sha:
        raise UsageError(f"{flag} {ref}: no such commit, branch or tag in {repo}")
    return sha


def _case_change(store: Any, before: str, after: str, target: _Target) -> CaseChange:
    comparison = compare_evals(store, before, after)
    for change in comparison.cases:
        if change.case_id == target.case_id and change.suite == target.suite:
            return change
    raise BisectError(
        f"eval {before} or {after} holds no result of {target.suite}/{target.case_id}"
    )


def _evaluation(store: Any, repo: Path, target: _Target, sha: str) -> tuple[str, bool]:
    """The eval of `target` at `sha`: a stored one, else one made now in a worktree."""
    stored = _stored_eval(store, target, sha)
    if stored is not None:
        return stored, True
    eval_id = _run_in_worktree(store, repo, target, sha)
    if target.suite is None:
        target.suite = _suite_of(store, eval_id, target)
    return eval_id, False


def _stored_eval(store: Any, target: _Target, sha: str) -> str | None:
    """The newest finished eval of commit `sha` (a clean tree) that ran the target's suite and
    holds a result of its case."""
    if not store.path.exists():
        return None
    with store.reading() as conn:
        rows = conn.execute(
            "SELECT e.eval_id, e.config, list(DISTINCT r.suite) FROM evals e "
            "JOIN results r ON r.eval_id = e.eval_id AND r.case_id = ? "
            "WHERE e.code_version = ? AND e.status = 'finished' "
            "GROUP BY e.eval_id, e.config, e.started_at ORDER BY e.started_at DESC",
            [target.case_id, sha],
        ).fetchall()
    for eval_id, config, suites in rows:
        paths = (orjson.loads(config).get("suites") if config else None) or {}
        names = [n for n, p in paths.items() if isinstance(p, str) and _related(p, target)]
        if target.suite is not None:
            names = [n for n in names if n == target.suite]
        mine = [n for n in names if n in suites]
        if len(mine) == 1:
            target.suite = target.suite or mine[0]
            return str(eval_id)
    return None


def _related(path: str, target: _Target) -> bool:
    """The suite run from `path` is (or is inside, or holds) the folder being bisected."""
    path, wanted = _normal(path), target.suite_path
    return path == wanted or path.startswith(wanted + "/") or wanted.startswith(path + "/")


def _suite_of(store: Any, eval_id: str, target: _Target) -> str:
    with store.reading() as conn:
        suites = [
            r[0]
            for r in conn.execute(
                "SELECT DISTINCT suite FROM results WHERE eval_id = ? AND case_id = ?",
                [eval_id, target.case_id],
            ).fetchall()
        ]
    if len(suites) != 1:
        raise UsageError(
            f"case {target.case_id!r} is in {len(suites)} suites under {target.suite_path} "
            f"({', '.join(sorted(suites)) or 'none'}): name one with --suite PATH"
        )
    return str(suites[0])


def _run_in_worktree(store: Any, repo: Path, target: _Target, sha: str) -> str:
    """Check `sha` out in a temporary worktree and run the case there into `store`."""
    with tempfile.TemporaryDirectory(prefix="agentbench-bisect-") as folder:
        tree = Path(folder) / sha[:12]
        added = subprocess.run(
            ["git", "worktree", "add", "--detach", "--quiet", str(tree), sha],
            cwd=repo,
            capture_output=True,
            text=True,
            check=False,
        )
        if added.returncode != 0:
            raise BisectError(f"git worktree add {sha[:12]} failed: {added.stderr.strip()}")
        try:
            _link_requirements(repo, tree, target.suite_path)
            return _run_case(store, tree, target, sha)
        finally:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(tree)],
                cwd=repo,
                capture_output=True,
                check=False,
            )


def _link_requirements(repo: Path, tree: Path, suite_path: str) -> None:
    """What a suite `requires: [file:…]` and git does not check out (a Node agent's
    node_modules, git-ignored) is linked into the worktree from the user's checkout, as it
    is there now: without it the suite would be skipped at every commit."""
    for suite_file in sorted((tree / suite_path).rglob("suite.yaml")):
        try:
            requires = (yaml.safe_load(suite_file.read_text()) or {}).get("requires") or []
        except (yaml.YAMLError, OSError, AttributeError):
            continue  # the run says what is wrong with it
        folder = suite_file.parent
        mine = repo / folder.relative_to(tree)
        for entry in requires:
            kind, _, name = str(entry).partition(":")
            there, here = folder / name, mine / name
            if kind == "file" and name and not there.exists() and here.exists():
                there.parent.mkdir(parents=True, exist_ok=True)
                there.symlink_to(here.resolve())


def _run_case(store: Any, tree: Path, target: _Target, sha: str) -> str:
    if not (tree / target.suite_path).exists():
        raise UsageError(f"--suite {target.suite_path}: no such folder at commit {sha[:12]}")
    # The worktree is a pristine checkout of `sha`; the run's own files (bytecode, the suite's
    # scratch) must not label it "+dirty", or its eval could never be reused as this commit's.
    env = {**os.environ, "AGENTBENCH_CODE_VERSION": sha}
    command = [
        sys.executable, "-m", "agentbench", "run", target.suite_path,
        "--filter", target.case_id, "--db", str(Path(store.path).absolute()),
        "--json", "--no-report",
    ]  # fmt: skip
    try:
        done = subprocess.run(
            command,
            cwd=tree,
            env=env,
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise BisectError(
            f"commit {sha[:12]}: `agentbench run` took over {PROBE_TIMEOUT_S:.0f} s"
        ) from None
    if done.returncode not in (0, 1):  # 1: the case failed, which is an answer
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-8:])
        raise BisectError(
            f"commit {sha[:12]}: `agentbench run {target.suite_path} --filter {target.case_id}` "
            f"exited {done.returncode}:\n{tail}"
        )
    try:
        ran = orjson.loads(done.stdout)
        eval_id = str(ran["eval_id"])
    except (orjson.JSONDecodeError, KeyError, TypeError):
        raise BisectError(
            f"commit {sha[:12]}: `agentbench run --json` printed no eval id:\n{done.stdout[-500:]}"
        ) from None
    skipped = [r for r in ran.get("results") or () if r.get("status") == "skipped"]
    if skipped:  # the same at every commit, which says nothing of its behaviour
        raise BisectError(
            f"commit {sha[:12]}: {skipped[0].get('suite')}/{target.case_id} was skipped there "
            f"({skipped[0].get('error') or 'no reason given'}): a skipped case cannot be bisected"
        )
    return eval_id
