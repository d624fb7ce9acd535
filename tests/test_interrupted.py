"""Ctrl-C at any moment: exit 130, one message and no traceback; once the eval was started,
the message names it and gives the `--resume` command, and that command runs only the rest.

The interrupt is sent when the run is known to be at the moment under test (a tool that says
it started and then waits; an import that is made to fail the way a Ctrl-C would), not after
a guessed delay.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import orjson
import pytest

from agentbench.cli import main
from agentbench.testing import OpenAICompatibleServer
from tests.weather_suite import respond

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

PYTHON = sys.executable
CONSOLE = str(Path(sys.executable).with_name("agentbench"))
AGENT = textwrap.dedent('''
    import os
    import time

    from agentbench import Agent, tool

    TEMPERATURES = {"Paris": 21, "Oslo": 4}


    @tool(effect="read_only", timeout_s=60)
    def get_weather(city: str) -> dict:
        """Current temperature.

        Args:
            city: City name.
        """
        with open(os.environ["WEATHER_CALLS"], "a") as calls:
            calls.write(city + "\\n")
        release = os.environ["WEATHER_RELEASE"]
        if city == "Oslo" and not os.path.exists(release):
            open(os.environ["WEATHER_WAITING"], "w").close()
            while not os.path.exists(release):
                time.sleep(0.01)
        return {"city": city, "celsius": TEMPERATURES[city]}


    agent = Agent(name="weather", instructions="Answer briefly.", tools=[get_weather])
''')
SUITE = """
name: mini
agent: agent.py:agent
model: {name: mini-model}
cassettes: cassettes
scorers:
  - stop_reason: completed
"""
CASES = """
- id: paris
  input: Weather in Paris?
- id: oslo
  input: Weather in Oslo?
"""
BOUND_S = 60.0


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The suite, recorded, with the environment its tool reads."""
    root = tmp_path / "repo"
    suite = root / "suites" / "mini"
    (suite / "cases").mkdir(parents=True)
    (suite / "agent.py").write_text(AGENT)
    (suite / "suite.yaml").write_text(SUITE)
    (suite / "cases" / "cases.yaml").write_text(CASES)
    monkeypatch.setenv("WEATHER_CALLS", str(tmp_path / "calls.txt"))
    monkeypatch.setenv("WEATHER_RELEASE", str(tmp_path / "release"))
    monkeypatch.setenv("WEATHER_WAITING", str(tmp_path / "waiting"))
    (tmp_path / "release").touch()  # recording does not wait
    with OpenAICompatibleServer(responder=respond) as server:
        code = main(
            [
                *("run", str(suite), "--live", "--record-mode", "all", "--no-report"),
                *("--base-url", server.base_url, "--db", str(tmp_path / "record.duckdb")),
            ]
        )
    assert code == 0
    (tmp_path / "release").unlink()
    (tmp_path / "calls.txt").unlink()
    return root


def calls(repo: Path) -> list[str]:
    return (repo.parent / "calls.txt").read_text().split()


def test_ctrl_c_mid_eval_names_the_eval_and_the_resume_command_that_finishes_it(
    repo: Path,
) -> None:
    db = repo.parent / "evals.duckdb"
    command = [
        *(CONSOLE, "run", "suites/mini", "--no-report", "--concurrency", "1"),
        *("--db", str(db)),
    ]
    process = subprocess.Popen(
        command, cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    waiting = repo.parent / "waiting"
    until = time.monotonic() + BOUND_S
    while not waiting.exists():  # paris is stored; oslo's tool is running
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < until, "the oslo case never started"
        time.sleep(0.01)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=BOUND_S)
    assert process.returncode == 130, out + err
    assert "Traceback" not in err
    first, resume = err.strip().splitlines()[-2:]
    assert first.startswith("interrupted: eval eval_"), err
    assert f"keeps the 1 of 2 trial(s) that finished in {db}" in first
    eval_id = first.split()[2]
    assert shlex.split(resume) == [
        *("agentbench", "run", "suites/mini", "--no-report", "--concurrency", "1"),
        *("--db", str(db), "--resume", eval_id),
    ]

    (repo.parent / "release").touch()
    done = subprocess.run(
        [CONSOLE, *shlex.split(resume)[1:], "--json"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=BOUND_S,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = orjson.loads(done.stdout)
    assert report["eval_id"] == eval_id
    assert sorted(r["case_id"] for r in report["results"]) == ["oslo", "paris"]
    assert calls(repo) == ["Paris", "Oslo", "Oslo"]  # only the unfinished case ran again


def test_ctrl_c_while_the_command_is_still_importing_ends_quietly(tmp_path: Path) -> None:
    # A Ctrl-C lands wherever the interpreter is: here, in the import of the `run` command.
    script = textwrap.dedent("""
        import sys

        class CtrlC:
            def find_spec(self, name, path=None, target=None):
                if name == "agentbench.commands.run":
                    raise KeyboardInterrupt

        sys.meta_path.insert(0, CtrlC())
        sys.argv = ["agentbench", "run", "golden/"]
        from agentbench._console import run
        run()
    """)
    done = subprocess.run(
        [PYTHON, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=BOUND_S
    )
    assert done.returncode == 130, done.stderr
    # The command is imported as click resolves it, and click ends the ^C's line first.
    assert done.stderr in ("interrupted\n", "\ninterrupted\n")


def test_ctrl_c_before_the_eval_started_says_nothing_was_stored(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.chdir(repo)
    monkeypatch.setattr("agentbench.commands.run.check_baseline_spec", interrupted)
    code = main(["run", "suites/mini", "--no-report", "--json"])
    out, err = capsys.readouterr()
    assert code == 130
    assert "interrupted before the eval started: nothing was stored" in err
    assert orjson.loads(out)["error"]["exit_code"] == 130


def test_ctrl_c_in_any_other_command_is_exit_130(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("agentbench.commands.schema.suite_json_schema", interrupted)
    code = main(["schema", "--out", str(tmp_path)])
    assert code == 130
    assert capsys.readouterr().err.strip() == "interrupted"


def test_a_schema_folder_that_cannot_be_made_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["schema", "--out", os.devnull]) == 2
    assert f"--out {os.devnull}: cannot write suite.schema.json there" in capsys.readouterr().err


def test_ctrl_c_while_the_command_loads_ends_at_once(tmp_path: Path) -> None:
    # The console script's first line imports agentbench._console; a SIGINT from then until
    # the command starts ends the process (nothing is kept yet), however the import was doing.
    script = textwrap.dedent("""
        import os, signal
        import agentbench._console
        os.kill(os.getpid(), signal.SIGINT)
        import time
        time.sleep(5)
        print("still running")
    """)
    done = subprocess.run(
        [PYTHON, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=BOUND_S
    )
    assert done.returncode == 130, done.stderr
    assert done.stderr == "interrupted\n"
    assert "still running" not in done.stdout


def test_a_ctrl_c_that_python_wrapped_in_another_error_is_still_an_interruption(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def wrapped(*args: object, **kwargs: object) -> None:
        # What Python raises for a KeyboardInterrupt inside a class's creation (__set_name__).
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as exc:
            raise RuntimeError("Error calling __set_name__ on 'Field' instance") from exc

    monkeypatch.setattr("agentbench.commands.schema.suite_json_schema", wrapped)
    assert main(["schema", "--out", "unused"]) == 130
    assert capsys.readouterr().err.strip() == "interrupted"


def test_helper_processes_are_out_of_the_terminals_process_group(tmp_path: Path) -> None:
    # A Ctrl-C reaches the whole foreground process group: the command handles it, and its
    # helpers (the recording process, SQL workers) must not die of it first.
    from agentbench.runtime.builtin._sql_process import WorkerPool
    from agentbench.trace.store import TraceStore

    store = TraceStore(tmp_path / "traces.duckdb", recording_process=True)
    try:
        recording = store._channel._process  # started with the store
        assert recording is not None
        assert os.getpgid(recording.pid) != os.getpgid(0)
    finally:
        store.close()
    database = tmp_path / "shop.duckdb"
    import duckdb

    with duckdb.connect(str(database)) as conn:
        conn.execute("CREATE TABLE t (x INTEGER)")
    pool = WorkerPool(str(database), {}, address_space_bytes=2 * 1024**3, max_workers=1)
    try:
        pool.start()
        worker = pool._idle[0]
        assert os.getpgid(worker.process.pid) != os.getpgid(0)
    finally:
        pool.close()


def test_a_note_for_an_eval_whose_trials_all_finished_says_what_is_left() -> None:
    from agentbench.commands.interrupted import ResumeNote

    note = ResumeNote(
        argv=["run", "golden/"],
        eval_id="eval_x",
        planned=3,
        started=lambda: True,
        finished=lambda: 3,
    )
    assert note.message() == (
        "interrupted: eval eval_x has all 3 trial(s) stored, but was not gated and reported; "
        "do that with:\n  agentbench run golden/ --resume eval_x"
    )
