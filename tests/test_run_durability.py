"""A killed `agentbench run` keeps every trial it scored, and `--resume` runs only the rest."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from agentbench.cli import main
from agentbench.testing import OpenAICompatibleServer
from tests.weather_suite import SUITE, respond

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

ROOT = Path(__file__).resolve().parent.parent
CITIES = ["Paris", "Oslo", "Rome", "Lima", "Kyiv", "Oulu", "Pune", "Bern"]

# The weather agent, with a tool slow enough for the process to be killed mid-eval.
SLOW_AGENT = '''
import time
from agentbench import Agent, tool

@tool(effect="read_only")
def get_weather(city: str) -> dict:
    """Current temperature.

    Args:
        city: City name.
    """
    time.sleep(0.3)
    return {"city": city, "celsius": len(city)}

agent = Agent(name="weather", instructions="Answer briefly.", tools=[get_weather])
'''


def city_respond(request: dict) -> object:
    """`respond` for any city: the last word of the question names it."""
    question = request["messages"][-1]
    if question["role"] == "user":
        city = question["content"].rstrip("?").split()[-1]
        request["messages"][-1] = {**question, "content": f"Weather in Paris? {city}"}
    return respond(request)


@pytest.fixture
def slow_suite(tmp_path: Path, monkeypatch) -> Path:
    folder = tmp_path / "suites" / "slow"
    (folder / "cases").mkdir(parents=True)
    (folder / "agent.py").write_text(SLOW_AGENT)
    (folder / "suite.yaml").write_text(SUITE.replace("name: mini", "name: slow"))
    cases = "".join(f"- id: {c.lower()}\n  input: Weather in {c}?\n" for c in CITIES)
    (folder / "cases" / "cities.yaml").write_text(cases)
    with OpenAICompatibleServer(responder=city_respond) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "unused")
        code = main(
            [
                "run", str(folder), "--live", "--record-mode", "once", "--no-report",
                "--base-url", server.base_url, "--db", str(tmp_path / "record.duckdb"),
            ]
        )  # fmt: skip
    assert code == 0
    return folder


def journaled_results(spool: Path) -> int:
    return sum(
        path.read_bytes().count(b'"results"') for path in spool.glob("*.journal") if path.is_file()
    )


def stored(db: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as conn:
        return conn.execute(sql).fetchall()


def test_a_killed_run_keeps_its_scored_trials_and_resume_runs_only_the_rest(
    slow_suite: Path, tmp_path: Path, capsys
) -> None:
    db = tmp_path / "kill.duckdb"
    command = [
        sys.executable, "-m", "agentbench", "run", str(slow_suite), "--db", str(db),
        "--concurrency", "1", "--no-report",
    ]  # fmt: skip
    process = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    spool = db.with_name(db.name + ".spool")
    deadline = time.monotonic() + 60
    while journaled_results(spool) < 3 and process.poll() is None:
        assert time.monotonic() < deadline, "no result was journaled within a minute"
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert process.returncode == -signal.SIGKILL
    # Reading the store takes in what the dead process journaled.
    capsys.readouterr()
    assert main(["traces", "list", "--db", str(db), "--limit", "1"]) == 0
    ((eval_id,),) = stored(db, "SELECT eval_id FROM evals")
    kept = stored(db, "SELECT case_id FROM results ORDER BY case_id")
    assert len(kept) >= 3, "results scored before the kill were lost"
    assert main(["run", str(slow_suite), "--db", str(db), "--resume", eval_id, "--no-report"]) == 0
    out = capsys.readouterr().out
    assert f"{len(kept)} resumed" in out
    trials = stored(db, "SELECT case_id, count(*) FROM results GROUP BY case_id ORDER BY case_id")
    assert trials == [(c.lower(), 1) for c in sorted(CITIES)]  # each trial scored once
    runs = stored(db, "SELECT case_id, count(*) FROM runs WHERE eval_id IS NOT NULL GROUP BY ALL")
    assert all(count == 1 for case, count in runs if (case,) in kept)  # kept trials not re-run
