"""A command imports what it runs, and no more: `agentbench --help` loads none of the heavy
libraries, and a command loads only its own (issue 39: every command used to pay about a
second of CPU for all of them before doing anything). Checked by what a fresh process has
imported, not by timing: a loaded machine changes the seconds, never the modules."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # fresh interpreters, a few tenths of a second each

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("duckdb", "pydantic", "openai", "pyarrow", "jinja2", "httpx", "anthropic", "mcp")


def imported_by(args: list[str]) -> set[str]:
    """The heavy libraries a fresh process has imported after running `agentbench ARGS`."""
    code = (
        "import sys\nfrom agentbench.cli import main\n"
        f"code = main({args!r})\n"
        "import json\n"
        f"print(json.dumps([sorted(m for m in {HEAVY!r} if m in sys.modules), code]),"
        " file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    found, code = json.loads(done.stderr.strip().splitlines()[-1])
    assert code == 0, done.stderr
    return set(found)


def test_help_imports_none_of_the_heavy_libraries() -> None:
    assert imported_by(["--help"]) == set()
    assert imported_by(["mcp-proxy", "--help"]) == set()
    assert imported_by(["traces", "--help"]) <= {"duckdb", "pydantic", "pyarrow"}


def test_a_command_imports_its_own_libraries_only(tmp_path: Path) -> None:
    # traces list reads the store: DuckDB yes, the openai SDK and the report's jinja2 no.
    from agentbench import Agent, Runner, ScriptedModel
    from agentbench.trace import TraceStore

    store = TraceStore(tmp_path / "runs.duckdb")
    Runner.run_sync(Agent(name="a"), "hi", model=ScriptedModel(["hello"]), store=store)
    store.close()
    found = imported_by(["traces", "list", "--db", str(tmp_path / "runs.duckdb")])
    assert "duckdb" in found
    assert not found & {"openai", "jinja2", "anthropic", "mcp", "httpx"}
