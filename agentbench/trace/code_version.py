"""`code_version`: the git commit (and dirty flag) of the code under test, once per process.

Two versions of an agent are compared by this column, so it must be cheap and never fail: the
commit is read straight from the `.git` files (no subprocess), and one `git status` call
(without optional locks, so it never writes the index) decides the dirty flag — edits and
untracked files both count. Not a git checkout gives None; `AGENTBENCH_CODE_VERSION` overrides
everything, for CI images built without `.git`.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
from pathlib import Path

_SHA = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")
_STATUS_TIMEOUT_S = 5.0


_anchor: Path | None = None


@functools.cache
def code_version() -> str | None:
    """`<sha>`, `<sha>+dirty` (or `+unknown`) for the checkout around the anchor (see
    `anchor`), else around the working directory."""
    override = os.environ.get("AGENTBENCH_CODE_VERSION")
    if override:
        return override
    return describe(_anchor or Path.cwd())


def anchor(path: Path) -> None:
    """Describe the checkout holding `path` from now on: the CLI anchors at the repository
    that holds the suites, so where the command was typed does not matter."""
    global _anchor
    path = path.absolute()
    if path != _anchor:
        _anchor = path
        code_version.cache_clear()


def find_work_tree(start: Path) -> Path | None:
    """The root of the git checkout containing `start` (a linked worktree's own root)."""
    start = start.absolute()
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return folder
    return None


def describe(start: Path) -> str | None:
    """The version string of the checkout containing `start` (not cached)."""
    git_dir = find_git_dir(start)
    if git_dir is None:
        return None
    sha = head_commit(git_dir)
    if sha is None:
        return None
    dirty = is_dirty(find_work_tree(start) or start)
    if dirty is None:
        return f"{sha}+unknown"
    return f"{sha}+dirty" if dirty else sha


def find_git_dir(start: Path) -> Path | None:
    """The git directory for `start`: `.git` above it, following `gitdir:` files (worktrees)."""
    for folder in (start, *start.parents):
        candidate = folder / ".git"
        if candidate.is_dir():
            return candidate
        if candidate.is_file():
            text = candidate.read_text(errors="replace").strip()
            if text.startswith("gitdir:"):
                target = Path(text.removeprefix("gitdir:").strip())
                return target if target.is_absolute() else (folder / target).resolve()
    return None


def head_commit(git_dir: Path) -> str | None:
    """The commit HEAD points at, from HEAD, loose refs or packed-refs."""
    try:
        head = (git_dir / "HEAD").read_text().strip()
    except OSError:
        return None
    if _SHA.match(head):
        return head
    if not head.startswith("ref:"):
        return None
    ref = head.removeprefix("ref:").strip()
    common = _common_dir(git_dir)
    for folder in (git_dir, common):
        try:
            value = (folder / ref).read_text().strip()
        except OSError:
            continue
        if _SHA.match(value):
            return value
    try:
        packed = (common / "packed-refs").read_text()
    except OSError:
        return None  # a branch with no commits yet
    for line in packed.splitlines():
        sha, _, name = line.partition(" ")
        if name == ref and _SHA.match(sha):
            return sha
    return None


def _common_dir(git_dir: Path) -> Path:
    """Linked worktrees keep shared refs in the main repository's git dir."""
    try:
        text = (git_dir / "commondir").read_text().strip()
    except OSError:
        return git_dir
    path = Path(text)
    return path if path.is_absolute() else (git_dir / path).resolve()


# What agentbench itself writes into a checkout is not a change to the code under test.
_OWN_OUTPUT = (".agentbench", "reports")


def is_dirty(work_tree: Path) -> bool | None:
    """Tracked files differ from HEAD, or there are files git does not know yet (a new case
    file or module changes behaviour as much as an edit; ignored files do not count, nor
    what agentbench writes); None when git cannot tell (no git binary, timeout)."""
    excluded = [f":(exclude){name}" for name in _OWN_OUTPUT]
    try:
        done = subprocess.run(
            ["git", "--no-optional-locks", "status", "--porcelain", "--", ".", *excluded],
            cwd=work_tree,
            capture_output=True,
            text=True,
            timeout=_STATUS_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return bool(done.stdout.strip())
