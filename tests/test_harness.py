"""`agentbench run`: record suites live, replay them offline, gate on the results."""

from __future__ import annotations

import textwrap
from pathlib import Path

import duckdb
import orjson
import pytest

from agentbench.cli import main
from agentbench.testing import OpenAICompatibleServer
from tests.weather_suite import AGENT, SUITE, respond

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

ROOT = Path(__file__).resolve().parent.parent

CASES = """
- id: paris
  input: Weather in Paris?
  tags: [smoke]
  expect:
    - tool_called: {name: get_weather, args: {city: Paris}}
    - output_contains: "21"
- id: oslo
  input: Weather in Oslo?
  expect:
    - output_contains: "4 degrees"
- id: snow
  input: Will it snow in Oslo?
  xfail: no snow forecast yet
  expect:
    - output_contains: "snow: yes"
"""


@pytest.fixture
def suite_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "suites" / "mini"
    (folder / "cases").mkdir(parents=True)
    (folder / "agent.py").write_text(AGENT)
    (folder / "suite.yaml").write_text(SUITE)
    (folder / "cases" / "weather.yaml").write_text(CASES)
    return folder


def run(*args: str, db: Path) -> int:
    # Reports go where a test says, never into the working directory.
    report = [] if "--report-dir" in args or "--no-report" in args else ["--no-report"]
    return main(["run", *args, *report, "--db", str(db)])


@pytest.fixture
def recorded(suite_dir: Path, tmp_path: Path, monkeypatch) -> Path:
    with OpenAICompatibleServer(responder=respond) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "unused")
        code = run(
            str(suite_dir),
            "--live",
            "--record-mode",
            "all",
            "--base-url",
            server.base_url,
            db=tmp_path / "rec.duckdb",
        )
    assert code == 0
    assert sorted(p.name for p in (suite_dir / "cassettes").iterdir()) == [
        "oslo.yaml",
        "paris.yaml",
        "snow.yaml",
    ]
    return suite_dir


def results(db: Path) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as conn:
        return conn.execute(
            "SELECT case_id, trial, status FROM results ORDER BY case_id, trial"
        ).fetchall()


def test_replay_offline_passes_and_stores_every_result(
    recorded: Path, tmp_path: Path, capsys
) -> None:
    db = tmp_path / "replay.duckdb"
    capsys.readouterr()
    assert run(str(recorded), db=db) == 0
    out = capsys.readouterr().out
    assert "pass rate 100.0%" in out and "mini/snow: no snow forecast yet" in out
    assert results(db) == [("oslo", 1, "passed"), ("paris", 1, "passed"), ("snow", 1, "xfailed")]
    with duckdb.connect(str(db), read_only=True) as conn:
        labelled = conn.execute(
            "SELECT count(*) FROM runs WHERE eval_id IS NOT NULL AND case_id = 'paris'"
        ).fetchone()
        status = conn.execute("SELECT status, summary FROM evals").fetchone()
    assert labelled == (1,)
    assert status[0] == "finished" and orjson.loads(status[1])["pass_rate"] == 1.0


def test_a_changed_tool_fails_the_affected_case_with_reasons(
    recorded: Path, tmp_path: Path, capsys
) -> None:
    agent = recorded / "agent.py"
    agent.write_text(agent.read_text().replace('"Oslo": 4', '"Oslo": -3'))
    capsys.readouterr()
    assert run(str(recorded), db=tmp_path / "r.duckdb") == 1
    out = capsys.readouterr().out
    assert "failing (1):" in out
    assert "mini/oslo trial 1" in out and "weather.yaml:" in out
    # The root cause first (the tool's result), the drift it caused as its consequence.
    assert (
        "request_drift: step 1 (weather) tool_result_changed: tool call get_weather "
        "result.celsius: 4 → -3; so model call #2 sent a different request" in out
    ), out


def test_a_changed_prompt_fails_with_request_drift_unless_allowed(
    recorded: Path, tmp_path: Path, capsys
) -> None:
    agent = recorded / "agent.py"
    agent.write_text(agent.read_text().replace("Answer briefly.", "Answer in one line."))
    capsys.readouterr()
    assert run(str(recorded), db=tmp_path / "a.duckdb") == 1
    out = capsys.readouterr().out
    assert (
        "model call #1 at step 1 (weather): "
        "messages[0].content: 'Answer briefly.' → 'Answer in one line.'" in out
    )
    # Allowed drift is reported, not failed on: summary, --json, JUnit and the HTML report.
    # The cases still fail: their scores judged answers recorded for another prompt.
    junit, reports = tmp_path / "junit.xml", tmp_path / "reports"
    args = ["--allow-drift", "--junit", str(junit), "--report-dir", str(reports)]
    assert run(str(recorded), *args, db=tmp_path / "b.duckdb") == 1
    out = capsys.readouterr().out
    assert "- diverged: diverged at step 1 (weather); its model call and the steps" in out
    assert "request drift, reported and not counted (3 trial(s)):" in out
    assert "messages[0].content: 'Answer briefly.' → 'Answer in one line.'" in out
    assert junit.read_text().count("request drift (reported, not counted: --allow-drift)") == 3
    page = next(reports.glob("*/index.html")).read_text()
    assert "request drift reported, not counted" in page and "Answer in one line." in page
    assert run(str(recorded), "--allow-drift", "--json", db=tmp_path / "b.duckdb") == 1
    data = orjson.loads(capsys.readouterr().out)
    drifted = [r for r in data["results"] if r["drifts"]]
    assert sorted(r["status"] for r in drifted) == ["failed", "failed", "xfailed"]
    assert all(r["diverged_at"]["call"] == 1 for r in drifted)
    assert drifted[0]["drifts"][0]["changes"][0]["path"] == "messages[0].content"


def test_trials_filters_and_pass_at_k(recorded: Path, tmp_path: Path, capsys) -> None:
    db = tmp_path / "k.duckdb"
    capsys.readouterr()
    assert run(str(recorded), "--trials", "3", "--filter", "tag:smoke", "--json", db=db) == 0
    report = orjson.loads(capsys.readouterr().out)
    assert report["summary"]["trials"] == 3 and report["summary"]["k"] == 3
    assert report["summary"]["pass_at_k"] == 1.0 and report["summary"]["pass_hat_k"] == 1.0
    assert results(db) == [("paris", 1, "passed"), ("paris", 2, "passed"), ("paris", 3, "passed")]


def test_resume_runs_only_what_the_eval_is_missing(recorded: Path, tmp_path: Path, capsys) -> None:
    db = tmp_path / "resume.duckdb"
    capsys.readouterr()
    assert run(str(recorded), "--json", db=db) == 0
    eval_id = orjson.loads(capsys.readouterr().out)["eval_id"]
    with duckdb.connect(str(db)) as conn:  # as a run killed after its first trial leaves it
        conn.execute("DELETE FROM results WHERE case_id <> 'paris'")
        conn.execute("UPDATE evals SET status = 'running', finished_at = NULL")
    # one eval is one selection: the rest of it, or a new eval
    assert run(str(recorded), "--resume", eval_id, "--filter", "oslo", db=db) == 2
    assert "it ran with no --filter; this is --filter oslo" in capsys.readouterr().err
    assert run(str(recorded), "--resume", eval_id, db=db) == 0
    out = capsys.readouterr().out
    assert f"eval {eval_id}: 3 cases, 3 trials" in out and "1 resumed" in out
    assert [r[0] for r in results(db)] == ["oslo", "paris", "snow"]


def test_missing_cassette_is_an_infrastructure_error(
    recorded: Path, tmp_path: Path, capsys
) -> None:
    (recorded / "cassettes" / "oslo.yaml").unlink()
    capsys.readouterr()
    assert run(str(recorded), db=tmp_path / "m.duckdb") == 3
    out = capsys.readouterr().out
    assert "no cassette at" in out and "--record-mode once" in out


def test_fail_under_gates_on_the_pass_rate(recorded: Path, tmp_path: Path, capsys) -> None:
    cases = recorded / "cases" / "weather.yaml"
    cases.write_text(cases.read_text().replace('"4 degrees"', '"5 degrees"'))
    assert run(str(recorded), db=tmp_path / "f0.duckdb") == 1  # a failing case fails the gate
    assert run(str(recorded), "--fail-under", "0.5", db=tmp_path / "f1.duckdb") == 0
    assert run(str(recorded), "--fail-under", "0.9", db=tmp_path / "f2.duckdb") == 1


def test_an_invalid_suite_is_reported_and_the_others_still_run(
    recorded: Path, tmp_path: Path, capsys
) -> None:
    broken = recorded.parent / "broken"
    broken.mkdir()
    (broken / "suite.yaml").write_text(
        "name: broken\nagent: agent.py:agent\nscorers:\n  - no_such_scorer: 1\n"
    )
    capsys.readouterr()
    assert run(str(recorded.parent), db=tmp_path / "i.duckdb") == 2
    captured = capsys.readouterr()
    assert "broken/suite.yaml:4" in captured.err and "no_such_scorer" in captured.err
    assert "pass rate 100.0%" in captured.out


def test_shipped_golden_suites_replay_offline(tmp_path: Path, capsys) -> None:
    """The main command: every shipped case replays from its cassette, no network, no key."""
    code = run(str(ROOT / "golden"), db=tmp_path / "g.duckdb")
    out = capsys.readouterr().out
    assert code == 0, out
    assert "136 cases" in out and "pass rate 100.0%" in out
    assert textwrap.dedent(out).count("expected failures:") == 1


def test_baseline_gate_names_regressions_and_writes_ci_outputs(
    recorded: Path, tmp_path: Path, capsys
) -> None:
    db = tmp_path / "gate.duckdb"
    capsys.readouterr()
    assert run(str(recorded), "--json", "--no-report", db=db) == 0
    baseline = orjson.loads(capsys.readouterr().out)["eval_id"]
    agent = recorded / "agent.py"
    agent.write_text(agent.read_text().replace("Answer briefly.", "Answer in one line."))
    junit, markdown = tmp_path / "out.xml", tmp_path / "summary.md"
    code = run(
        str(recorded),
        "--baseline",
        baseline,
        "--junit",
        str(junit),
        "--summary-md",
        str(markdown),
        "--report-dir",
        str(tmp_path / "reports"),
        db=db,
    )
    out = capsys.readouterr().out
    assert code == 1
    assert "newly failing" in out and "mini/paris" in out and "gate: FAILED" in out
    assert 'failures="2"' in junit.read_text()
    assert "mini/oslo" in markdown.read_text()
    report = next((tmp_path / "reports").glob("*/index.html")).read_text()
    assert "Compared with baseline" in report
    # Only the prompt changed: the drifted request is where the runs diverged.
    assert run(str(recorded), "--baseline", baseline, "--json", db=db) == 1
    comparison = orjson.loads(capsys.readouterr().out)["comparison"]
    paris = next(c for c in comparison["cases"] if c["case_id"] == "paris")
    first = paris["divergences"][0]
    assert (first["class"], first["step"], first["agent"]) == ("request_drift", 1, "weather")
    assert first["changes"][0]["path"] == "messages[0].content"


def test_setup_runs_before_the_agent_is_imported(
    recorded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The agent's module opens at import what the suite's setup builds (a fixture database,
    # say): setup must come first.
    data = tmp_path / "temperatures.json"
    (recorded / "fixture.py").write_text(
        textwrap.dedent(f"""
            from pathlib import Path

            def build():
                Path({str(data)!r}).write_text('{{"Paris": 21, "Oslo": 4}}')
        """)
    )
    agent = (recorded / "agent.py").read_text()
    (recorded / "agent.py").write_text(
        agent.replace(
            'TEMPERATURES = {"Paris": 21, "Oslo": 4}',
            "from pathlib import Path\nimport json\n"
            f"TEMPERATURES = json.loads(Path({str(data)!r}).read_text())",
        )
    )
    suite = (recorded / "suite.yaml").read_text()
    (recorded / "suite.yaml").write_text(suite + "setup: fixture.py:build\n")
    assert run(str(recorded), db=tmp_path / "setup.duckdb") == 0, capsys.readouterr().out


@pytest.mark.parametrize("where", ["suite", "case"])
def test_a_tool_override_naming_no_tool_of_the_agent_is_refused(
    recorded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    # Misspelt, `recorded` would leave get_weather live and say nothing.
    if where == "suite":
        with (recorded / "suite.yaml").open("a") as file:
            file.write("tools: {overrides: {get_wether: recorded}}\n")
    else:
        cases = recorded / "cases" / "weather.yaml"
        cases.write_text(
            cases.read_text().replace(
                "  tags: [smoke]\n", "  tags: [smoke]\n  tools: {overrides: {get_wether: stub:1}}\n"
            )
        )
    code = run(str(recorded), db=tmp_path / "refused.duckdb")
    out = capsys.readouterr().out
    assert code == 2, out
    assert "'get_wether' is no tool of agent" in out
    assert "(did you mean 'get_weather'?)" in out
    if where == "case":
        assert "weather.yaml:2: case 'paris': tools.overrides" in out
