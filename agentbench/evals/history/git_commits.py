"""Asking git about commits: what a stored `code_version` was (date, subject, branch).

History pages and bisect name commits in a person's words; these helpers ask the repository
once for many commits rather than once per commit, and say nothing (rather than fail) about
a commit the repository does not know — a store may hold evals of another clone.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from agentbench.evals.comparing.baseline import git

_GIT_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    date: str  # committer date, ISO 8601
    subject: str
    branch: str | None  # a local branch holding the commit, if any
    order: int  # position among the commits described, ancestors first (topological)


def git_text(args: list[str], cwd: Path, stdin: str | None = None) -> str | None:
    """stdout of a git command, or None when git is missing or the command fails (with the
    longer timeout a walk over many commits can need)."""
    return git(args, cwd, stdin=stdin, timeout_s=_GIT_TIMEOUT_S)


def describe_commits(shas: Iterable[str], repo: Path) -> dict[str, CommitInfo]:
    """Date, subject and a branch of each commit in `shas` the repository at `repo` knows."""
    listed = sorted(set(shas))
    if not listed:
        return {}
    checked = git_text(
        ["cat-file", "--batch-check=%(objectname) %(objecttype)"], repo, "\n".join(listed) + "\n"
    )
    known = [line.split()[0] for line in (checked or "").splitlines() if line.endswith(" commit")]
    if not known:
        return {}
    log = git_text(["log", "--no-walk=unsorted", "--format=%H%x1f%cI%x1f%s", *known], repo)
    names = git_text(["name-rev", "--name-only", "--always", "--refs=refs/heads/*", *known], repo)
    branches = dict(zip(known, (names or "").splitlines(), strict=False))
    order = _topological(known, repo)
    found = {}
    for line in (log or "").splitlines():
        parts = line.split("\x1f")
        if len(parts) != 3:
            continue
        sha, date, subject = parts
        name = branches.get(sha, "")
        # `main~3` is three commits before main's tip; a bare abbreviated sha: no branch.
        branch = (
            name.split("~", 1)[0].split("^", 1)[0] if name and not sha.startswith(name) else None
        )
        found[sha] = CommitInfo(sha, date, subject, branch, order.get(sha, len(order)))
    return found


def _topological(shas: list[str], repo: Path) -> dict[str, int]:
    """Each of `shas` numbered so that a commit comes after its ancestors (commits made in the
    same second are still ordered: a date cannot do that)."""
    listed = git_text(["rev-list", "--topo-order", "--reverse", *shas], repo) or ""
    wanted = set(shas)
    ordered = [sha for sha in listed.split() if sha in wanted]
    return {sha: index for index, sha in enumerate(ordered)}
