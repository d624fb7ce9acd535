"""`agentbench promote`: only runs that make sound golden cases, and each promoted case passes.

Everything goes through the real CLI over real stored runs: runs recorded with `Runner.run`
into a store, and the shipped customer-service suite run on a temporary copy (its router
hands refunds over to a specialist, so its runs have parents). Every test that promotes ends
by running the promoted case in a fresh store and checking that it passes.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from agentbench import FunctionModel, Runner, ScriptedModel, ToolCall
from agentbench.cli import main
from agentbench.errors import ModelError
from agentbench.loading import load_object
from agentbench.trace import TraceStore
from tests.weather_suite import AGENT, SUITE

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

ROOT = Path(__file__).resolve().parents[1]
PARIS = [ToolCall("get_weather", {"city": "Paris"}), "Paris: 21 degrees."]


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def promote(
    capsys: pytest.CaptureFixture[str], run_id: str, suite: Path, db: Path, *more: str
) -> tuple[int, str, str]:
    return cli(capsys, "promote", run_id, "--suite", str(suite), "--db", str(db), *more)


def rows(db: Path, query: str) -> list[tuple[Any, ...]]:
    store = TraceStore(db)
    try:
        return store.sql(query).rows
    finally:
        store.close()


def assert_passes(capsys: pytest.CaptureFixture[str], suite: Path, case_id: str) -> None:
    """Run one case of the suite in a store of its own; it must pass."""
    db = suite.parent / f"check-{case_id}.duckdb"
    code, out, err = cli(
        capsys, "run", str(suite), "--filter", case_id, "--json", "--no-report", "--db", str(db)
    )
    summary = orjson.loads(out)["summary"]
    assert (code, summary["trials"], summary["passed"]) == (0, 1, 1), out + err


# -- a small suite whose agent lives beside it, and runs recorded into a store ----------------


@pytest.fixture
def weather(tmp_path: Path) -> Path:
    suite = tmp_path / "suites" / "mini"
    suite.mkdir(parents=True)
    (suite / "agent.py").write_text(AGENT)
    (suite / "suite.yaml").write_text(SUITE)
    return suite


def record(suite: Path, db: Path, model: Any, question: str = "How warm is Paris?") -> str:
    return record_agent(suite / "agent.py", db, model, question)


def record_agent(file: Path, db: Path, model: Any, question: str = "How warm is Paris?") -> str:
    agent = load_object(f"{file}:agent")
    store = TraceStore(db)
    try:
        return Runner.run_sync(agent, question, model=model, store=store).run_id
    finally:
        store.close()


def test_a_stored_run_becomes_a_case_that_passes_and_says_where_it_is(
    weather: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "prod.duckdb"
    run_id = record(weather, db, ScriptedModel(PARIS))
    code, out, err = promote(capsys, run_id, weather, db)
    assert code == 0, err
    case_id = f"promoted-{run_id.replace('_', '')[-10:]}"
    cases_file = (weather / "cases" / "promoted.yaml").resolve()
    cassette = (weather / "cassettes" / f"{case_id}.yaml").resolve()
    assert out.splitlines() == [
        f"case {case_id} added to suite mini at {cases_file}:1",
        f"cassette {cassette}",
    ]
    assert cassette.is_file() and err == ""
    assert_passes(capsys, weather, case_id)


def test_a_new_suite_names_its_agent_relative_to_the_repository_and_runs_in_another_checkout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = tmp_path / "checkout"
    (repo / "app").mkdir(parents=True)
    (repo / "app" / "weather.py").write_text(AGENT)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    db = tmp_path / "prod.duckdb"
    run_id = record_agent(repo / "app" / "weather.py", db, ScriptedModel(PARIS))
    suite = repo / "golden" / "weather"
    agent_ref = f"{repo / 'app' / 'weather.py'}:agent"  # absolute, as a shell completes it
    code, _, err = promote(capsys, run_id, suite, db, "--agent", agent_ref, "--id", "paris")
    assert code == 0 and err == "", err
    # The suite is two folders down and the agent beside them: it used to be named absolutely.
    written = (suite / "suite.yaml").read_text()
    assert yaml.safe_load(written)["agent"] == "../../app/weather.py:agent"
    assert str(repo) not in written  # nor in its description

    moved = shutil.copytree(repo, tmp_path / "another" / "checkout")
    shutil.rmtree(repo)  # nothing may still point into the first checkout
    assert_passes(capsys, moved / "golden" / "weather", "paris")


def test_an_agent_outside_the_repository_is_named_absolutely_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = tmp_path / "elsewhere" / "weather.py"
    outside.parent.mkdir()
    outside.write_text(AGENT)
    repo = tmp_path / "checkout"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    db = tmp_path / "prod.duckdb"
    run_id = record_agent(outside, db, ScriptedModel(PARIS))
    suite = repo / "golden" / "weather"
    code, _, err = promote(capsys, run_id, suite, db, "--agent", f"{outside}:agent")
    assert code == 0
    assert yaml.safe_load((suite / "suite.yaml").read_text())["agent"] == f"{outside}:agent"
    assert "outside the repository" in err and "runs only on this machine" in err


def test_a_run_that_did_not_finish_needs_force(
    weather: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def gateway_down_after_one_call(request: dict[str, Any], info: Any) -> Any:
        if info.index == 0:
            return PARIS[0]
        raise ModelError("gateway down", status_code=503, attempts=3)

    db = tmp_path / "prod.duckdb"
    run_id = record(weather, db, FunctionModel(gateway_down_after_one_call))
    code, out, err = promote(capsys, run_id, weather, db)
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [
        f"error: refusing to promote run {run_id}: run {run_id} (weather) did not finish "
        "(status error: ModelError: gateway down), so the case would expect half a run; "
        "pass --force to promote it anyway"
    ]
    assert not (weather / "cases").exists() and not (weather / "cassettes").exists()

    code, _, err = promote(capsys, run_id, weather, db, "--id", "down", "--force")
    assert code == 0 and err.startswith("warning: promoting anyway (--force): run ")
    assert "stop_reason: error" in (weather / "cases" / "promoted.yaml").read_text()
    assert_passes(capsys, weather, "down")  # it expects the failure: why --force warns


def test_a_run_that_failed_its_case_needs_force(
    weather: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "prod.duckdb"
    run_id = record(weather, db, ScriptedModel(PARIS))
    assert promote(capsys, run_id, weather, db, "--id", "paris")[0] == 0
    # An expectation the behaviour does not meet: the eval's run of it fails its case.
    cases = weather / "cases" / "promoted.yaml"
    cases.write_text(cases.read_text() + "  - output_contains: Oslo\n")
    evals = tmp_path / "evals.duckdb"
    assert cli(capsys, "run", str(weather), "--no-report", "--db", str(evals))[0] == 1
    [(eval_id, failed_run)] = rows(evals, "SELECT eval_id, run_id FROM results")

    code, _, err = promote(capsys, failed_run, weather, evals)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert f"refusing to promote run {failed_run}: it failed its case (eval {eval_id}, " in err
    assert "case mini/paris, trial 1): output_contains: " in err and "pass --force" in err

    code, _, err = promote(capsys, failed_run, weather, evals, "--id", "paris-again", "--force")
    assert code == 0 and "warning: promoting anyway (--force): it failed its case" in err
    assert_passes(capsys, weather, "paris-again")


def test_request_drift_needs_force_even_when_the_eval_allowed_it(
    weather: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "prod.duckdb"
    run_id = record(weather, db, ScriptedModel(PARIS))
    assert promote(capsys, run_id, weather, db, "--id", "paris")[0] == 0
    agent_file = weather / "agent.py"
    agent_file.write_text(AGENT.replace("Answer briefly.", "Answer in one line."))

    strict = tmp_path / "strict.duckdb"
    assert cli(capsys, "run", str(weather), "--no-report", "--db", str(strict))[0] == 1
    [(drifted,)] = rows(strict, "SELECT run_id FROM results")
    code, _, err = promote(capsys, drifted, weather, strict)
    assert code == 2 and "its case had request drift (eval " in err
    assert "messages[0].content" in err and "pass --force" in err

    # --allow-drift does not fail on the drift, but its answers were recorded for other
    # requests, so the case still fails (as diverged) and is not promoted without --force.
    lenient = tmp_path / "lenient.duckdb"
    code = cli(capsys, "run", str(weather), "--allow-drift", "--no-report", "--db", str(lenient))[0]
    assert code == 1
    [(status, allowed)] = rows(lenient, "SELECT status, run_id FROM results")
    assert status == "failed"
    code, _, err = promote(capsys, allowed, weather, lenient)
    assert code == 2 and "its case had request drift" in err
    assert "model call #1 (weather) changed messages[0].content" in err

    code, _, err = promote(capsys, allowed, weather, lenient, "--id", "one-line", "--force")
    assert code == 0 and "warning: promoting anyway (--force): its case had request drift" in err
    assert_passes(capsys, weather, "one-line")


# -- the shipped customer-service suite: a router hands over to specialists ------------------


@pytest.fixture(scope="module")
def service_eval(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A copy of the shipped suite and its cassettes, run once: (repository copy, store)."""
    repo = tmp_path_factory.mktemp("repo")
    shutil.copytree(ROOT / "golden" / "customer_service", repo / "golden" / "customer_service")
    shutil.copy(ROOT / "golden" / "__init__.py", repo / "golden" / "__init__.py")
    shutil.copytree(ROOT / "replays" / "customer_service", repo / "replays" / "customer_service")
    db = repo / "evals.duckdb"
    assert (
        main(["run", str(repo / "golden" / "customer_service"), "--no-report", "--db", str(db)])
        == 0
    )
    return repo, db


@pytest.fixture
def service(service_eval: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path]:
    """This test's own copy of the suite to promote into: (suite folder, store of the eval)."""
    repo, db = service_eval
    for part in ("golden", "replays"):
        shutil.copytree(repo / part, tmp_path / part)
    return tmp_path / "golden" / "customer_service", db


def test_a_handed_off_run_is_promoted_from_the_root_of_its_conversation(
    service: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    suite, db = service
    [(child, root)] = rows(
        db,
        "SELECT child.run_id, root.run_id FROM results "
        "JOIN runs AS root ON root.run_id = results.run_id "
        "JOIN runs AS triage ON triage.parent_run_id = root.run_id "
        "JOIN runs AS child ON child.parent_run_id = triage.run_id "
        "WHERE results.case_id = 'refund-eligible'",
    )
    code, out, err = promote(capsys, child, suite, db, "--id", "refund")
    assert code == 0, err
    assert out.splitlines()[0] == (
        f"run {child} was handed off from {root}; promoting the conversation from its root {root}"
    )
    entry = (suite / "cases" / "promoted.yaml").read_text()
    assert f"Promoted from stored run {root}." in entry and "transfer_to" not in entry
    assert_passes(capsys, suite, "refund")


def test_a_run_whose_case_was_expected_to_fail_needs_force(
    service: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    suite, db = service
    [(eval_id, run_id)] = rows(
        db, "SELECT eval_id, run_id FROM results WHERE case_id = 'cancel-subscription'"
    )
    code, _, err = promote(capsys, run_id, suite, db)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert (
        f"it xfailed its case (eval {eval_id}, case customer_service/cancel-subscription, "
        "trial 1): trajectory: " in err
    )
    code, _, err = promote(capsys, run_id, suite, db, "--id", "cancel", "--force")
    assert code == 0 and "warning: promoting anyway (--force): it xfailed its case" in err
    assert_passes(capsys, suite, "cancel")


def test_what_cannot_be_promoted_is_one_line_and_exit_2(
    service: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite, db = service
    [(run_id,)] = rows(db, "SELECT run_id FROM results WHERE case_id = 'opening-hours'")
    empty = tmp_path / "empty"
    empty.mkdir()
    wrong = [
        ("run_nope", suite, f"no run 'run_nope' in {db} ("),
        (run_id, tmp_path / "nope", f"--suite {tmp_path / 'nope'}: no such folder"),
        (run_id, empty, f"--suite {empty}: no suite.yaml in this folder"),
        (run_id, suite.parent, f"not a suite folder but one holding suites ({suite})"),
    ]
    for given, folder, expected in wrong:
        code, out, err = promote(capsys, given, folder, db)
        assert code == 2 and out == "", err
        assert len(err.strip().splitlines()) == 1 and expected in err, err
    missing = tmp_path / "missing.duckdb"
    code, _, err = promote(capsys, run_id, suite, missing)
    assert code == 2
    assert err.strip() == (
        f"error: no trace store at {missing}; run `agentbench run` first (or pass --db)"
    )
    assert not (suite / "cases" / "promoted.yaml").exists() and not missing.exists()
