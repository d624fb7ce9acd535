"""Every shipped cassette replays with `agentbench replay CASSETTE` alone — no --agent — from
the repository root and from any other folder, multi-turn ones included."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agentbench.cli import main
from agentbench.evals.suites.dataset import load_suite
from agentbench.replay.cassette import Cassette

ROOT = Path(__file__).resolve().parent.parent
CASSETTES = sorted((ROOT / "replays").glob("*/*.yaml"))
IDS = [f"{p.parent.name}/{p.stem}" for p in CASSETTES]


def test_cassettes_are_shipped() -> None:
    assert len(CASSETTES) >= 40
    assert any(Cassette.load(p).info.get("turns", 1) > 1 for p in CASSETTES)


@pytest.mark.parametrize("path", CASSETTES, ids=IDS)
def test_shipped_cassettes_name_their_suite_and_agent(path: Path) -> None:
    info = Cassette.load(path).info
    suite = load_suite(path.parent / info["suite_dir"])
    assert suite.name == info["suite"]
    assert info["agent"] == suite.agent_ref
    assert suite.cassette_for(suite.case(info["case"])) == path


@pytest.mark.parametrize("where", ["repository root", "elsewhere"])
@pytest.mark.parametrize("path", CASSETTES, ids=IDS)
def test_every_shipped_cassette_replays_unchanged_without_agent(
    path: Path, where: str, tmp_path: Path, monkeypatch, capsys
) -> None:
    if where == "repository root":
        monkeypatch.chdir(ROOT)
        target = str(path.relative_to(ROOT))
    else:
        monkeypatch.chdir(tmp_path)
        target = str(path)
    code = main(["replay", target, "--db", str(tmp_path / "traces.duckdb")])
    captured = capsys.readouterr()
    assert code == 0, captured.out + captured.err
    assert "behaviour unchanged" in captured.out
    assert "note:" not in captured.err  # the agent came from this repository


def test_a_cassette_of_another_checkout_says_where_its_agent_came_from(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    # A copy without its suite folder: the recorded `agent` ref is imported, and since the
    # `golden` package is already loaded from this checkout, the replay says so.
    copied = tmp_path / "other" / "replays" / "sre" / "status-prod-eu.yaml"
    copied.parent.mkdir(parents=True)
    shutil.copy(ROOT / "replays/sre/status-prod-eu.yaml", copied)
    main(["replay", str(ROOT / "replays/sre/status-prod-eu.yaml"), "--db", str(tmp_path / "a")])
    capsys.readouterr()
    monkeypatch.chdir(tmp_path)
    code = main(["replay", str(copied), "--db", str(tmp_path / "traces.duckdb")])
    captured = capsys.readouterr()
    assert code == 0, captured.out + captured.err
    assert "behaviour unchanged" in captured.out
    expected = ROOT / "golden" / "sre" / "agent.py"
    assert f"note: agent golden.sre.agent:sre_agent loaded from {expected}" in captured.err
    assert str(tmp_path / "other") in captured.err


def test_a_cassette_that_names_no_agent_says_what_to_pass(tmp_path: Path, capsys) -> None:
    cassette = Cassette.load(ROOT / "replays/sre/status-prod-eu.yaml")
    cassette.update_info(agent=None, suite_dir=None)
    path = cassette.save(tmp_path / "anonymous.yaml")
    assert main(["replay", str(path), "--db", str(tmp_path / "traces.duckdb")]) == 2
    err = capsys.readouterr().err
    assert f"{path}: metadata.agentbench.agent" in err and "--agent module:attribute" in err
