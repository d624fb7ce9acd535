"""A suite's agent that is a command (`agent: {command: [...]}`), through the real CLI.

The program here is a Python script run by this interpreter (no Node needed): it reads the
turn from stdin, answers from its model through OPENAI_BASE_URL with the openai SDK, and
prints the answer. Recorded live against the bundled server, then replayed offline; what it
was handed (stdin, environment) is checked, and each way a program can fail — a non-zero
exit, a timeout with a child of its own, too much output, a missing program — is the run's
error or a clear usage error. `requires: [program:…, file:…]` skips a suite with the reason.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from agentbench.boundary.process import run_process
from agentbench.cli import main
from agentbench.testing import OpenAICompatibleServer

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

AGENT = r"""
import json, os, subprocess, sys, time
from openai import OpenAI

turn = json.load(sys.stdin)
mode = turn["context"].get("mode", "chat")
if mode == "handed":
    seen = {key: os.environ.get(key) for key in (
        "OPENAI_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY",
        "AGENTBENCH_MODEL", "AGENTBENCH_TURN", "SUITE_SETTING")}
    with open(turn["context"]["into"], "w") as f:
        json.dump({"stdin": turn, "env": seen, "cwd": os.getcwd()}, f)
    print(json.dumps({"output": {"turn": turn["turn"]}}))
elif mode == "fail":
    print("loading the tools", file=sys.stderr)
    print("KeyError: 'flights'", file=sys.stderr)
    sys.exit(3)
elif mode == "hang":
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with open(turn["context"]["pid_file"], "w") as f:
        f.write(str(child.pid))
    print("waiting for ever", file=sys.stderr, flush=True)
    time.sleep(600)
else:
    client = OpenAI()  # OPENAI_BASE_URL and OPENAI_API_KEY from the environment
    messages = [{"role": "user", "content": turn["input"]}] if isinstance(
        turn["input"], str) else turn["input"]
    tools = [{"type": "function", "function": {"name": "weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}}}}]
    while True:
        answer = client.chat.completions.create(
            model=os.environ["AGENTBENCH_MODEL"], messages=messages, tools=tools)
        message = answer.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            break
        for call in message.tool_calls:
            city = json.loads(call.function.arguments)["city"]
            result = json.dumps({"city": city, "temp_c": 18})
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    print(message.content)
"""

CASES = """
- id: weather
  input: Weather in Paris?
  expect:
    - tool_called: {name: weather, args: {city: Paris}}
    - output_contains: "18 C"
- id: follow-up
  inputs: ["Weather in Paris?", "And in Oslo?"]
  expect:
    - output_contains: "Oslo: 18 C"
"""


def respond(request: dict[str, Any]) -> Any:
    from agentbench import ToolCall

    messages = request["messages"]
    question = next(m["content"] for m in reversed(messages) if m["role"] == "user")
    city = "Oslo" if "Oslo" in question else "Paris"
    last = messages[-1]
    if last["role"] == "tool":
        return f"{city}: {orjson.loads(last['content'])['temp_c']} C"
    seen = sum(len(m.get("tool_calls") or ()) for m in messages)
    return [ToolCall("weather", {"city": city}, id=f"call_{seen + 1}")]


def suite(folder: Path, agent: str, cases: str = CASES, extra: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "agent.py").write_text(AGENT)
    (folder / "cases").mkdir(exist_ok=True)
    (folder / "cases" / "cases.yaml").write_text(cases)
    (folder / "suite.yaml").write_text(
        f"name: {folder.name}\nagent: {agent}\nmodel: {{name: reference-weather}}\n"
        f"cassettes: cassettes\nscorers: [{{stop_reason: completed}}]\n{extra}"
    )
    return folder


def command(timeout: float = 60) -> str:
    return f'{{command: ["{sys.executable}", "agent.py"], timeout: {timeout}}}'


def run_json(*arguments: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code = main(["run", *arguments, "--json", "--no-report"])
    out = capsys.readouterr().out
    return code, orjson.loads(out)


def case_of(summary: dict[str, Any], case_id: str) -> dict[str, Any]:
    return next(r for r in summary["results"] if r["case_id"] == case_id)


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real-secret-of-the-user")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-real-secret")
    return tmp_path


def test_a_command_agent_records_live_and_replays_offline(workdir: Path, capsys) -> None:
    folder = suite(workdir / "weather", command())
    with OpenAICompatibleServer(responder=respond) as server:
        os.environ["OPENAI_BASE_URL"] = server.base_url
        try:
            code, summary = run_json(
                str(folder), "--live", "--record-mode", "all", capsys=capsys
            )
        finally:
            del os.environ["OPENAI_BASE_URL"]
        # The program's calls reached the real endpoint through agentbench, with the
        # user's key (which the program itself never held).
        assert {r.headers.get("authorization") for r in server.requests} == {
            "Bearer sk-real-secret-of-the-user"
        }
    assert code == 0, summary
    assert sorted(p.name for p in (folder / "cassettes").iterdir()) == [
        "follow-up.yaml",
        "weather.yaml",
    ]
    # Offline: no server; the cassettes answer.
    code, summary = run_json(str(folder), capsys=capsys)
    assert code == 0, summary
    assert case_of(summary, "follow-up")["status"] == "passed"


def test_what_the_program_is_handed(workdir: Path, capsys) -> None:
    into = workdir / "handed.json"
    cases = f"""
- id: handed
  inputs: [first question, second question]
  context: {{mode: handed, traveller: Ada, into: '{into}'}}
  expect: [{{output_contains: '"turn":2'}}]
"""
    agent = (
        f'{{command: ["{sys.executable}", "{{suite}}/agent.py"], cwd: "sub", '
        'env: {SUITE_SETTING: "{suite}/x", OPENAI_BASE_URL: "http://elsewhere"}}'
    )
    folder = suite(workdir / "handed", agent, cases)
    (folder / "sub").mkdir()
    code, summary = run_json(str(folder), "--live", "--record-mode", "all", capsys=capsys)
    # The JSON object's `output` is the output (kept as data: its JSON text here).
    assert code == 0, case_of(summary, "handed")
    handed = orjson.loads(into.read_text())  # what the last turn was handed
    stdin, env = handed["stdin"], handed["env"]
    assert stdin["turn"] == 2 and stdin["model"] == "reference-weather"
    assert stdin["context"] == {"mode": "handed", "traveller": "Ada", "into": str(into)}
    assert stdin["input"] == [
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": '{"turn":1}'},
        {"role": "user", "content": "second question"},
    ]
    base = stdin["base_url"]
    assert base.startswith("http://127.0.0.1:") and base.endswith("/v1")
    assert stdin["anthropic_base_url"] == base.removesuffix("/v1")
    assert env == {
        "OPENAI_BASE_URL": base,  # the suite's env cannot send the calls elsewhere
        "OPENAI_API_KEY": "agentbench-boundary",
        "ANTHROPIC_BASE_URL": base.removesuffix("/v1"),
        "ANTHROPIC_API_KEY": "agentbench-boundary",
        "AGENTBENCH_MODEL": "reference-weather",
        "AGENTBENCH_TURN": "2",
        "SUITE_SETTING": f"{folder.resolve()}/x",
    }
    assert handed["cwd"] == str((folder / "sub").resolve())


def test_a_failing_program_is_the_run_error_with_its_exit_code_and_stderr(
    workdir: Path, capsys
) -> None:
    cases = "- id: broken\n  input: hi\n  context: {mode: fail}\n"
    folder = suite(workdir / "failing", command(), cases)
    code, summary = run_json(str(folder), "--live", "--record-mode", "all", capsys=capsys)
    assert code == 1
    error = case_of(summary, "broken")["scores"][0]["reason"]
    said = "loading the tools\nKeyError: 'flights'"
    assert f"(CommandFailed: {sys.executable} agent.py exited 3: {said})" in error


def test_a_program_past_its_timeout_is_killed_with_its_children(workdir: Path, capsys) -> None:
    pid_file = workdir / "child.pid"
    cases = f"- id: hangs\n  input: hi\n  context: {{mode: hang, pid_file: '{pid_file}'}}\n"
    folder = suite(workdir / "hanging", command(timeout=5), cases)
    code, summary = run_json(str(folder), "--live", "--record-mode", "all", capsys=capsys)
    assert code == 1
    error = case_of(summary, "hangs")["scores"][0]["reason"]
    assert "agent.py did not finish within 5 s (timeout; killed): waiting for ever" in error
    assert until(lambda: not alive(int(pid_file.read_text())))


def until(condition: Callable[[], object], within_s: float = 30) -> bool:
    """Whether `condition` comes true within `within_s` (a killed process takes a moment to
    be gone; the program takes a moment to start): a bound on waiting, not a timing."""
    deadline = time.monotonic() + within_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def alive(pid: int) -> bool:
    """Whether `pid` still runs (a killed process not yet reaped by init is a zombie)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_a_cancelled_turn_kills_the_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    script = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "print('started', flush=True)\n"
        "time.sleep(600)\n"
    )

    async def cancelled() -> None:
        task = asyncio.ensure_future(
            run_process(
                [sys.executable, "-c", script],
                stdin=b"",
                env=os.environ,
                cwd=tmp_path,
                timeout_s=600,
                stdout_limit=1024,
                stderr_limit=1024,
            )
        )
        await asyncio.to_thread(until, lambda: pid_file.exists() and pid_file.read_text())
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancelled())
    assert until(lambda: not alive(int(pid_file.read_text())))


def test_a_turn_ends_when_the_program_exits_though_a_child_it_left_holds_its_output(
    tmp_path: Path,
) -> None:
    # The child inherits stdout and stderr and outlives the program (a helper server it
    # never stopped): the turn is over when the program exits, and the child is killed.
    script = (
        "import subprocess, sys\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        "print(child.pid)\n"
    )
    finished = asyncio.run(
        run_process(
            [sys.executable, "-c", script],
            stdin=b"x" * 300_000,  # more than a pipe holds: written as the program reads
            env=os.environ,
            cwd=tmp_path,
            timeout_s=300,
            stdout_limit=1024,
            stderr_limit=1024,
        )
    )
    assert not finished.timed_out and finished.returncode == 0
    assert until(lambda: not alive(int(finished.stdout)))


def test_output_past_the_limit_is_cut_and_the_program_killed(tmp_path: Path) -> None:
    script = "import sys\nwhile True: sys.stdout.write('x' * 4096)\n"
    finished = asyncio.run(
        run_process(
            [sys.executable, "-c", script],
            stdin=b"",
            env=os.environ,
            cwd=tmp_path,
            timeout_s=600,
            stdout_limit=100_000,
            stderr_limit=1024,
        )
    )
    assert finished.stdout_overflow and finished.returncode is None
    assert finished.stdout == b"x" * 100_000


def test_a_missing_program_is_a_clear_suite_error(workdir: Path, capsys) -> None:
    folder = suite(workdir / "missing", '{command: ["no-such-agent-program", "agent.ts"]}')
    code, summary = run_json(str(folder), capsys=capsys)
    assert code == 2
    assert summary["suite_errors"] == [
        f"{folder / 'suite.yaml'}:2:1: agent: command 'no-such-agent-program' is not found on PATH"
    ]
    # A path is the suite folder's (or cwd's) file, which must be executable.
    folder = suite(workdir / "not_executable", '{command: ["./agent.py"]}')
    code, summary = run_json(str(folder), capsys=capsys)
    assert code == 2
    assert summary["suite_errors"] == [
        f"{folder / 'suite.yaml'}:2:1: agent: command './agent.py' is not an executable file in "
        f"{folder.resolve()}"
    ]


def test_requires_programs_and_files_skip_the_suite_with_the_reason(
    workdir: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = suite(
        workdir / "node_agent",
        '{command: ["no-such-node", "agent.ts"]}',
        extra="requires: [program:no-such-node, file:node_modules/openai]\n",
    )
    (folder / "package-lock.json").write_text("{}")
    code, summary = run_json(str(folder), capsys=capsys)
    assert code == 0
    weather = case_of(summary, "weather")
    assert weather["status"] == "skipped"
    assert weather["error"] == (
        "suite 'node_agent' needs no-such-node on PATH; node_modules/openai: run `npm ci` in "
        "node_agent"
    )
    # Once both are there, the suite runs (its program here: this interpreter, on PATH).
    (folder / "node_modules" / "openai").mkdir(parents=True)
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    program = Path(sys.executable).name
    (folder / "suite.yaml").write_text(
        (folder / "suite.yaml").read_text().replace("no-such-node", program)
    )
    code, summary = run_json(str(folder), capsys=capsys)
    assert code == 3  # it ran, with no cassette recorded to replay
    assert "no cassette at" in case_of(summary, "weather")["error"]


def test_a_bad_requires_entry_names_where_it_is(workdir: Path, capsys) -> None:
    folder = suite(workdir / "bad", command(), extra='requires: ["program:"]\n')
    assert main(["run", str(folder), "--no-report"]) == 2
    err = capsys.readouterr().err
    assert "suite.yaml:6:1: requires: 'program:': expected a module name, program:NAME or" in err


def test_a_command_agents_cassette_away_from_its_suite_names_what_to_pass(
    workdir: Path, capsys
) -> None:
    # What the cassette names as its agent is the command, which only its suite can run.
    shipped = Path(__file__).resolve().parent.parent / "replays" / "typescript_agent"
    cassette = workdir / "track-parcel.yaml"
    shutil.copy(shipped / "track-parcel.yaml", cassette)
    assert main(["replay", str(cassette), "--db", str(workdir / "r.duckdb")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: {cassette}: the cassette was recorded by a command agent (node --import tsx "
        "agent.ts) whose suite folder (metadata.agentbench.suite_dir) has no suite.yaml; pass "
        "it with --suite FOLDER"
    )


def test_a_case_skipped_for_what_it_requires_cannot_be_bisected(workdir: Path, capsys) -> None:
    repo = workdir / "repo"
    suite(repo / "golden" / "needs_node", command(), extra="requires: [program:no-such-node]\n")
    identity = ["-c", "user.name=t", "-c", "user.email=t@example.com"]

    def git(*args: str) -> None:
        subprocess.run(["git", *identity, *args], cwd=repo, check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    git("add", "-A")
    git("commit", "-qm", "suite")
    (repo / "NOTES.md").write_text("notes\n")
    git("add", "-A")
    git("commit", "-qm", "notes")
    os.chdir(repo)
    code = main(["bisect", "weather", "--good", "HEAD~1", "--bad", "HEAD",
                 "--suite", "golden/needs_node"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 3, err
    assert (
        "needs_node/weather was skipped there (suite 'needs_node' needs no-such-node on PATH): "
        "a skipped case cannot be bisected"
    ) in err
