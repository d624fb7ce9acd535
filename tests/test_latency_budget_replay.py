"""A latency budget is judged where the model was called live, never on a replay's clock.

Replayed, a model call takes microseconds, so a case's time is the machine's: a busy CI runner
would fail a case the code did not change. The same case is recorded live (its budget judged,
here failed on purpose) and replayed (not judged, and the reason says so).
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import orjson
import pytest

from agentbench.cli import main
from agentbench.testing import OpenAICompatibleServer
from tests.weather_suite import AGENT, SUITE, respond

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

CASES = """
- id: paris
  input: Weather in Paris?
  expect:
    - output_contains: "21"
    - latency_budget: {max_ms: 0.001}
"""


def run(suite: Path, db: Path, *extra: str) -> int:
    return main(["run", str(suite), "--no-report", "--db", str(db), *extra])


def latency_score(db: Path) -> dict:
    with duckdb.connect(str(db), read_only=True) as conn:
        (scores,) = conn.execute("SELECT scores FROM results").fetchone()
    rows = scores if isinstance(scores, list) else orjson.loads(scores)
    return next(row for row in rows if row["name"] == "latency_budget")


def test_the_budget_is_judged_live_and_not_in_a_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    suite = tmp_path / "mini"
    (suite / "cases").mkdir(parents=True)
    (suite / "agent.py").write_text(AGENT)
    (suite / "suite.yaml").write_text(SUITE)
    (suite / "cases" / "weather.yaml").write_text(CASES)
    with OpenAICompatibleServer(responder=respond) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "unused")
        live = tmp_path / "live.duckdb"
        live_flags = ("--live", "--record-mode", "all", "--base-url", server.base_url)
        assert run(suite, live, *live_flags) == 1  # no live call takes a microsecond
    judged = latency_score(live)
    assert not judged["passed"] and "over the 0 ms budget" in judged["reason"]

    replay = tmp_path / "replay.duckdb"
    assert run(suite, replay) == 0
    replayed = latency_score(replay)
    assert replayed["passed"]
    assert replayed["reason"].startswith("not judged: the model calls were replayed")
