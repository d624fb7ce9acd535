"""Which stored eval is the baseline: `EVAL_ID`, `latest`, `git:REF`, or the merge-base default.

Evals are matched to commits by their `code_version` (`<sha>` or `<sha>+dirty`). With no spec,
the baseline is the newest finished eval of the commit the current branch forked from
(`git merge-base HEAD origin/main`, else `main`, else HEAD itself when there is no main branch);
if that commit was never evaluated, its first-parent ancestors are tried, newest first, up to
`MAX_WALK` commits — a PR is usually compared with the last evaluated commit of main. A clean
eval is preferred to a dirty one — for `git:REF`, and over the whole walk for the default —
since a dirty eval is not that commit's code; a dirty one is used only when no clean one
exists, and the note says so. `latest` is the newest eval that qualifies, clean or not.
Candidates (except an explicit EVAL_ID) must share a suite with the current eval, so a baseline
that ran other suites is not picked; must be finished (a killed eval is part of the work); must
be of the current eval's mode, live or replayed (a live eval in an outage errs every case, and
a live model's answers say nothing of a replay's); must have run every suite of the current
eval that its commit has (`git ls-tree` of the folders the current eval ran them from: a suite
added since is no reason to pass it over, one left out is); and must not be a smaller part of
the work than the current eval: a partial eval — filtered with `--filter`, one shard of a CI
matrix (or a merge lacking some), one that lost a suite to an error or trials it planned — is
passed over when it holds fewer cases of the shared suites than the current eval does (a
filtered eval with the current eval's very filters is a like-for-like baseline, and stays
one). Otherwise a one-case `--filter` run would be the baseline of a whole eval, and its
headline rate would compare one case with all of them. The note names the newest eval passed
over and why. An explicit EVAL_ID is used as asked, and the note says what it is. No git, no
main, no evaluated commit: no baseline (None), and `Baseline.note` says why, for the caller to
print.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from agentbench.errors import UsageError
from agentbench.evals.running.completion import json_object, planned_trials
from agentbench.evals.running.shards import ShardSet

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
    filters: tuple[str, ...] = ()  # its --filter, if any
    shards: ShardSet = field(default_factory=ShardSet)  # the shards of a CI matrix it holds, if any
    suite_errors: int = 0  # suites that could not be loaded
    cases: tuple[tuple[str, int], ...] | None = None  # cases per suite (None: not known)
    live: bool = False  # called the live model (--live) rather than replaying
    planned: int | None = None  # trials it planned (None: not kept)
    trials: int | None = None  # trials it holds a result for (None: not known)
    errors: int = 0  # of those, trials that could not run
    paths: tuple[tuple[str, str], ...] = ()  # (suite, the path it was run from)

    @property
    def commit(self) -> str | None:
        return self.code_version.split("+", 1)[0] if self.code_version else None

    @property
    def dirty(self) -> bool:
        return bool(self.code_version and "+" in self.code_version)

    def partial(self) -> list[str]:
        """Why it is not a whole run of its suites (nothing: it is whole)."""
        found = []
        if self.filters:
            found.append(f"filtered (--filter {' '.join(self.filters)})")
        if self.shards.problems():
            missing = self.shards.missing
            held = ", ".join(self.shards.present)
            found.append(
                f"shards {held} only (lacking {', '.join(missing)})"
                if missing
                else f"shards of different splits ({held})"
            )
        if self.suite_errors:
            found.append(f"{self.suite_errors} suite(s) could not be loaded")
        elif self.planned is not None and self.trials is not None and self.trials < self.planned:
            lost = self.planned - self.trials
            found.append(f"{lost} of its {self.planned} planned trials have no result")
        return found

    @property
    def mode(self) -> str:
        return "live" if self.live else "replayed"

    def cases_in(self, suites: frozenset[str]) -> int | None:
        if self.cases is None:
            return None
        return sum(count for suite, count in self.cases if suite in suites)


def stored_evals(store: Any) -> list[StoredEval]:
    """Every eval in the store, newest first."""
    if not store.path.exists():
        return []
    with store.reading() as conn:
        rows = conn.execute(
            "SELECT eval_id, suite, started_at, status, code_version, config, summary FROM evals "
            "ORDER BY started_at DESC, eval_id DESC"
        ).fetchall()
    return [_stored_eval(*row) for row in rows]


def _stored_eval(
    eval_id: str,
    suite: str,
    started: datetime,
    status: str,
    version: str | None,
    config_text: str | None,
    summary_text: str | None,
) -> StoredEval:
    config, summary = (json_object(text) for text in (config_text, summary_text))
    by_suite = summary.get("by_suite")
    cases = None
    if isinstance(by_suite, dict) and all(
        isinstance(n, dict) and isinstance(n.get("cases"), int) for n in by_suite.values()
    ):
        cases = tuple(sorted((name, numbers["cases"]) for name, numbers in by_suite.items()))
    paths = config.get("suites")
    return StoredEval(
        eval_id,
        frozenset(suite.split(",")),
        started,
        status == "finished",
        version,
        filters=tuple(str(f) for f in config.get("filters") or ()),
        shards=ShardSet.of(config.get("shards")),
        suite_errors=len(summary.get("suite_errors") or ()),
        cases=cases,
        live=config.get("live") is True,
        planned=planned_trials(config),
        trials=summary.get("trials") if isinstance(summary.get("trials"), int) else None,
        errors=summary.get("errors") if isinstance(summary.get("errors"), int) else 0,
        paths=tuple(sorted((str(n), str(p)) for n, p in paths.items()))
        if isinstance(paths, dict)
        else (),
    )


def _too_small(candidate: StoredEval, current: StoredEval | None) -> str | None:
    """Why `candidate` is too small a part of the work to be `current`'s baseline, or None."""
    partial = candidate.partial()
    if current is None or not partial:
        return None
    if candidate.filters and candidate.filters == current.filters and len(partial) == 1:
        return None  # the same selection: like for like
    shared = candidate.suites & current.suites
    have, need = candidate.cases_in(shared), current.cases_in(shared)
    if have is not None and need is not None and have >= need:
        return None
    held = "an unknown number of" if have is None else str(have)
    return f"{'; '.join(partial)}: {held} case(s) against this eval's {need or 'more'}"


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
    suites = _SuitesAt(current, cwd)
    if spec is not None and spec != "latest" and not spec.startswith("git:"):
        return _with_errors(_named(store, spec, current_eval_id, current, suites), evals)
    sharing = [
        e
        for e in evals
        if e.eval_id != current_eval_id and (current is None or e.suites & current.suites)
    ]
    unfit = {e.eval_id: why for e in sharing if (why := _unfit(e, current, suites)) is not None}
    candidates = [e for e in sharing if e.eval_id not in unfit]
    passed_over = [e for e in sharing if e.eval_id in unfit]
    if spec is None:
        found, walked = _merge_base(candidates, cwd)
        skipped = [e for e in passed_over if e.commit in walked]
    elif spec == "latest":
        newest = next(iter(candidates), None)
        found = (
            Baseline(newest.eval_id, f"baseline {newest.eval_id} (latest{_state(newest)})")
            if newest is not None
            else Baseline(None, "no baseline: no other finished eval of these suites")
        )
        skipped = [e for e in passed_over if newest is None or e.started_at > newest.started_at]
    else:
        ref = spec.removeprefix("git:")
        sha = resolve_commit(ref, cwd)
        chosen = _cleanest([e for e in candidates if e.commit == sha])
        found = (
            Baseline(chosen.eval_id, f"baseline {chosen.eval_id} ({ref}{_state(chosen)})")
            if chosen is not None
            else Baseline(None, f"no baseline: no finished eval of {ref} ({sha[:12]})")
        )
        skipped = [e for e in passed_over if e.commit == sha]
    return _with_errors(_passing_over(found, skipped, unfit), evals)


def _named(
    store: Any,
    spec: str,
    current_eval_id: str,
    current: StoredEval | None,
    suites: _SuitesAt,
) -> Baseline:
    """An explicit `--baseline EVAL_ID`: used as asked, the note saying what it lacks."""
    if spec == current_eval_id:
        raise UsageError(f"--baseline {spec}: that is the current eval")
    named = next((e for e in stored_evals(store) if e.eval_id == spec), None)
    if named is None:
        raise UsageError(
            f"--baseline {spec!r}: no such eval in {store.path} "
            "(expected an eval id, 'latest' or 'git:REF')"
        )
    note = f"baseline {spec} (named on the command line)"
    caveat = _unlike(named, current, suites)
    if caveat is not None:
        note += f"; {caveat}"
    if named.partial():
        shared = named.suites & current.suites if current is not None else named.suites
        have = named.cases_in(shared)
        need = current.cases_in(shared) if current is not None else None
        counts = f", {have} case(s) against this eval's {need}" if have is not None else ""
        note += (
            f"; it is partial — {'; '.join(named.partial())}{counts}: only the cases both "
            "evals ran are compared, and the pass rates are over those"
        )
    return Baseline(spec, note)


def _unlike(candidate: StoredEval, current: StoredEval | None, suites: _SuitesAt) -> str | None:
    """Why `candidate` is not like for like with `current`, beyond being partial: it did not
    finish, it ran the other way (live or replayed), or it lacks some of its suites."""
    if not candidate.finished:
        return "it did not finish"
    if current is None:
        return None
    if candidate.live != current.live:
        return f"a {candidate.mode} eval, and this one is {current.mode}"
    lacking = suites.lacking(candidate)
    if lacking:
        ran = len(candidate.suites & current.suites)
        return f"it ran {ran} of this eval's {len(current.suites)} suites, not {', '.join(lacking)}"
    return None


def _unfit(candidate: StoredEval, current: StoredEval | None, suites: _SuitesAt) -> str | None:
    """Why `candidate` cannot be found as `current`'s baseline, or None: an automatic baseline
    is a finished eval, of the same mode (a live eval's cases say nothing of a replayed run's,
    and an outage errs every one of them), that ran every suite of the current eval its
    commit had, and is no smaller a part of the work."""
    return _unlike(candidate, current, suites) or _too_small(candidate, current)


class _SuitesAt:
    """Which of the current eval's suites a commit has (`git ls-tree` of the folders it ran
    them from), so an eval that left one out is told from one made before it was added.
    Where that cannot be told (no git, no commit, a folder outside the checkout), a suite
    left out counts as left out."""

    def __init__(self, current: StoredEval | None, repo: Path) -> None:
        self.current = current
        self.repo = repo
        self.folders = {
            name: found
            for name, path in (current.paths if current is not None else ())
            if (found := _in_checkout(path, repo)) is not None
        }
        self.seen: dict[str, set[str] | None] = {}

    def lacking(self, candidate: StoredEval) -> list[str]:
        """The current eval's suites `candidate` did not run though its commit has them."""
        if self.current is None:
            return []
        missing = sorted(self.current.suites - candidate.suites)
        if not missing:
            return []
        present = self._present(candidate.commit)
        return [
            name
            for name in missing
            if present is None or name not in self.folders or self.folders[name] in present
        ]

    def _present(self, commit: str | None) -> set[str] | None:
        if commit is None or not self.folders:
            return None
        if commit not in self.seen:
            folders = list(self.folders.values())
            listed = git(["ls-tree", "--name-only", commit, "--", *folders], self.repo)
            self.seen[commit] = set(listed.splitlines()) if listed is not None else None
        return self.seen[commit]


def _in_checkout(path: str, repo: Path) -> str | None:
    """`path` (as the eval was run with it) relative to the checkout's root, if it is in it."""
    given = Path(path)
    for place in (given,) if given.is_absolute() else (Path.cwd() / given, repo / given):
        if place.exists() and place.resolve().is_relative_to(repo.resolve()):
            return place.resolve().relative_to(repo.resolve()).as_posix()
    return None


def _with_errors(found: Baseline, evals: list[StoredEval]) -> Baseline:
    """The note, saying when the chosen baseline has trials that could not run."""
    chosen = next((e for e in evals if e.eval_id == found.eval_id), None)
    if chosen is None or not chosen.errors:
        return found
    return Baseline(
        found.eval_id,
        f"{found.note}; {chosen.errors} of its trials could not run: they excuse no case that "
        "fails now",
    )


def _passing_over(found: Baseline, skipped: list[StoredEval], why: dict[str, str]) -> Baseline:
    """The note, saying which evals were not taken as the baseline (the newest)."""
    if not skipped:
        return found
    first = skipped[0]
    more = f", and {len(skipped) - 1} more eval(s)" if len(skipped) > 1 else ""
    return Baseline(
        found.eval_id,
        f"{found.note}; passed over {first.eval_id} ({why[first.eval_id]}){more}: a baseline "
        "found on its own is a finished eval, live or replayed as this one, and never a "
        "smaller part of the work (name one with --baseline EVAL_ID to use it anyway)",
    )


def _merge_base(candidates: list[StoredEval], cwd: Path) -> tuple[Baseline, set[str]]:
    """The default baseline, and the commits walked to find it (or find none)."""
    if git(["rev-parse", "--git-dir"], cwd) is None:
        note = "no baseline: not a git checkout (pass --baseline EVAL_ID|latest)"
        return Baseline(None, note), set()
    base, against = None, None
    for branch in ("origin/main", "main"):
        base = git(["merge-base", "HEAD", branch], cwd)
        if base:
            against = f"merge-base with {branch}"
            break
    if not base:
        base, against = git(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], cwd), "HEAD"
    if not base:
        return Baseline(None, "no baseline: the repository has no commits"), set()
    history = git(["rev-list", "--first-parent", f"--max-count={MAX_WALK}", base], cwd) or base
    commits = history.split()
    # A clean eval of any commit in the walk beats a dirty one: a dirty eval is not the code of
    # its commit (it may be the very change under review, not yet committed when it ran).
    for clean in (True, False):
        by_commit: dict[str, StoredEval] = {}
        for candidate in candidates:  # newest first: the first seen for a commit is used
            if candidate.commit and candidate.dirty != clean:
                by_commit.setdefault(candidate.commit, candidate)
        for distance, sha in enumerate(commits):
            found = by_commit.get(sha)
            if found is not None:
                back = f", {distance} commit(s) before it" if distance else ""
                note = f"baseline {found.eval_id} ({against} {base[:12]}{back}{_state(found)})"
                return Baseline(found.eval_id, note), set(commits[: distance + 1])
    note = (
        f"no baseline: no finished eval of {base[:12]} ({against}) or its last "
        f"{MAX_WALK - 1} first-parent ancestors"
    )
    return Baseline(None, note), set(commits)


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
