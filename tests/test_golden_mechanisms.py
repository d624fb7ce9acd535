"""The golden cases that exercise the runtime's less-travelled paths: they pass as shipped, they
catch the behaviour changes they exist for even with `--allow-drift`, and the user's journey
(run, run against a baseline, report, diff, replay, promote) works on them.

Mutations are applied to a copy of the package, suites and cassettes in a temporary folder and
run there in a process of their own, as `benchmarks/`-style mutation testing would.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
import yaml

from agentbench.cli import main
from agentbench.trace.code_version import code_version

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

ROOT = Path(__file__).resolve().parent.parent
NEW_CASES = {
    "memory": {"lookups-summarized", "pinned-fact-outlives-dropped-turns"},
    "mechanisms": {
        "oversized-log-truncated",
        "endless-search-default-brake",
        "fenced-arguments",
        "prose-wrapped-arguments",
        "request-scope-stays-behind",
    },
    "sql_analyst": {"pairs-over-row-limit"},
    "sre": {"smoke-test-long-output-and-exception"},
}


def _environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "AGENTBENCH_DB"}


def cli(folder: Path, *args: str) -> tuple[int, str]:
    """One command run in `folder` by this process, as a fresh process would run it (its
    stdout; with --json, stderr holds the `gate: …` line beside the document)."""
    for name in [m for m in sys.modules if m == "golden" or m.startswith("golden.")]:
        del sys.modules[name]
    code_version.cache_clear()
    out = io.StringIO()
    with (
        contextlib.chdir(folder),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(io.StringIO()),
    ):
        code = main(list(args))
    return code, out.getvalue()


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package, the suites and the cassettes, in a folder of their own."""
    folder = tmp_path_factory.mktemp("mechanisms") / "repo"
    ignore = shutil.ignore_patterns("__pycache__", "*.duckdb.wal", ".agentbench")
    for name in ("agentbench", "golden", "replays", "schema"):
        shutil.copytree(ROOT / name, folder / name, ignore=ignore)
    return folder


def test_the_new_cases_pass_as_shipped(copy: Path, tmp_path: Path) -> None:
    suites = [f"golden/{suite}" for suite in NEW_CASES]
    filters = [a for cases in NEW_CASES.values() for case in cases for a in ("--filter", case)]
    code, out = cli(
        copy, "run", *suites, *filters, "--json", "--no-report", "--db", str(tmp_path / "t.db")
    )
    assert code == 0, out
    results = orjson.loads(out)["results"]
    ran = {(r["suite"], r["case_id"]): r["status"] for r in results}
    expected = {(suite, case) for suite, cases in NEW_CASES.items() for case in cases}
    assert set(ran) == expected
    assert set(ran.values()) == {"passed"}
    # Each asserts more than the output: what a tool returned or what the model was shown.
    for result in results:
        names = {s["name"] for s in result["scores"]}
        assert names & {"tool_result", "model_shown", "model_not_shown"}, result["case_id"]


# (name, file, old text, new text, suite/case, scorer(s) that must fail)
MUTATIONS = [
    (
        "request scope crosses a handoff",
        "agentbench/runtime/runner.py",
        "            request={},  # the request scope never crosses a handoff",
        "            request=dict(snapshot.request),",
        "mechanisms/request-scope-stays-behind",
        {"model_not_shown"},
    ),
    (
        "tool results cut later",
        "agentbench/runtime/tools.py",
        "DEFAULT_MAX_RESULT_CHARS = 2_000",
        "DEFAULT_MAX_RESULT_CHARS = 4_000",
        "mechanisms/oversized-log-truncated",
        {"tool_result", "model_shown", "model_not_shown"},
    ),
    (
        "default max_iterations raised",
        "agentbench/runtime/agent.py",
        "max_iterations: int = Field(8, ge=1)",
        "max_iterations: int = Field(10, ge=1)",
        "mechanisms/endless-search-default-brake",
        {"stop_reason"},
    ),
    (
        "prose-wrapped arguments refused",
        "agentbench/runtime/arguments.py",
        "        value = _first_object(text)",
        "        value = None",
        "mechanisms/prose-wrapped-arguments",
        {"tool_called", "tool_result"},
    ),
    (
        "pinned facts left out of the instructions",
        "agentbench/runtime/instructions.py",
        "        if pinned:",
        "        if False:",
        "memory/pinned-fact-outlives-dropped-turns",
        {"model_shown"},
    ),
    (
        "one more unit kept out of summaries",
        "agentbench/runtime/memory.py",
        "        cutoff = max(len(units) - protect, 0)",
        "        cutoff = max(len(units) - protect - 1, 0)",
        "memory/lookups-summarized",
        {"model_shown", "model_not_shown"},
    ),
    (
        "no summaries",
        "agentbench/runtime/memory.py",
        "            units = await self._summarize(units, protect, system_tokens, decisions, "
        "call_model)",
        "            pass",
        "memory/lookups-summarized",
        {"model_shown"},
    ),
    (
        "row-limit note reworded",
        "agentbench/runtime/builtin/sql.py",
        'f"row limit of {max_rows:,} reached and more rows exist; "',
        'f"row limit reached; "',
        "sql_analyst/pairs-over-row-limit",
        {"tool_result", "model_shown"},
    ),
    (
        "sandbox stderr not returned",
        "agentbench/runtime/builtin/_sandbox_outcome.py",
        '        if self.stderr:\n            data["stderr"] = self.stderr',
        '        if False:\n            data["stderr"] = self.stderr',
        "sre/smoke-test-long-output-and-exception",
        {"tool_result"},
    ),
]


@pytest.mark.parametrize(
    ("name", "file", "old", "new", "case", "failing"), MUTATIONS, ids=[m[0] for m in MUTATIONS]
)
def test_a_behaviour_change_fails_its_case_even_with_drift_allowed(
    copy: Path, tmp_path: Path, name: str, file: str, old: str, new: str, case: str, failing: set
) -> None:
    path = copy / file
    original = path.read_text()
    assert original.count(old) == 1, f"{file}: the mutation no longer applies: {old!r}"
    path.write_text(original.replace(old, new))
    suite, case_id = case.split("/")
    try:
        ran = subprocess.run(
            [sys.executable, "-m", "agentbench", "run", f"golden/{suite}", "--filter", case_id,
             "--allow-drift", "--json", "--no-report", "--db", str(tmp_path / "m.db")],
            cwd=copy, capture_output=True, text=True, check=False, env=_environment(),
        )  # fmt: skip
    finally:
        path.write_text(original)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    (result,) = orjson.loads(ran.stdout)["results"]
    failed = {s["name"] for s in result["scores"] if not s["passed"]}
    assert failing <= failed, result["scores"]
    assert "request_drift" not in failed  # caught by what was scored, not by the drift check


def test_the_journey_on_the_new_suites(copy: Path, tmp_path: Path) -> None:
    db = str(tmp_path / "d.duckdb")
    suites = ("golden/memory", "golden/mechanisms")
    code, out = cli(copy, "run", *suites, "--db", db, "--json", "--no-report")
    assert code == 0, out
    first = orjson.loads(out)
    runs = {r["case_id"]: r["run_id"] for r in first["results"]}

    code, out = cli(copy, "run", *suites, "--db", db, "--baseline", first["eval_id"])
    assert code == 0, out
    assert f"baseline {first['eval_id']} (named on the command line)" in out
    assert "unchanged: 8 case(s)" in out and "gate: passed" in out
    second = out.split("(eval ")[1].split(")")[0]

    code, out = cli(copy, "report", second, "--db", db)
    assert code == 0, out
    page = Path(out.strip().rsplit(": ", 1)[1]).read_text()
    assert "pinned-fact-outlives-dropped-turns" in page and "request-scope-stays-behind" in page

    code, out = cli(copy, "diff", first["eval_id"], second, "--db", db, "--json")
    assert code == 0, out
    compared = {c["case_id"]: c["kind"] for c in orjson.loads(out)["cases"]}
    assert len(compared) == 8 and set(compared.values()) == {"unchanged"}

    for cassette in ("lookups-summarized", "pinned-fact-outlives-dropped-turns"):
        code, out = cli(copy, "replay", f"replays/memory/{cassette}.yaml")
        assert code == 0, out
        assert "behaviour unchanged: every step matches the recording" in out

    promoted_suite = tmp_path / "golden" / "memory"
    shutil.copytree(copy / "golden" / "memory", promoted_suite)
    code, out = cli(
        copy, "promote", runs["lookups-summarized"], "--db", db,
        "--suite", str(promoted_suite), "--id", "promoted-lookups",
    )  # fmt: skip
    assert code == 0, out
    code, out = cli(
        copy, "run", str(promoted_suite), "--filter", "promoted-lookups", "--db", db, "--json",
        "--no-report",
    )  # fmt: skip
    assert code == 0, out
    (promoted,) = orjson.loads(out)["results"]
    assert promoted["status"] == "passed"


def test_every_stored_turn_of_a_memory_conversation_replays_unchanged(
    copy: Path, tmp_path: Path
) -> None:
    """A later turn starts with the facts earlier turns pinned: the stored run keeps them, so
    replaying it strictly sends the recorded requests (not a system prompt without them)."""
    from agentbench.trace.store import TraceStore

    db = tmp_path / "m.duckdb"
    code, out = cli(copy, "run", "golden/memory", "--db", str(db), "--no-report")
    assert code == 0, out
    with TraceStore(db).reading() as conn:
        rows = conn.execute("SELECT run_id FROM runs ORDER BY started_at").fetchall()
    runs = [row[0] for row in rows]
    assert len(runs) >= 7
    for run in runs:
        code, out = cli(copy, "replay", run, "--db", str(db), "--strict",
                        "--agent", "golden.memory.agent:travel_agent")  # fmt: skip
        assert code == 0 and "verdict: unchanged" in out, (run, out)


def test_every_shipped_suite_can_be_recorded_again() -> None:
    """`scripts/record_golden.py` serves a reference policy for every suite's model name."""
    spec = importlib.util.spec_from_file_location(
        "record_golden", ROOT / "scripts/record_golden.py"
    )
    assert spec and spec.loader
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    for suite_file in sorted((ROOT / "golden").glob("*/suite.yaml")):
        model = yaml.safe_load(suite_file.read_text())["model"]["name"]
        policy = script.POLICIES.get(model)
        assert policy == f"golden.{suite_file.parent.name}.reference", suite_file
        answer = script.respond({"model": model, "messages": [{"role": "user", "content": "hi"}]})
        assert answer, suite_file
