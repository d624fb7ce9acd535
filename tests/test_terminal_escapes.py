"""Terminal escapes in what the CLI prints (issue 34's review of serve).

The probe: a served request with `context.user = "\\x1b[31mRED\\x1b]52;c;ZXZpbA==\\x07"` and
content `"\\x1b]0;pwned\\x07 \\x9b31m"`; `agentbench traces show` printed the OSC 52 clipboard
write, the window title, the BEL and the C1 CSI raw, for the user's terminal to act on. Every
command that prints a run's, a model's, a tool's or a suite's text — `traces list/show/sql`,
`replay`, `diff`, `run`'s failure reasons, `gate`, an error line — now shows each control
character as its escape; `--json` (and `--format json|csv`) stays the document its format says.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import openai
import orjson
import pytest
from serve_support import desk_agent, served, service_for

from agentbench.cli import main
from agentbench.runtime.models import FunctionModel
from agentbench.terminal import escaped
from agentbench.trace import TraceStore

ROOT = Path(__file__).resolve().parent.parent
USER = "\x1b[31mRED\x1b]52;c;ZXZpbA==\x07"
CONTENT = "\x1b]0;pwned\x07 \x9b31m"
# What a terminal acts on: C0 but newline and tab, DEL, C1.
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def test_escaped_writes_every_control_character_as_its_escape() -> None:
    assert escaped(USER) == "\\x1b[31mRED\\x1b]52;c;ZXZpbA==\\x07"
    assert escaped(CONTENT) == "\\x1b]0;pwned\\x07 \\x9b31m"
    assert escaped("a\tb\nc\rd\x00\x7f\x85é") == "a\tb\nc\\rd\\x00\\x7f\\x85é"
    every = "".join(map(chr, range(0xA0)))
    assert not CONTROL.search(escaped(every))


def test_half_an_emoji_is_printed_as_its_escape_not_a_failed_command() -> None:
    """No terminal's encoding can write a lone surrogate: printed raw it raised
    UnicodeEncodeError, and the command ended in 'this is a bug'."""
    assert escaped("cut \ud83d, whole \U0001f600") == "cut \\ud83d, whole \U0001f600"
    escaped("cut \ud83d").encode("utf-8")  # writable now


def _echo(request: dict[str, Any]) -> str:
    return f"You said: {request['messages'][-1]['content']}"


echo = desk_agent(name="desk")
echo.model = FunctionModel(_echo, name="echo-model")
changed = dataclasses.replace(echo, instructions=f"You answer questions about orders. {CONTENT}")


@pytest.fixture(scope="module")
def served_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """Two served runs holding the probe's text (one with the context user), in a store."""
    db = tmp_path_factory.mktemp("escapes") / "t.duckdb"
    store = TraceStore(db)
    with (
        served(service_for(echo, store=store)) as url,
        openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0) as client,
    ):
        ids = []
        for content, context in ((CONTENT, {"user": USER}), ("plain " + CONTENT[::-1], {})):
            answer = client.chat.completions.create(
                model="desk",
                messages=[{"role": "user", "content": content}],
                extra_body={"agentbench": {"context": context}},
            )
            ids.append(answer.model_extra["agentbench"]["run_id"])
    store.close()
    return db, ids


def _said(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.mark.parametrize(
    ("command", "shows"),
    [
        (["traces", "show", "{a}"], "output   You said: \\x1b]0;pwned\\x07 \\x9b31m"),
        (["traces", "list"], "plain m13\\x9b"),
        (["traces", "sql", "SELECT output FROM runs"], "\\u0007 \\x9b31m"),
        (["diff", "{a}", "{b}"], "\\x9b31m"),
        # Instructions changed since: the divergence quotes them.
        (["replay", "{a}", "--agent", "tests/test_terminal_escapes.py:changed"], "\\x9b31m"),
        # An error line quoting what was typed.
        (["traces", "show", "run_\x1b]52;c;ZXZpbA==\x07"], "run_\\x1b]52;c;ZXZpbA==\\x07"),
    ],
    ids=["show", "list", "sql", "diff", "replay", "error"],
)
def test_what_the_cli_prints_of_a_served_run_holds_no_terminal_control(
    served_runs: tuple[Path, list[str]],
    capsys: pytest.CaptureFixture[str],
    command: list[str],
    shows: str,
) -> None:
    db, (a, b) = served_runs
    args = [part.format(a=a, b=b) for part in command]
    _, said = _said(capsys, *args, "--db", str(db))
    assert not CONTROL.search(said), said
    assert shows in said, said


def test_traces_show_shows_the_probe_escaped_and_json_stays_json(
    served_runs: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    db, (run_id, _) = served_runs
    code, shown = _said(capsys, "traces", "show", run_id, "--db", str(db))
    assert code == 0
    assert "context  " in shown and "ZXZpbA==" in shown  # the context line, JSON-escaped
    assert "output   You said: \\x1b]0;pwned\\x07 \\x9b31m" in shown
    code, document = _said(capsys, "traces", "show", run_id, "--json", "--db", str(db))
    assert code == 0
    run = orjson.loads(document)["run"]
    assert run["input"] == [{"role": "user", "content": CONTENT}]
    assert run["context"]["session"]["user"] == USER


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A checkout holding the brakes suite, one case expecting the probe's text."""
    folder = tmp_path / "repo"
    shutil.copytree(ROOT / "golden" / "brakes", folder / "golden" / "brakes")
    shutil.copytree(ROOT / "replays" / "brakes", folder / "replays" / "brakes")
    for name in ("__init__.py", "_reference.py"):
        shutil.copy(ROOT / "golden" / name, folder / "golden" / name)
    cases = folder / "golden" / "brakes" / "cases" / "brakes.yaml"
    cases.write_text(
        cases.read_text().replace(
            "    - output_contains: MFA is required\n",
            '    - output_equals: "\\e]52;c;ZXZpbA==\\a \\x9b31m"\n',
        )
    )
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=folder, check=True)
    subprocess.run([*git, "add", "-A"], cwd=folder, check=True)
    subprocess.run([*git, "commit", "-qm", "suites"], cwd=folder, check=True)
    return folder


def test_run_and_gate_show_failure_reasons_escaped(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(repo / "t.duckdb")
    case = ["--filter", "brakes/broken-json-corrected", "--no-report", "--db", db]
    code, ran = _said(capsys, "run", str(repo / "golden" / "brakes"), *case)
    assert code == 1
    assert not CONTROL.search(ran), ran
    assert 'expected output "\\x1b]52;c;ZXZpbA==\\x07 \\x9b31m"' in ran
    code, gated = _said(capsys, "gate", "latest", "--no-report", "--db", db)
    assert code == 1
    assert not CONTROL.search(gated), gated
    assert '"\\x1b]52;c;ZXZpbA==\\x07 \\x9b31m"' in gated


def test_a_terminal_sees_the_escapes_from_a_real_process(
    served_runs: tuple[Path, list[str]],
) -> None:
    """The installed entry point, its output a pipe: the same escapes, nothing stripped."""
    db, (run_id, _) = served_runs
    done = subprocess.run(
        [sys.executable, "-m", "agentbench", "traces", "show", run_id, "--db", str(db)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert not CONTROL.search(done.stdout)
    assert "You said: \\x1b]0;pwned\\x07 \\x9b31m" in done.stdout
