"""Importing users' code: the checkout asked for wins, whatever was imported before."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentbench.errors import UsageError
from agentbench.loading import load_object


def checkout(root: Path, value: str) -> Path:
    package = root / "golden"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "agent.py").write_text(f"NAME = {value!r}\n")
    return root


def test_the_same_package_from_two_checkouts_is_each_checkouts_own(tmp_path: Path) -> None:
    first = checkout(tmp_path / "a", "first")
    second = checkout(tmp_path / "b", "second")
    assert load_object("golden.agent:NAME", search_path=first) == "first"
    assert load_object("golden.agent:NAME", search_path=second) == "second"
    assert load_object("golden.agent:NAME", search_path=first) == "first"


def test_a_module_that_raises_while_importing_is_a_usage_error(tmp_path: Path) -> None:
    root = checkout(tmp_path / "broken", "x")
    (root / "golden" / "agent.py").write_text("raise RuntimeError('no settings')\n")
    with pytest.raises(UsageError) as caught:
        load_object("golden.agent:NAME", what="agent", search_path=root)
    assert str(caught.value) == (
        "agent: importing 'golden.agent' raised RuntimeError: no settings"
    )
