"""`code_version`: read from the .git files, cached, overridable, None outside a checkout."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentbench.trace.code_version import code_version, describe, find_git_dir, head_commit

SHA = "0123456789abcdef0123456789abcdef01234567"
OTHER = "fedcba9876543210fedcba9876543210fedcba98"


def fake_repo(root: Path, head: str) -> Path:
    git = root / ".git"
    (git / "refs" / "heads").mkdir(parents=True)
    (git / "HEAD").write_text(head + "\n")
    return git


def test_branch_loose_packed_and_detached_heads(tmp_path: Path) -> None:
    git = fake_repo(tmp_path / "loose", "ref: refs/heads/main")
    (git / "refs" / "heads" / "main").write_text(SHA + "\n")
    assert head_commit(git) == SHA

    git = fake_repo(tmp_path / "packed", "ref: refs/heads/release")
    (git / "packed-refs").write_text(f"# pack-refs with: peeled\n{OTHER} refs/heads/release\n")
    assert head_commit(git) == OTHER

    git = fake_repo(tmp_path / "detached", SHA)
    assert head_commit(git) == SHA

    git = fake_repo(tmp_path / "unborn", "ref: refs/heads/main")
    assert head_commit(git) is None


def test_worktree_gitdir_file_and_subfolders(tmp_path: Path) -> None:
    main_git = fake_repo(tmp_path / "main", "ref: refs/heads/main")
    (main_git / "refs" / "heads" / "feature").write_text(OTHER + "\n")
    linked = main_git / "worktrees" / "wt"
    linked.mkdir(parents=True)
    (linked / "HEAD").write_text("ref: refs/heads/feature\n")
    (linked / "commondir").write_text("../..\n")
    tree = tmp_path / "wt"
    (tree / "src").mkdir(parents=True)
    (tree / ".git").write_text(f"gitdir: {linked}\n")
    assert find_git_dir(tree / "src") == linked
    assert head_commit(linked) == OTHER


def test_version_string_outside_and_inside_a_checkout(tmp_path: Path) -> None:
    assert describe(tmp_path) is None
    git = fake_repo(tmp_path, "ref: refs/heads/main")
    (git / "refs" / "heads" / "main").write_text(SHA + "\n")
    # A fake repository git itself cannot read: the dirty flag is unknown, not "clean".
    assert describe(tmp_path) == f"{SHA}+unknown"


def test_override_and_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    code_version.cache_clear()
    monkeypatch.setenv("AGENTBENCH_CODE_VERSION", "build-42")
    try:
        assert code_version() == "build-42"
        monkeypatch.setenv("AGENTBENCH_CODE_VERSION", "build-43")
        assert code_version() == "build-42"  # computed once per process
    finally:
        code_version.cache_clear()
