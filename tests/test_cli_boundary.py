"""No traceback reaches a user: every failure of every command is one line, a hint, an exit code.

And the rest of the run's promises at the boundary: a broken agent module is its suite's
error (the other suites still run), a filter that selects nothing is a usage error, a resumed
eval must be the same suites and code, and where things land does not depend on the working
directory.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import orjson
import pytest

from agentbench.cli import main
from agentbench.commands import report as report_command
from agentbench.trace.code_version import code_version

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git checkout holding two shipped suites and their cassettes."""
    folder = tmp_path / "repo"
    for suite in ("brakes", "sre"):
        shutil.copytree(ROOT / "golden" / suite, folder / "golden" / suite)
        shutil.copytree(ROOT / "replays" / suite, folder / "replays" / suite)
    shutil.copy(ROOT / "golden" / "__init__.py", folder / "golden" / "__init__.py")
    shutil.copy(ROOT / "golden" / "_reference.py", folder / "golden" / "_reference.py")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=folder, check=True)
    (folder / ".gitignore").write_text(".agentbench/\nreports/\n__pycache__/\n")
    subprocess.run([*git, "add", "-A"], cwd=folder, check=True)
    subprocess.run([*git, "commit", "-qm", "suites"], cwd=folder, check=True)
    return folder


def test_an_unexpected_error_is_one_line_naming_command_and_place(monkeypatch, capsys) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise KeyError("spool")

    monkeypatch.setattr(report_command, "resolve_eval_id", broken)
    assert main(["report", "latest", "--db", "/nonexistent/x.duckdb"]) == 3
    err = capsys.readouterr().err
    assert "Traceback" not in err
    first, hint = err.strip().splitlines()
    assert first.startswith("error: agentbench report failed: unexpected KeyError at ")
    assert "test_cli_boundary.py:" in first and "(broken): 'spool'" in first
    assert "rerun with --debug (or AGENTBENCH_DEBUG=1)" in hint
    # --debug anywhere on the command line (or the variable) adds the traceback
    assert main(["report", "latest", "--db", "/nonexistent/x.duckdb", "--debug"]) == 3
    assert "Traceback (most recent call last)" in capsys.readouterr().err
    monkeypatch.setenv("AGENTBENCH_DEBUG", "1")
    assert main(["report", "latest", "--db", "/nonexistent/x.duckdb"]) == 3
    assert "Traceback (most recent call last)" in capsys.readouterr().err


def test_with_json_an_error_is_also_json_on_stdout(repo: Path, capsys) -> None:
    code = main(["run", str(repo / "golden"), "--filter", "nomatch", "--json"])
    assert code == 2
    error = orjson.loads(capsys.readouterr().out)["error"]
    assert error["kind"] == "usage" and error["exit_code"] == 2
    assert error["message"].startswith("--filter nomatch: no case of brakes, sre matches")


def test_a_filter_that_selects_nothing_is_a_usage_error_and_stores_no_eval(
    repo: Path, capsys
) -> None:
    assert main(["run", str(repo / "golden"), "--filter", "nomatch", "--no-report"]) == 2
    assert "no case of brakes, sre matches" in capsys.readouterr().err
    assert not (repo / ".agentbench" / "traces.duckdb").exists()


@pytest.mark.parametrize("recording_process", ["0", "1"])
def test_a_store_path_under_a_file_is_a_usage_error(
    repo: Path, capsys, monkeypatch: pytest.MonkeyPatch, recording_process: str
) -> None:
    monkeypatch.setenv("AGENTBENCH_RECORDING_PROCESS", recording_process)
    blocker = repo / "a-file"
    blocker.write_text("not a folder")
    db = blocker / "traces.duckdb"
    assert main(["run", str(repo / "golden" / "brakes"), "--no-report", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert f"cannot make a trace store at {db}: its folder {blocker} cannot be created" in err
    assert "bug" not in err and "Traceback" not in err


def test_an_agent_that_raises_at_import_is_its_suites_error(repo: Path, capsys) -> None:
    agent = repo / "golden" / "brakes" / "agent.py"
    agent.write_text(agent.read_text() + '\nraise RuntimeError("no API settings")\n')
    assert main(["run", str(repo / "golden"), "--no-report"]) == 2
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith("suite error:"))
    assert line == (
        f"suite error: {repo / 'golden' / 'brakes' / 'suite.yaml'}:7:1: agent: importing "
        "'golden.brakes.agent' raised RuntimeError: no API settings"
    )
    assert "sre    14" in out  # the other suite ran


def test_a_setup_that_raises_is_its_suites_error(repo: Path, capsys) -> None:
    (repo / "golden" / "sre" / "prepare.py").write_text(
        "def build():\n    raise OSError('disk full')\n"
    )
    suite = repo / "golden" / "sre" / "suite.yaml"
    suite.write_text(suite.read_text() + "setup: prepare.py:build\n")
    assert main(["run", str(repo / "golden" / "sre"), "--no-report"]) == 2
    out = capsys.readouterr().out
    assert "setup: prepare.py:build() raised OSError: disk full" in out
    assert f"{suite}:14:1: setup:" in out


def test_where_things_land_does_not_depend_on_the_working_directory(
    repo: Path, tmp_path: Path, monkeypatch, capsys
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.delenv("AGENTBENCH_DB", raising=False)
    assert main(["run", str(repo / "golden" / "sre"), "--json"]) == 0
    data = orjson.loads(capsys.readouterr().out)
    sha = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert data["store"] == str(repo / ".agentbench" / "traces.duckdb")
    assert data["report"].startswith(str(repo / "reports"))
    assert not (elsewhere / ".agentbench").exists() and not (elsewhere / "reports").exists()
    assert data["summary"]["trials"] == 14
    rows = main(["traces", "sql", "SELECT DISTINCT code_version FROM evals", "--format", "json",
                 "--db", data["store"]])
    assert rows == 0
    assert orjson.loads(capsys.readouterr().out) == [{"code_version": sha}]


def test_untracked_files_make_the_code_dirty(repo: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(repo)
    (repo / "golden" / "sre" / "cases" / "new.yaml").write_text("[]\n")
    assert main(["run", "golden/sre", "--json", "--no-report"]) == 0
    assert orjson.loads(capsys.readouterr().out)["results"][0]["status"] == "passed"
    rows = main(["traces", "sql", "SELECT code_version FROM evals", "--format", "json"])
    assert rows == 0
    assert orjson.loads(capsys.readouterr().out)[0]["code_version"].endswith("+dirty")


def test_resume_only_continues_the_same_suites_on_the_same_code(
    repo: Path, monkeypatch, capsys
) -> None:
    monkeypatch.chdir(repo)
    assert main(["run", "golden/sre", "--json", "--no-report"]) == 0
    eval_id = orjson.loads(capsys.readouterr().out)["eval_id"]
    assert main(["run", "golden/brakes", "--resume", eval_id, "--no-report"]) == 2
    assert "it ran the suites sre; these are brakes" in capsys.readouterr().err
    agent = repo / "golden" / "sre" / "agent.py"
    agent.write_text(agent.read_text() + "\n# changed\n")
    code_version.cache_clear()  # once per process, and each command is a new process
    assert main(["run", "golden/sre", "--resume", eval_id, "--no-report"]) == 2
    assert "a resumed eval must be one version of the code" in capsys.readouterr().err


def test_what_could_be_written_is_written_when_the_comparison_fails(
    repo: Path, monkeypatch, capsys
) -> None:
    from agentbench.commands import run_outputs

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("comparison exploded")

    monkeypatch.chdir(repo)
    assert main(["run", "golden/sre", "--no-report"]) == 0
    monkeypatch.setattr(run_outputs, "compare_evals", broken)
    junit, summary = repo / "junit.xml", repo / "summary.md"
    code = main(
        ["run", "golden/sre", "--baseline", "latest", "--junit", str(junit),
         "--summary-md", str(summary)]
    )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 3
    assert "unexpected RuntimeError at" in captured.err and "comparison exploded" in captured.err
    assert "Traceback" not in captured.err
    # the eval, its JUnit, its summary and its report were kept
    # 14 cases, and the gate's testcase: an error, as the exit code says
    assert junit.read_text().count("<testcase") == 15 and summary.is_file()
    assert '<error message="gate error (exit 3): the comparison with the baseline could not be' in (
        junit.read_text()
    )
    assert summary.read_text().startswith("## agentbench: ⛔ error")
    assert "results: " in captured.out and list((repo / "reports").glob("*/index.html"))
