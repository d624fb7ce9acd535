"""`--against REF`: evaluate another commit's code into the same store, to compare with.

`run_against(ref, paths, args, db=...)` checks the commit out in a temporary
`git worktree add --detach`, runs `python -m agentbench run <paths> --json --db <own store>
<args>` there with this interpreter and environment (the worktree first on PYTHONPATH, and as the
working directory, so the ref's own agentbench — when the repository is agentbench — and its
agents, suites and cassettes are what run), merges that store into `db` (so the ref's
agentbench never opens a store another version may have migrated), returns the new eval id,
and always removes the worktree.

Limits: the ref runs with *today's* installed dependencies, so a ref that needs other package
versions may fail to import; the ref's `agentbench run` must know `--json` and `--db` (and any
option passed in `args`); only committed files exist in the worktree (no untracked cassettes,
no `.env`, no submodules or LFS content unless git fetches them at checkout); suites must live
inside the repository. A suite path that did not exist at the ref is a usage error.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import orjson

from agentbench.errors import AgentbenchError, UsageError
from agentbench.evals.comparing.baseline import git, resolve_commit
from agentbench.trace.store import TraceStore

# Options `run_against` sets itself; passing them again would point the run elsewhere.
_OWN_OPTIONS = ("--db", "--json", "--resume", "--against", "--baseline")


def run_against(
    ref: str,
    paths: Sequence[str | Path],
    options_args: Sequence[str] = (),
    *,
    db: str | Path,
    repo: Path | None = None,
    python: str = sys.executable,
    timeout_s: float | None = None,
) -> str:
    """Run the suites at `paths` as they were at `ref`, into the store `db`; the eval id."""
    for arg in options_args:
        if arg.split("=", 1)[0] in _OWN_OPTIONS:
            raise UsageError(f"--against: {arg!r} cannot be passed to the run of {ref}")
    start = (repo or Path.cwd()).resolve()
    top = git(["rev-parse", "--show-toplevel"], start)
    if top is None:
        raise UsageError(f"--against {ref}: {start} is not a git checkout")
    root = Path(top)
    sha = resolve_commit(ref, root)
    relative = [_inside(root, Path(p)) for p in paths]
    holder = Path(tempfile.mkdtemp(prefix="agentbench-against-"))
    tree = holder / "tree"
    try:
        added = subprocess.run(
            ["git", "worktree", "add", "--detach", str(tree), sha],
            cwd=root,
            capture_output=True,
            text=True,
            check=False,
        )
        if added.returncode != 0:
            raise AgentbenchError(
                f"--against {ref}: git worktree add failed: {added.stderr.strip()}"
            )
        for path in relative:
            if not (tree / path).exists():
                raise UsageError(f"--against {ref}: {path} does not exist at {sha[:12]}")
        # Into a store of its own: the ref's agentbench may know an older schema than the
        # store this run uses, and must never migrate or damage it. Merged afterwards.
        own = holder / "against.duckdb"
        eval_id = _run(tree, sha, ref, relative, options_args, own, python, timeout_s)
        TraceStore(Path(db).resolve()).merge(own)
        return eval_id
    finally:
        _remove(root, tree, holder)


def _inside(root: Path, path: Path) -> str:
    absolute = (path if path.is_absolute() else Path.cwd() / path).resolve()
    try:
        return absolute.relative_to(root).as_posix() or "."
    except ValueError:
        raise UsageError(f"--against: {path} is outside the repository {root}") from None


def _run(
    tree: Path,
    sha: str,
    ref: str,
    paths: list[str],
    options_args: Sequence[str],
    db: Path,
    python: str,
    timeout_s: float | None,
) -> str:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tree), env.get("PYTHONPATH")]))
    # A CI-wide AGENTBENCH_CODE_VERSION names the current checkout, not this ref.
    env["AGENTBENCH_CODE_VERSION"] = sha
    # The baseline's run is not the job's verdict: no step summary or annotations of its own.
    for name in ("GITHUB_STEP_SUMMARY", "GITHUB_ACTIONS"):
        env.pop(name, None)
    command = [python, "-m", "agentbench", "run", *paths, "--json", "--db", str(db)]
    try:
        done = subprocess.run(
            [*command, *options_args],
            cwd=tree,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise AgentbenchError(f"--against {ref}: the run took longer than {timeout_s} s") from None
    try:
        eval_id = orjson.loads(done.stdout)["eval_id"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-10:])
        raise AgentbenchError(
            f"--against {ref}: `agentbench run` at {sha[:12]} exited {done.returncode} without "
            f"an eval:\n{tail}"
        ) from None
    return str(eval_id)


def _remove(root: Path, tree: Path, holder: Path) -> None:
    removed = subprocess.run(
        ["git", "worktree", "remove", "--force", str(tree)],
        cwd=root,
        capture_output=True,
        check=False,
    )
    if removed.returncode != 0 or tree.exists():
        shutil.rmtree(tree, ignore_errors=True)
        subprocess.run(["git", "worktree", "prune"], cwd=root, capture_output=True, check=False)
    shutil.rmtree(holder, ignore_errors=True)
