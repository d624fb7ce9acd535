"""The `agentbench` command: help, version and exit codes."""

from __future__ import annotations

import subprocess
import sys

from agentbench import __version__
from agentbench.cli import main


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
