"""The Python sandbox against hostile programs: each is contained, reported, and leaves nothing.

Every hostile program runs for real, under small limits so the corpus stays fast. Each test
checks the outcome the model would see and, through the autouse fixture, that no process of
the sandbox outlives the call. Tests that would touch the network if the kernel refused a
network namespace are skipped on such a machine rather than allowed to reach out.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from sandbox_support import (
    AS_ROOT,
    LIMITS,
    NOBODY,
    Check,
    ended,
    no_stray_processes,  # noqa: F401  (autouse)
    printed,
    raised,
    run,
)

from agentbench import ResultKind
from agentbench.errors import UsageError
from agentbench.runtime.builtin._sandbox_outcome import _warnings
from agentbench.runtime.builtin._sandbox_process import Capture
from agentbench.runtime.builtin.sandbox import _isolation_summary, _pick_interpreter
from agentbench.tools import (
    SandboxLimits,
    SandboxOutcome,
    SandboxResult,
    python_sandbox,
    run_python,
    sandbox_isolation,
)

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop


@pytest.fixture(scope="module")
def isolation() -> dict[str, object]:
    result = run_python("pass", LIMITS)
    assert result.outcome is SandboxOutcome.OK, result
    return result.isolation


@pytest.fixture
def network_isolated(isolation: dict[str, object]) -> None:
    if isolation.get("network_namespace") != "ok":
        pytest.skip("no network namespace here: this test would reach the network")


# --- the hostile corpus ----------------------------------------------------------------------

HOSTILE: dict[str, tuple[str, Check]] = {
    "fork bomb": (
        "import os\nwhile True:\n    os.fork()",
        raised("BlockingIOError", "Resource temporarily unavailable"),
    ),
    "fork until refused": (
        "import os, time\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n"
        "            time.sleep(60)\n        n += 1\nexcept OSError:\n    print(n < 16)",
        printed("True"),
    ),
    "memory bomb": ("x = bytearray(2 * 1024 ** 3)", ended(SandboxOutcome.MEMORY_LIMIT)),
    "memory growth": (
        "chunks = []\nwhile True:\n    chunks.append(' ' * 10 ** 6)",
        ended(SandboxOutcome.MEMORY_LIMIT),
    ),
    "infinite loop": ("while True:\n    pass", ended(SandboxOutcome.CPU_LIMIT)),
    "exit code 125 is the program's own": (
        "import sys\nsys.exit(125)",
        raised("exited with code 125"),  # a business failure, not a sandbox that failed
    ),
    "infinite loop in a child": (
        "import subprocess, sys\n"
        "subprocess.run([sys.executable, '-c', 'while True: pass'])\n"
        "print('child ended')",
        printed("child ended"),  # the child hits its own CPU limit and dies
    ),
    "write into the project": (
        f"open({str(Path(__file__).parent / 'pwned-by-sandbox')!r}, 'w').write('x')",
        # A checkout under /tmp is not even visible: the sandbox's /tmp is private.
        raised("Read-only file system", "PermissionError", "FileNotFoundError"),
    ),
    "append to agentbench's source": (
        f"open({str(Path(__file__).parents[1] / 'agentbench' / 'tools.py')!r}, 'a').write('x')",
        raised("Read-only file system", "PermissionError", "FileNotFoundError"),
    ),
    "read root's ssh key": (
        "print(open('/root/.ssh/id_rsa').read())",
        raised("FileNotFoundError", "PermissionError"),
    ),
    "read /etc/shadow": (
        "print(open('/etc/shadow').read())",
        raised("FileNotFoundError", "PermissionError"),
    ),
    "os.system": (
        "import os\nstatus = os.system('cat /etc/shadow > /dev/null 2>&1')\nprint(status != 0)",
        printed("True"),
    ),
    "subprocess as root?": (
        "import subprocess\nprint(subprocess.run(['id', '-u'], capture_output=True, text=True)"
        ".stdout.strip() != '0')",
        printed("True"),
    ),
    "ctypes segfault": ("import ctypes\nctypes.string_at(0)", ended(SandboxOutcome.CRASHED)),
    "ctypes setuid(0)": (
        "import ctypes, os\nprint(ctypes.CDLL(None).setuid(0), os.getuid() != 0)",
        printed("-1 True"),
    ),
    "setuid binaries gain nothing": (
        "print([l for l in open('/proc/self/status') if l.startswith('NoNewPrivs')][0].split()[1])",
        printed("1"),
    ),
    "SIGKILL the parent": (
        "import os, signal\ntry:\n    os.kill(os.getppid(), signal.SIGKILL)\n"
        "except OSError:\n    pass\nprint('still here')",
        printed("still here"),
    ),
    "SIGKILL everything it can": (
        "import os, signal\ntry:\n    os.kill(-1, signal.SIGKILL)\nexcept OSError:\n    pass\n"
        "print('still here')",
        printed("still here"),
    ),
    "SIGKILL the test process by pid": (
        f"import os, signal\ntry:\n    os.kill({os.getpid()}, signal.SIGKILL)\n"
        "except OSError as exc:\n    print(type(exc).__name__)",
        printed("ProcessLookupError" if AS_ROOT else "PermissionError"),
    ),
    "read the test process's environment": (
        f"print(open('/proc/{os.getpid()}/environ').read())",
        raised("FileNotFoundError", "PermissionError", "ProcessLookupError"),
    ),
    "huge output in one write": (
        "print('x' * 3_000_000)",
        ended(SandboxOutcome.OUTPUT_LIMIT),
    ),
    "output flood": ("while True:\n    print('x' * 1000)", ended(SandboxOutcome.OUTPUT_LIMIT)),
    "huge file": (
        "with open('big', 'wb') as f:\n    for _ in range(100):\n        f.write(b'x' * 2 ** 20)",
        raised("File too large"),
    ),
    "fill the disk": (
        "for i in range(10):\n    with open(f'/tmp/fill{i}', 'wb') as f:\n"
        "        f.write(b'x' * 3 * 2 ** 20)",
        raised("No space left on device"),
    ),
    "open files": (
        "files = [open('/dev/null') for _ in range(1000)]",
        raised("Too many open files"),
    ),
    "thread bomb": (
        "import threading, time\nfor _ in range(100):\n"
        "    threading.Thread(target=time.sleep, args=(0.2,)).start()",
        raised("can't start new thread"),
    ),
    "daemon in its own session": (
        "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(300)\n"
        "print('parent done')",
        printed("parent done"),
    ),
    "background process": (
        "import subprocess\nsubprocess.Popen(['sleep', '300'])\nprint('spawned')",
        printed("spawned"),
    ),
    "exit code": ("import sys\nsys.exit(3)", ended(SandboxOutcome.ERROR)),
}


@pytest.mark.parametrize("code, check", list(HOSTILE.values()), ids=list(HOSTILE))
def test_hostile_program_is_contained(code: str, check: Check) -> None:
    check(run(code))


def test_sleeping_forever_is_killed_at_the_wall_clock_timeout() -> None:
    result = run("import time\ntime.sleep(1000)", SandboxLimits(timeout_s=2.5))
    assert result.outcome is SandboxOutcome.TIMEOUT, result
    assert "timed out after 2.5 s" in result.message


def test_files_written_to_tmp_stay_inside(isolation: dict[str, object]) -> None:
    if isolation.get("filesystem") != "ok":
        pytest.skip("no mount namespace here: /tmp is the host's")
    name = f"agentbench-escape-{uuid.uuid4().hex}"
    for path in (f"/tmp/{name}", f"/dev/shm/{name}"):
        result = run(f"open({path!r}, 'w').write('x')\nprint(open({path!r}).read())")
        assert result.outcome is SandboxOutcome.OK and result.stdout == "x\n", result
        assert not os.path.exists(path)
    result = run(f"open('/var/tmp/{name}', 'w')")
    assert "FileNotFoundError" in result.message  # there is no /var at all


def test_no_api_key_reaches_the_code(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-must-not-leak")
    result = run("import os\nprint(sorted(os.environ.items()))")
    assert result.outcome is SandboxOutcome.OK
    assert "sk-test-must-not-leak" not in result.stdout
    assert "OPENAI_API_KEY" not in result.stdout


@pytest.mark.usefixtures("network_isolated")
@pytest.mark.parametrize(
    "code",
    [
        "import socket\nsocket.create_connection(('192.0.2.1', 80), timeout=2)",
        "import socket\nsocket.create_connection(('127.0.0.1', 22), timeout=2)",
        "import socket\nsocket.getaddrinfo('example.com', 80)",
        "import urllib.request\nurllib.request.urlopen('http://192.0.2.1/', timeout=2)",
    ],
    ids=["outbound tcp", "loopback", "dns", "urllib"],
)
def test_there_is_no_network(code: str) -> None:
    result = run(code)
    assert result.outcome is SandboxOutcome.ERROR
    # Where the syscall filter runs, an inet socket cannot even be made.
    words = ("unreachable", "name resolution", "Name or service", "URLError", "not supported")
    assert any(word in result.message for word in words), result.message


def test_the_code_runs_unprivileged(isolation: dict[str, object]) -> None:
    assert isolation["uid"] != 0
    if AS_ROOT:
        assert isolation["uid"] == NOBODY  # RLIMIT_NPROC binds only below root


def test_the_code_sees_only_its_own_processes(isolation: dict[str, object]) -> None:
    if isolation.get("proc") != "private":
        pytest.skip("no PID namespace here")
    result = run("import os\nprint(os.getpid(), [p for p in os.listdir('/proc') if p.isdigit()])")
    assert result.stdout.strip() == "2 ['1', '2']"


# --- ordinary programs -----------------------------------------------------------------------


def test_a_program_prints_its_result() -> None:
    result = run("import math, json\nprint(json.dumps({'pi': round(math.pi, 3)}))")
    assert result.outcome is SandboxOutcome.OK
    assert result.stdout == '{"pi": 3.142}\n'
    assert result.exit_code == 0
    assert result.warnings == [] or all(isinstance(w, str) for w in result.warnings)


def test_an_exception_reports_its_last_line_and_traceback_tail() -> None:
    result = run("def f():\n    return {}['missing']\nf()")
    assert result.outcome is SandboxOutcome.ERROR
    assert result.message == "the program raised KeyError: 'missing'"
    assert "line 2, in f" in result.stderr


def test_output_keeps_head_and_tail() -> None:
    code = "print('START'); print('x' * 50_000); print('END')"
    result = run(code)
    assert result.outcome is SandboxOutcome.OK and result.truncated
    assert result.stdout.startswith("START") and result.stdout.rstrip().endswith("END")
    assert len(result.stdout) < 2_200


def test_the_working_directory_is_fresh_each_run() -> None:
    first = run("import os\nopen('note', 'w').write('x')\nprint(sorted(os.listdir('.')))")
    second = run("import os\nprint(sorted(os.listdir('.')))")
    assert first.stdout.strip() == "['main.py', 'note']"
    assert second.stdout.strip() == "['main.py']"


def test_unicode_round_trips() -> None:
    result = run("print('héllo → 世界')")
    assert result.stdout == "héllo → 世界\n"


# --- the tool --------------------------------------------------------------------------------


async def test_tool_returns_ok_with_stdout() -> None:
    sandbox = python_sandbox(LIMITS)
    result = await sandbox.invoke({"code": "print(6 * 7)"})
    assert result.kind is ResultKind.OK
    assert result.data["stdout"] == "42\n"
    assert sandbox.parameters["required"] == ["code"]
    assert sandbox.effect.value == "read_only"
    assert "no network" in sandbox.description and "256 MB" in sandbox.description


async def test_tool_reports_a_failing_program_as_business_failure() -> None:
    result = await python_sandbox(LIMITS).invoke({"code": "1 / 0"})
    assert result.kind is ResultKind.BUSINESS_FAILURE
    assert result.error == "the program raised ZeroDivisionError: division by zero"
    assert "ZeroDivisionError" in result.observation()


async def test_tool_reports_a_sandbox_that_cannot_start_as_system_error() -> None:
    broken = python_sandbox(SandboxLimits(python="/nonexistent/python3"))
    result = await broken.invoke({"code": "print(1)"})
    assert result.kind is ResultKind.SYSTEM_ERROR
    assert "/nonexistent/python3" in (result.error or "")


@pytest.mark.skipif(not AS_ROOT or shutil.which("setpriv") is None, reason="needs root and setpriv")
def test_without_namespaces_the_gaps_are_reported_or_refused() -> None:
    # A child interpreter without CAP_SYS_ADMIN stands in for a container that forbids
    # namespaces; the code it sandboxes only prints.
    script = (
        "import json\n"
        "from agentbench.tools import SandboxLimits, run_python\n"
        "loose = run_python('print(1)')\n"
        "strict = run_python('print(1)', SandboxLimits(require_full_isolation=True))\n"
        "print(json.dumps([loose.model_dump(mode='json'), strict.model_dump(mode='json')]))\n"
    )
    drop = ["setpriv", "--inh-caps=-sys_admin", "--bounding-set=-sys_admin"]
    done = subprocess.run(
        [*drop, sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    loose, strict = json.loads(done.stdout)
    assert loose["outcome"] == "ok" and loose["stdout"] == "1\n"
    assert loose["isolation"]["uid"] == NOBODY  # still unprivileged
    assert any("network NOT blocked" in w for w in loose["warnings"])
    assert strict["outcome"] == "failed_to_start"
    assert "sandbox refused to run: no network_namespace" in strict["message"]
    assert strict["stdout"] == ""


# --- the parts -------------------------------------------------------------------------------


def test_limits_must_be_positive() -> None:
    with pytest.raises(UsageError, match="memory_mb"):
        SandboxLimits(memory_mb=0)


def test_root_picks_an_interpreter_others_can_run() -> None:
    python = _pick_interpreter(None, sandbox_uid=NOBODY)
    assert os.path.isfile(python)
    assert _pick_interpreter(None, sandbox_uid=None) == sys.executable


def test_missing_isolation_is_spelled_out() -> None:
    facts = {"network_namespace": "unavailable: Operation not permitted", "filesystem": "host"}
    warnings = _warnings(facts, uid=None, missing_budgets={"pids": "not delegated"})
    assert any("network NOT blocked" in w for w in warnings)
    assert any("PID namespace" in w for w in warnings)
    assert any("filesystem not isolated" in w for w in warnings)
    assert any("no syscall filter" in w and "fresh session keyring" in w for w in warnings)
    assert any("concurrent sandboxes share it" in w for w in warnings)
    full = {
        "network_namespace": "ok",
        "pid_namespace": "ok",
        "filesystem": "ok",
        "seccomp": "ok",
    }
    assert _warnings(full, uid=NOBODY, missing_budgets={}) == []


def test_the_description_promises_no_more_than_the_machine_gives() -> None:
    probe = sandbox_isolation()
    assert probe.outcome is SandboxOutcome.OK
    full = _isolation_summary(probe)
    assert ("There is no network" in full) == (probe.warnings == [])
    partial = SandboxResult(
        outcome=SandboxOutcome.OK,
        message="exited normally",
        warnings=["network NOT blocked: no network namespace on this machine"],
    )
    summary = _isolation_summary(partial)
    assert summary.startswith("Isolation is partial") and "network NOT blocked" in summary
    assert "no network;" not in summary


def test_capture_keeps_head_and_tail_within_its_budget() -> None:
    capture = Capture(10)
    for chunk in (b"abc", b"defgh", b"ijklmnop", b"qrstuvwxyz"):
        capture.feed(chunk)
    assert capture.truncated and capture.total == 26
    assert capture.text() == "abcde\n…[16 of 26 bytes cut]…\nvwxyz"


def test_signal_names_are_reported() -> None:
    result = run("import os, signal\nos.kill(os.getpid(), signal.SIGABRT)")
    # As PID 1 of its namespace a program ignores signals it has no handler for.
    if result.outcome is SandboxOutcome.CRASHED:
        assert result.signal == signal.SIGABRT.name
    else:
        assert result.outcome is SandboxOutcome.OK
