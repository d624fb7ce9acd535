"""The journeys of a golden suite whose agent is a real framework's code (a boundary target).

Shared by the per-framework journey tests: a committed checkout of one shipped suite and its
cassettes, a copy of it with one change applied, the first divergence the CLI printed, a
`--live-from-divergence` run against the bundled server serving the suite's reference policy,
and a repository history for `agentbench bisect`. Every command runs through the real CLI
(`tests.test_journeys.agentbench`: in this process, as a fresh process would).
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentbench.testing import OpenAICompatibleServer
from agentbench.testing.server import ReceivedRequest
from tests.test_journeys import ROOT, Result, _generated, agentbench, git

Edit = tuple[str, str]  # (old, new) in the suite's agent.py


@dataclass(frozen=True)
class Divergence:
    """One `first divergence — step N (agent) class: what` block of the CLI's output."""

    step: int
    agent: str
    kind: str
    what: str
    details: str  # the indented lines under it: the fields that changed


FIRST = re.compile(
    r"first divergence — step (\d+) \(([\w-]+)\) (\w+): (.+)\n((?:        .+\n?)*)", re.MULTILINE
)


def first_divergences(out: str) -> list[Divergence]:
    return [
        Divergence(int(step), agent, kind, what, details)
        for step, agent, kind, what, details in FIRST.findall(out)
    ]


def committed_checkout(root: Path, suite: str) -> Path:
    """A user's repository holding the shipped `suite` and its cassettes, committed."""
    checkout = root / "repo"
    golden = checkout / "golden"
    shutil.copytree(ROOT / "golden" / suite, golden / suite, ignore=_generated)
    for name in ("__init__.py", "_reference.py"):
        shutil.copy(ROOT / "golden" / name, golden / name)
    shutil.copytree(ROOT / "replays" / suite, checkout / "replays" / suite)
    shutil.copytree(ROOT / "schema", checkout / "schema")
    (checkout / ".gitignore").write_text(".agentbench/\nreports/\n__pycache__/\n*.duckdb*\n")
    git(checkout, "init", "-q", "-b", "main")
    git(checkout, "add", "-A")
    git(checkout, "commit", "-qm", f"{suite} suite")
    return checkout


def copy_of(checkout: Path, tmp_path: Path) -> Path:
    """A copy of a checkout (its store and baseline included) a test may change."""
    copy = tmp_path / "repo"
    shutil.copytree(checkout, copy, symlinks=True)
    return copy


def change(checkout: Path, suite: str, *edits: Edit, file: str = "agent.py") -> None:
    """Edit a file of the suite (its agent.py unless told) as a user would; each edit must
    apply exactly once."""
    agent = checkout / "golden" / suite / file
    text = agent.read_text()
    for old, new in edits:
        assert text.count(old) == 1, f"{agent}: the journey's edit no longer applies: {old!r}"
        text = text.replace(old, new)
    agent.write_text(text)


def gate_against_baseline(checkout: Path, suite: str, *args: str) -> Result:
    ran = agentbench(
        checkout, "run", f"golden/{suite}", "--baseline", "latest", "--no-report", *args
    )
    assert "Traceback" not in ran.out + ran.err, ran.out + ran.err
    return ran


def baseline_checkout(folder: Path, suite: str, cases: int) -> Path:
    """A committed checkout of `suite` in `folder` whose store holds one baseline eval of it,
    every one of its `cases` replayed."""
    checkout = committed_checkout(folder, suite)
    first = agentbench(checkout, "run", f"golden/{suite}", "--no-report", "--json")
    assert first.code == 0, first.out + first.err
    assert len(first.json()["results"]) == cases
    return checkout


def reference_policy(suite: str) -> Any:
    """The suite's reference policy, read from this repository's golden/ by its file: a test
    that ran a checkout's CLI in this process may have left `golden` imported from that
    checkout, which holds only its own suite."""
    name = f"_reference_policy_{suite}"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, ROOT / "golden" / suite / "reference.py"
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def run_live_from_divergence(
    checkout: Path, suite: str, *args: str
) -> tuple[Result, list[ReceivedRequest]]:
    """`run --live-from-divergence` with the bundled server answering as the suite's
    reference policy (the model the cassettes were recorded from)."""
    reference = reference_policy(suite)
    with OpenAICompatibleServer(responder=reference.respond) as server:
        ran = gate_against_baseline(
            checkout, suite, "--live-from-divergence", "--base-url", server.base_url, *args
        )
        return ran, list(server.requests)


def bisect_history(checkout: Path, suite: str, edit: Edit) -> list[str]:
    """Two commits on top of the checkout: one that makes `edit`, then one that leaves the
    agent alone. Returns every commit, oldest first. (Each commit bisect evaluates is a
    process running the suite's case, so the history is kept short.)"""

    def commit(message: str) -> str:
        git(checkout, "add", "-A")
        git(checkout, "commit", "-qm", message)
        return git_output(checkout, "rev-parse", "HEAD")

    shas = [git_output(checkout, "rev-parse", "HEAD")]
    change(checkout, suite, edit)
    shas.append(commit("the changed tool"))
    (checkout / "NOTES.md").write_text("notes\n")
    shas.append(commit("notes on the agent"))
    return shas


def git_output(checkout: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=checkout, check=True, capture_output=True, text=True)
    return done.stdout.strip()


def framework_or_skip(module: str) -> None:
    """The journeys need the framework the suite is written with (the `frameworks` extra)."""
    pytest.importorskip(module, reason=f"{module} is not installed (agentbench[frameworks])")
