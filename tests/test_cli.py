"""The `agentbench` command: help, version and exit codes."""

from __future__ import annotations

import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from agentbench import __version__
from agentbench.cli import cli, main


def test_version_and_help(capsys) -> None:
    assert main(["--version"]) == 0
    assert f"agentbench, version {__version__}" in capsys.readouterr().out
    assert main(["--help"]) == 0
    assert "run agents, record them as traces" in capsys.readouterr().out


def test_unknown_option_is_a_usage_error(capsys) -> None:
    assert main(["--no-such-flag"]) == 2
    assert "No such option" in capsys.readouterr().err


def test_console_script_is_installed() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agentbench", "--version"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0
    assert __version__ in done.stdout


def commands(
    group: click.Group, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """Every command under `group` (the group itself first), with the words that invoke it."""
    yield path, group
    for name in group.list_commands(None):  # type: ignore[arg-type]
        command = group.get_command(None, name)  # type: ignore[arg-type]
        assert command is not None, name
        if isinstance(command, click.Group):
            yield from commands(command, (*path, name))
        else:
            yield (*path, name), command


ALL_COMMANDS = list(commands(cli))


def test_every_command_is_walked() -> None:
    walked = {" ".join(path) for path, _ in ALL_COMMANDS}
    assert {"", "run", "replay", "diff", "promote", "schema", "report", "traces"} <= walked
    assert {f"traces {name}" for name in ("list", "show", "sql", "export", "import")} <= walked


@pytest.mark.parametrize(
    ("path", "command"), ALL_COMMANDS, ids=[" ".join(p) or "agentbench" for p, _ in ALL_COMMANDS]
)
def test_every_option_has_help_and_every_command_ends_with_examples(
    path: tuple[str, ...], command: click.Command, capsys
) -> None:
    options = [p for p in command.params if isinstance(p, click.Option)]
    undocumented = [o.opts[0] for o in options if not (o.help or "").strip()]
    assert undocumented == [], f"agentbench {' '.join(path)}: options without help"
    assert main([*path, "--help"]) == 0
    lines = capsys.readouterr().out.rstrip().splitlines()
    examples = [line.strip() for line in lines if line.strip().startswith("agentbench ")]
    assert examples, f"agentbench {' '.join(path)} --help shows no example"
    # The examples close the help, as written: each starts a line (a long one continues on
    # further-indented lines), so click did not rewrap them.
    start = max(i for i, line in enumerate(lines) if line.strip() == "Examples:")
    tail = lines[start + 1 :]
    assert tail[0].startswith("    agentbench ")
    assert all(line.startswith(("    agentbench ", "        ")) for line in tail), tail


def test_every_example_parses(tmp_path: Path, monkeypatch) -> None:
    """The examples are real command lines: their options and values are accepted."""
    monkeypatch.chdir(tmp_path)
    for _, command in ALL_COMMANDS:
        for line in (command.epilog or "").replace("\\\n", " ").splitlines():
            if not line.strip().startswith("agentbench "):
                continue
            words = shlex.split(line.partition(" > ")[0])[1:]
            for word in words:  # folders the example expects to exist
                if word.endswith("/") or word.startswith("golden/"):
                    (tmp_path / word).mkdir(parents=True, exist_ok=True)
            target: click.Command = cli
            while isinstance(target, click.Group) and words and words[0] in target.commands:
                target, words = target.commands[words[0]], words[1:]
            target.make_context(target.name, words)  # raises on an unknown option or value


def test_the_report_folder_option_has_one_name(capsys) -> None:
    for words in (["run"], ["diff"], ["report"]):
        assert main([*words, "--help"]) == 0
        assert "--report-dir" in capsys.readouterr().out


def test_replay_of_a_missing_cassette_path_says_the_file_does_not_exist(
    tmp_path: Path, capsys
) -> None:
    db = str(tmp_path / "t.duckdb")
    for target in ("missing.yaml", "missing.yml", "run.json", "replays/weather"):
        assert main(["replay", target, "--db", db]) == 2
        error = capsys.readouterr().err
        assert f"cassette file {target} does not exist" in error
        assert "run id" in error  # and says why it was not read as one
    # A bare word is still a run id, which needs the agent to replay it.
    assert main(["replay", "run_0a1b2c", "--db", db]) == 2
    assert "read as a run id; pass the agent" in capsys.readouterr().err
