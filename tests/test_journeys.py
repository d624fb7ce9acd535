"""The user's whole path, through the real CLI, on every shipped suite and every kind of change.

For each suite: a temporary git checkout of the repository's suites and cassettes, and one
baseline eval. Then, for each kind of change a user makes — a tool's result, a prompt, a tool
argument's name, a handoff target (where the suite has handoffs), a limit lowered so a brake
fires — on a copy of that checkout: `run --baseline latest --junit --summary-md`, `report`,
`diff EVAL_A EVAL_B`, `replay RUN_ID` and `promote`, then the promoted case runs. Each step
must produce its outputs, name the regressed cases with file and line and the first divergence
(class, step, field), and exit with the documented code. This is the test that would have
caught a stored handoff run crashing the comparison: every stored run is read back through
every reader here.

Commands run in this process (`agentbench.cli.main`), as separate processes would: the suite
packages are forgotten and the code version recomputed before each, and the working folder is
the checkout.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import orjson
import pytest

from agentbench.cli import main
from agentbench.trace.code_version import code_version

ROOT = Path(__file__).resolve().parent.parent
AGENTS = {
    "brakes": "golden.brakes.agent:brakes_agent",
    "customer_service": "golden.customer_service.agent:desk",
    "sql_analyst": "golden.sql_analyst.agent:sql_agent",
    "sre": "golden.sre.agent:sre_agent",
    "memory": "golden.memory.agent:travel_agent",
    "mechanisms": "golden.mechanisms.agent:desk",
    "mcp_time": "golden.mcp_time.agent:clock_agent",
    "mcp_live": "golden.mcp_live.agent:parts_desk",
    "memory_defaults": "golden.memory_defaults.agent:hiking_guide",
    "negative_controls": "golden.negative_controls.agent:library_desk",
    "resilience": "golden.resilience.agent:rates_desk",
}


@dataclass(frozen=True)
class Change:
    """One kind of change to one suite's agent: text replacements in its files."""

    kind: str
    edits: tuple[tuple[str, str, str], ...]  # (file in the suite folder, old, new)
    classes: frozenset[str]  # what the first divergence may be called


def change(kind: str, classes: set[str], *edits: tuple[str, str, str]) -> Change:
    return Change(kind, edits, frozenset(classes))


def edit(old: str, new: str, file: str = "agent.py") -> tuple[str, str, str]:
    return (file, old, new)


def lower_limit(before: str, imports: tuple[str, str]) -> tuple[tuple[str, str, str], ...]:
    """`limits=Limits(max_iterations=1)` added to the agent whose definition has `before`."""
    return (
        edit(before, f"    limits=Limits(max_iterations=1),\n{before}"),
        edit(*imports),
    )


# A limit lowered so a brake fires: the run stops early (its guard is an extra step, the
# recorded call it no longer makes a missing one) or stops for another reason.
BRAKE = {"extra_step", "missing_step", "stop_reason_changed"}
IMPORT_LIMITS = ("from agentbench import Agent,", "from agentbench import Limits, Agent,")
CHANGES: dict[str, list[Change]] = {
    "brakes": [
        change("tool_result", {"tool_result_changed"}, edit("MFA is required.", "MFA is off.")),
        change(
            "prompt",
            {"request_drift"},
            edit("Use the tools; be brief.", "Use the tools; keep answers short."),
        ),
        change(
            "argument",
            {"request_drift"},
            edit("def search_docs(query: str)", "def search_docs(terms: str)"),
            edit("query: Search words.", "terms: Search words."),
            edit("if key in query.lower()", "if key in terms.lower()"),
        ),
        change("limit", BRAKE, edit("max_iterations=5", "max_iterations=1")),
    ],
    "customer_service": [
        change("tool_result", {"tool_result_changed"}, edit('"total": 42.5', '"total": 40.5')),
        change(
            "prompt",
            {"request_drift"},
            edit("You triage support requests", "You sort incoming support requests"),
        ),
        change(
            "argument",
            {"request_drift"},
            edit("def order_status(order_id: str)", "def order_status(order_ref: str)"),
            edit('order_id: The order id, e.g. "A17".', 'order_ref: The order, e.g. "A17".'),
            edit("ORDERS.get(order_id.upper())\n    if", "ORDERS.get(order_ref.upper())\n    if"),
            edit('order {order_id!r}")\n    age', 'order {order_ref!r}")\n    age'),
            edit('"order_id": order_id.upper(), **', '"order_id": order_ref.upper(), **'),
        ),
        change(
            "handoff",
            {"request_drift", "handoff_changed"},
            edit("    handoffs=[refunds],\n", "    handoffs=[billing],\n"),
            edit("triage = Agent(", 'billing = Agent(name="billing")\ntriage = Agent('),
        ),
        change("limit", BRAKE, *lower_limit('    reads=["triage"],\n', IMPORT_LIMITS)),
    ],
    "sql_analyst": [
        change(
            "tool_result",
            {"tool_result_changed"},
            edit('"Ada Lovelace", "gold"', '"Ada Lovelace", "silver"', file="data.py"),
        ),
        change(
            "prompt",
            {"request_drift"},
            edit("Answer in one sentence.", "Answer in one short sentence."),
        ),
        change(
            "limit",
            BRAKE,
            *lower_limit(
                "    tools=[sql_query(",
                ("from agentbench import Agent", "from agentbench import Agent, Limits"),
            ),
        ),
    ],
    "sre": [
        change("tool_result", {"tool_result_changed"}, edit('"cpu_pct": 78', '"cpu_pct": 79')),
        change(
            "prompt",
            {"request_drift"},
            edit("never guess numbers.", "never make up numbers."),
        ),
        change(
            "argument",
            {"request_drift"},
            edit("def cluster_status(cluster: str)", "def cluster_status(name: str)"),
            edit('        cluster: Cluster name, e.g. "prod-eu".', '        name: e.g. "prod-eu".'),
            edit(
                "    status = CLUSTERS.get(cluster)\n",
                "    cluster = name\n    status = CLUSTERS.get(cluster)\n",
            ),
        ),
        change("limit", BRAKE, *lower_limit("    tools=[cluster_status,", IMPORT_LIMITS)),
    ],
    "memory": [
        change("tool_result", {"tool_result_changed"}, edit('"Lisbon: 24°C', '"Lisbon: 25°C')),
    ],
    "memory_defaults": [
        change(
            "tool_result",
            {"tool_result_changed"},
            edit('"canyon": ("Canyon", 1, "dry"', '"canyon": ("Canyon", 3, "dry"'),
        ),
        # The default policy given a larger budget: the summary the recording has goes missing.
        change(
            "memory_budget",
            {"missing_step", "memory_changed"},
            edit("memory=MemoryPolicy(max_tokens=900)", "memory=MemoryPolicy(max_tokens=5_000)"),
        ),
    ],
    "mechanisms": [
        # A request-only token written to the session instead: it now crosses the handoff.
        change(
            "context_scope",
            {"extra_step", "missing_step", "context_changed"},
            edit('-7f3a", scope="request")', '-7f3a")'),
        ),
    ],
    "mcp_time": [
        change("tool_result", {"tool_result_changed"}, edit('"Europe/Oslo"', '"Europe/Stockholm"')),
        # The MCP server's tool changed (its snapshot re-written): the model is shown another tool.
        change(
            "mcp_schema",
            {"request_drift"},
            edit(
                '"Convert time between timezones"',
                '"Convert a time between time zones"',
                file="time_tools.json",
            ),
        ),
    ],
    "mcp_live": [
        # The stub MCP server answers otherwise: its tools run live, so the result changes.
        change(
            "tool_result",
            {"tool_result_changed"},
            edit('"in_stock": 14, "bin"', '"in_stock": 12, "bin"', file="parts_server.py"),
        ),
        change(
            "mcp_schema",
            {"request_drift"},
            edit(
                '"Reserve parts for a job; refused when fewer are in stock."',
                '"Reserve spare parts for a job; refused when fewer are in stock."',
                file="parts_tools.json",
            ),
        ),
    ],    # The recording every control replays changes: the true case regresses; no control turns
    # true by it, so none passes (an XPASS would be a scorer gone lenient).
    "negative_controls": [
        change("tool_result", {"tool_result_changed"}, edit('"shelf": "F-12"', '"shelf": "F-14"')),
        change(
            "prompt",
            {"request_drift"},
            edit("Look books up before reserving them.", "Look a book up before reserving it."),
        ),
    ],    # Served through the openai client and the bundled server, faults and all.
    "resilience": [
        change("tool_result", {"tool_result_changed"}, edit('"CHF": 0.9412', '"CHF": 0.9415')),
        change(
            "prompt",
            {"request_drift"},
            edit("Look every rate up; never guess.", "Look every rate up; do not guess."),
        ),
    ],
}
JOURNEYS = [(suite, c) for suite, changes in CHANGES.items() for c in changes]


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> dict:
        return orjson.loads(self.out)


def agentbench(checkout: Path, *args: str) -> Result:
    """One command in `checkout`, as a fresh process would run it."""
    for name in [m for m in sys.modules if m == "golden" or m.startswith("golden.")]:
        del sys.modules[name]  # the agent code of *this* checkout, as it is now
    sys.path[:] = [p for p in sys.path if not p.startswith(str(checkout.parent.parent))]
    code_version.cache_clear()
    out, err = io.StringIO(), io.StringIO()
    environment = {k: v for k, v in os.environ.items() if k != "AGENTBENCH_DB"}  # its own store
    with (
        mock.patch.dict(os.environ, environment, clear=True),
        contextlib.chdir(checkout),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        code = main(list(args))
    return Result(code, out.getvalue(), err.getvalue())


def git(checkout: Path, *args: str) -> None:
    identity = ["-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", *identity, *args], cwd=checkout, check=True, capture_output=True)


@pytest.fixture(scope="module")
def baseline_of(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], tuple[Path, str]]:
    """Per suite, made on its first journey: a committed checkout with one baseline eval in its
    store (shared by that suite's journeys; a suite's journeys run on one pytest-xdist worker,
    tests/work_units.py)."""

    @functools.cache
    def baseline(suite: str) -> tuple[Path, str]:
        checkout = tmp_path_factory.mktemp(f"journey-{suite}") / "repo"
        golden = checkout / "golden"
        shutil.copytree(ROOT / "golden" / suite, golden / suite, ignore=_generated)
        for name in ("__init__.py", "_reference.py"):
            shutil.copy(ROOT / "golden" / name, golden / name)
        shutil.copytree(ROOT / "replays" / suite, checkout / "replays" / suite)
        shutil.copytree(ROOT / "schema", checkout / "schema")
        (checkout / ".gitignore").write_text(
            ".agentbench/\nreports/\n__pycache__/\n*.duckdb\n.*.duckdb*\n"
        )
        git(checkout, "init", "-q", "-b", "main")
        git(checkout, "add", "-A")
        git(checkout, "commit", "-qm", f"{suite} suite")
        first = agentbench(checkout, "run", f"golden/{suite}", "--json", "--no-report")
        assert first.code == 0, first.err + first.out
        return checkout, first.json()["eval_id"]

    return baseline


def _generated(folder: str, names: list[str]) -> list[str]:
    return [n for n in names if n.endswith(".duckdb") or n == "__pycache__"]


def apply(checkout: Path, suite: str, edits: tuple[tuple[str, str, str], ...]) -> None:
    for name, old, new in edits:
        path = checkout / "golden" / suite / name
        text = path.read_text()
        assert old in text, f"{path}: the journey's edit no longer applies: {old!r}"
        path.write_text(text.replace(old, new, 1))


FIRST = re.compile(r"first divergence — step (\d+) \(([\w-]+)\) (\w+): (.+)")
REGRESSED = re.compile(r"^  - (\w+)/([\w-]+) \((\S+\.yaml):(\d+)\) ", re.MULTILINE)


# The ids start with the suite: tests/work_units.py hands a suite's journeys to one worker.
@pytest.mark.slow
@pytest.mark.parametrize(("suite", "journey"), JOURNEYS, ids=[f"{s}-{c.kind}" for s, c in JOURNEYS])
def test_the_whole_path(
    suite: str,
    journey: Change,
    baseline_of: Callable[[str], tuple[Path, str]],
    tmp_path: Path,
) -> None:
    source, baseline = baseline_of(suite)
    checkout = tmp_path / "repo"
    shutil.copytree(source, checkout, symlinks=True)
    apply(checkout, suite, journey.edits)

    # run against the baseline, with every CI output
    junit, summary = checkout / "junit.xml", checkout / "summary.md"
    ran = agentbench(
        checkout, "run", f"golden/{suite}", "--baseline", "latest",
        "--junit", str(junit), "--summary-md", str(summary),
    )  # fmt: skip
    assert ran.code == 1, ran.err + ran.out  # the gate failed, and said why
    assert f"baseline {baseline} (latest" in ran.out
    assert "Traceback" not in ran.err + ran.out
    regressed = REGRESSED.findall(ran.out)
    assert regressed, ran.out
    for case_suite, _case, file, line in regressed:
        assert case_suite == suite
        lines = (checkout / file).read_text().splitlines()
        assert lines[int(line) - 1].lstrip("- ").startswith("id:"), (file, line)
    first = FIRST.findall(ran.out)
    assert first and {cls for _, _, cls, _ in first} & journey.classes, ran.out
    assert junit.is_file() and "<failure" in junit.read_text()
    assert summary.is_file() and "gate failed" in summary.read_text()
    report = re.search(r"^report: (.+)$", ran.out, re.MULTILINE)
    assert report and Path(report[1]).is_absolute() and Path(report[1]).is_file()

    # the report again, from the store
    again = agentbench(checkout, "report", "latest")
    assert again.code == 0, again.err
    page = Path(again.out.strip().rsplit(": ", 1)[1]).read_text()
    assert all(case in page for _, case, _, _ in regressed)

    # the two evals compared
    listed = agentbench(
        checkout, "traces", "sql", "SELECT eval_id FROM evals ORDER BY started_at", "--format",
        "json",
    )  # fmt: skip
    evals = [row["eval_id"] for row in listed.json()]
    assert evals[0] == baseline and len(evals) == 2
    diff = agentbench(checkout, "diff", baseline, evals[1], "--json")
    assert diff.code == 1, diff.err
    cases = {c["case_id"]: c for c in diff.json()["cases"]}
    case = cases[regressed[0][1]]
    assert case["kind"] == "newly_failing" and case["divergences"]
    divergence = case["divergences"][0]
    assert divergence["class"] in journey.classes and divergence["step"] >= 0
    if divergence["class"] == "request_drift":  # the field of the request that changed
        assert divergence["changes"] and divergence["changes"][0]["path"]
    elif divergence["class"] == "tool_result_changed":  # the field of the result
        assert divergence["old"] != divergence["new"]

    # the baseline's run of a regressed case, replayed against the changed code
    run_id = case["baseline"]["run_id"]
    # Lenient replay (the default) reports a changed request without counting it; a change
    # that is only a changed request shows as a divergence with --strict.
    strict = ["--strict"] if "request_drift" in journey.classes else []
    replayed = agentbench(checkout, "replay", run_id, "--agent", AGENTS[suite], *strict)
    assert replayed.code == 1, replayed.err + replayed.out
    assert "verdict: DIVERGED" in replayed.out and "first divergence — step" in replayed.out

    # the baseline's run promoted to a case: it catches the change, and passes without it
    promoted = agentbench(
        checkout, "promote", run_id, "--suite", f"golden/{suite}", "--id", "journey-promoted"
    )
    assert promoted.code == 0, promoted.err + promoted.out
    assert agentbench(checkout, "run", f"golden/{suite}", "--filter", "journey-promoted").code == 1
    apply(checkout, suite, tuple((name, new, old) for name, old, new in journey.edits[::-1]))
    # In a process of its own, as a user's next command runs: DuckDB shares one open database
    # per file and process, and this process may still hold the changed build of a suite's.
    back = subprocess.run(
        [sys.executable, "-m", "agentbench", "run", f"golden/{suite}", "--filter",
         "journey-promoted", "--no-report"],
        cwd=checkout, capture_output=True, text=True, check=False,
        env={k: v for k, v in os.environ.items() if k != "AGENTBENCH_DB"},
    )  # fmt: skip
    assert back.returncode == 0, back.stdout + back.stderr


def test_every_shipped_suite_has_journeys() -> None:
    shipped = {p.parent.name for p in (ROOT / "golden").glob("*/suite.yaml")}
    # A suite whose agent is a framework's own code (a boundary target) has its journeys in a
    # tests/test_journey_<framework>.py file of its own, which names the suite.
    own_files = [p.read_text() for p in (ROOT / "tests").glob("test_journey_*.py")]
    elsewhere = {suite for suite in shipped if any(f'"{suite}"' in t for t in own_files)}
    assert shipped == set(CHANGES) | elsewhere
