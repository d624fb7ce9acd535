"""Which stored eval is the baseline: `EVAL_ID`, `latest`, `git:REF`, or the merge-base default.

Evals are matched to commits by their `code_version` (`<sha>` or `<sha>+dirty`). With no spec,
the baseline is the newest finished eval of the commit the current branch forked from
(`git merge-base HEAD origin/main`, else `main`, else HEAD itself when there is no main branch);
if that commit was never evaluated, its first-parent ancestors are tried, newest first, up to
`MAX_WALK` commits — a PR is usually compared with the last evaluated commit of main. A clean
eval is preferred to a dirty one — for `git:REF`, and over the whole walk for the default —
since a dirty eval is not that commit's code; a dirty one is used only when no clean one
exists, and the note says so. `latest` is the newest finished eval, clean or not.
Candidates (except an explicit EVAL_ID) must share a suite with the current eval, so a baseline
that ran other suites is not picked. No git, no main, no evaluated commit: no baseline (None),
and `Baseline.note` says why, for the caller to print.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from agentbench.errors import UsageError

MAX_WALK = 50
_GIT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Baseline:
    eval_id: str | None
    note: str  # "baseline eval_… (…)" or "no baseline: …"


@dataclass(frozen=True)
class StoredEval:
    eval_id: str
    suites: frozenset[str]
    started_at: datetime
    finished: bool
    code_version: str | None

    @property
    def commit(self) -> str | None:
        return self.code_version.split("+", 1)[0] if self.code_version else None

    @property
    def dirty(self) -> bool:
        return bool(self.code_version and "+" in self.code_version)


def stored_evals(store: Any) -> list[StoredEval]:
    """Every eval in the store, newest first."""
    if not store.path.exists():
        return []
    with store.reading() as conn:
        rows = conn.execute(
            "SELECT eval_id, suite, started_at, status, code_version FROM evals "
            "ORDER BY started_at DESC, eval_id DESC"
        ).fetchall()
    return [
        StoredEval(eval_id, frozenset(suite.split(",")), started, status == "finished", version)
        for eval_id, suite, started, status, version in rows
    ]


def git(
    args: list[str], cwd: Path, *, stdin: str | None = None, timeout_s: float = _GIT_TIMEOUT_S
) -> str | None:
    """stdout of a read-only git command, or None when git is missing or the command fails."""
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=cwd,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def resolve_commit(ref: str, cwd: Path) -> str:
    """The full SHA `ref` names; UsageError when git is missing or the ref is unknown."""
    if git(["rev-parse", "--git-dir"], cwd) is None:
        raise UsageError(f"git:{ref}: {cwd} is not a git checkout (or git is not installed)")
    sha = git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], cwd)
    if not sha:
        raise UsageError(f"git:{ref}: no such commit, branch or tag in {cwd}")
    return sha


def check_baseline_spec(store: Any, spec: str | None, *, repo: Path) -> None:
    """Refuse a `--baseline` that cannot resolve before the eval runs, not after."""
    if spec is None or spec == "latest":
        return
    if spec.startswith("git:"):
        resolve_commit(spec.removeprefix("git:"), repo)
        return
    if not any(e.eval_id == spec for e in stored_evals(store)):
        raise UsageError(
            f"--baseline {spec!r}: no such eval in {store.path} "
            "(expected an eval id, 'latest' or 'git:REF')"
        )


def resolve_baseline(
    store: Any, spec: str | None, *, current_eval_id: str, repo: Path | None = None
) -> str | None:
    """The baseline eval id for `spec` (see the module docstring), or None."""
    return find_baseline(store, spec, current_eval_id=current_eval_id, repo=repo).eval_id


def find_baseline(
    store: Any, spec: str | None, *, current_eval_id: str, repo: Path | None = None
) -> Baseline:
    """Like `resolve_baseline`, with a sentence saying what was chosen or why nothing was."""
    cwd = repo or Path.cwd()
    evals = stored_evals(store)
    current = next((e for e in evals if e.eval_id == current_eval_id), None)
    candidates = [
        e
        for e in evals
        if e.finished
        and e.eval_id != current_eval_id
        and (current is None or e.suites & current.suites)
    ]
    if spec is None:
        return _merge_base(candidates, cwd)
    if spec == "latest":
        if not candidates:
            return Baseline(None, "no baseline: no other finished eval of these suites")
        found = candidates[0]
        return Baseline(found.eval_id, f"baseline {found.eval_id} (latest{_state(found)})")
    if spec.startswith("git:"):
        ref = spec.removeprefix("git:")
        sha = resolve_commit(ref, cwd)
        of_commit = [e for e in candidates if e.commit == sha]
        found = _cleanest(of_commit)
        if found is None:
            return Baseline(None, f"no baseline: no finished eval of {ref} ({sha[:12]})")
        return Baseline(found.eval_id, f"baseline {found.eval_id} ({ref}{_state(found)})")
    if spec == current_eval_id:
        raise UsageError(f"--baseline {spec}: that is the current eval")
    if not any(e.eval_id == spec for e in evals):
        raise UsageError(
            f"--baseline {spec!r}: no such eval in {store.path} "
            "(expected an eval id, 'latest' or 'git:REF')"
        )
    return Baseline(spec, f"baseline {spec} (named on the command line)")


def _merge_base(candidates: list[StoredEval], cwd: Path) -> Baseline:
    if git(["rev-parse", "--git-dir"], cwd) is None:
        return Baseline(None, "no baseline: not a git checkout (pass --baseline EVAL_ID|latest)")
    base, against = None, None
    for branch in ("origin/main", "main"):
        base = git(["merge-base", "HEAD", branch], cwd)
        if base:
            against = f"merge-base with {branch}"
            break
    if not base:
        base, against = git(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], cwd), "HEAD"
    if not base:
        return Baseline(None, "no baseline: the repository has no commits")
    history = git(["rev-list", "--first-parent", f"--max-count={MAX_WALK}", base], cwd) or base
    # A clean eval of any commit in the walk beats a dirty one: a dirty eval is not the code of
    # its commit (it may be the very change under review, not yet committed when it ran).
    for clean in (True, False):
        by_commit: dict[str, StoredEval] = {}
        for candidate in candidates:  # newest first: the first seen for a commit is used
            if candidate.commit and candidate.dirty != clean:
                by_commit.setdefault(candidate.commit, candidate)
        for distance, sha in enumerate(history.split()):
            found = by_commit.get(sha)
            if found is not None:
                back = f", {distance} commit(s) before it" if distance else ""
                return Baseline(
                    found.eval_id,
                    f"baseline {found.eval_id} ({against} {base[:12]}{back}{_state(found)})",
                )
    return Baseline(
        None,
        f"no baseline: no finished eval of {base[:12]} ({against}) or its last "
        f"{MAX_WALK - 1} first-parent ancestors",
    )


def _cleanest(evals: list[StoredEval]) -> StoredEval | None:
    """The newest clean eval, else the newest dirty one (`evals` is newest first)."""
    return next((e for e in evals if not e.dirty), None) or next(iter(evals), None)


def _state(found: StoredEval) -> str:
    if found.dirty:
        return (
            f"; {found.code_version}: uncommitted changes were evaluated, "
            "and no clean eval of this commit exists"
        )
    return f"; {found.code_version}, a clean tree"
