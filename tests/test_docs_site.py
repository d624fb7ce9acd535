"""The documentation site builds with `mkdocs build --strict`, as CI builds it.

Strict: a broken link or anchor, a page missing from the nav (or the nav naming a missing
page), a docstring mkdocstrings cannot read: each fails the build, and the test shows
mkdocs' own output. The generated references are checked for what they must hold: every
command of the CLI, every name of `agentbench.__all__`; and no page, generated ones included,
names a document or path readers do not have.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

import agentbench
from agentbench.cli import cli

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

ROOT = Path(__file__).resolve().parent.parent
# What exists only where the docs were written; a docstring in the API reference included.
NOT_FOR_READERS = ("DESIGN.md", "../shared", "/work/")


def build_site(out: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if built.returncode != 0:
        output = built.stdout + built.stderr
        pytest.fail(f"mkdocs build --strict failed (exit {built.returncode}):\n{output}", False)


def command_paths(group: click.Group, prefix: str = "agentbench") -> list[str]:
    paths = []
    for name in group.list_commands(None):  # type: ignore[arg-type]
        command = group.get_command(None, name)  # type: ignore[arg-type]
        path = f"{prefix}-{name}"
        paths.append(path)
        if isinstance(command, click.Group):
            paths += command_paths(command, path)
    return paths


def test_the_site_builds_strict_with_every_command_and_public_name(tmp_path: Path) -> None:
    build_site(tmp_path)
    assert (tmp_path / "index.html").is_file()

    cli_page = (tmp_path / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    missing = [path for path in command_paths(cli) if f'id="{path}"' not in cli_page]
    assert not missing, f"commands missing from docs/reference/cli.md: {missing}"

    api_page = (tmp_path / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    names = [name for name in agentbench.__all__ if not name.startswith("_")]
    missing = [name for name in names if f'id="agentbench.{name}"' not in api_page]
    assert not missing, f"names of agentbench.__all__ missing from docs/reference/api.md: {missing}"

    named = [
        f"{page.relative_to(tmp_path)} names {name!r}"
        for page in sorted(tmp_path.rglob("*.html"))
        for name in NOT_FOR_READERS
        if name in page.read_text(encoding="utf-8")
    ]
    assert not named, "\n".join(named)
