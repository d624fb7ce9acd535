"""The sandbox believes the kernel, not the program, and shows the program nothing of the host.

An outside review's probes, each kept as a test: a program that prints `MemoryError` or sends
itself SIGXCPU is not told it hit a limit (the outcome comes from the cgroup's OOM kills,
rusage and the signal, never from output); PID 1's command line, the cgroup paths and the
descriptors the program inherits show no host path, pid or configuration; a socket of any
family but Unix cannot be made; code holding a NUL byte is refused before it runs; the run's
processes together hold no more CPUs than their quota (a cgroup throttles them, or where there
is none a watch stops them); and terminal control characters in the output are kept escaped,
so `traces show` prints them as text.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import socket
import sys
from pathlib import Path
from typing import Any

import click.utils
import pytest
from sandbox_support import (
    LIMITS,
    no_stray_processes,  # noqa: F401  (autouse)
    per_run_budgets,  # noqa: F401  (by name)
    run,
)

from agentbench import Agent, ResultKind, Runner, ScriptedModel, ToolCall
from agentbench.cli import main
from agentbench.runtime.builtin import _sandbox_cgroup
from agentbench.runtime.builtin._sandbox_cgroup import CgroupUsage, RunCgroup
from agentbench.runtime.builtin._sandbox_cpu import WATCHED, CpuQuotaWatch
from agentbench.tools import SandboxLimits, SandboxOutcome, python_sandbox, sandbox_isolation
from agentbench.trace import TraceStore

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module", autouse=True)
def fully_isolated() -> None:
    facts = sandbox_isolation().isolation
    missing = [k for k in ("filesystem", "seccomp", "pid_namespace") if facts.get(k) != "ok"]
    if missing:
        pytest.skip(f"this machine gives no {', '.join(missing)}: nothing here to probe")


def without(*controllers: str) -> Any:
    """`RunCgroup.create` as it is, less `controllers` (a machine that does not delegate them)."""
    original = RunCgroup.create.__func__  # type: ignore[attr-defined]

    def create(cls: type[RunCgroup], **limits: Any) -> RunCgroup:
        made = original(cls, **limits)
        for controller in controllers:
            directory = made.dirs.pop(controller, None)
            if directory is not None and directory not in made.dirs.values():
                directory.rmdir()
            made.missing[controller] = "left out by the test"
        return made

    return classmethod(create)


# --- outcomes from the kernel's evidence -----------------------------------------------------

PRINTED_MEMORY_ERROR = "import sys\nprint('MemoryError', file=sys.stderr)\nsys.exit(1)"


def test_printing_memory_error_is_not_the_memory_limit() -> None:
    result = run(PRINTED_MEMORY_ERROR)
    assert result.outcome is SandboxOutcome.ERROR, result
    assert result.message == "the program exited with code 1"


def test_raising_memory_error_without_using_memory_is_the_programs_error() -> None:
    result = run("raise MemoryError('made up')")
    assert result.outcome is SandboxOutcome.ERROR, result
    assert result.message == "the program raised MemoryError: made up"


@pytest.mark.usefixtures("per_run_budgets")
def test_the_memory_limit_is_the_cgroups_oom_kill() -> None:
    result = run("chunks = []\nwhile True:\n    chunks.append(bytearray(2**20))")
    assert result.outcome is SandboxOutcome.MEMORY_LIMIT, result
    assert result.signal == "SIGKILL"  # the OOM killer's, counted in the cgroup


def test_without_a_memory_cgroup_the_peak_is_the_evidence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(RunCgroup, "create", without("memory"))
    grown = run("chunks = []\nwhile True:\n    chunks.append(bytearray(2**20))")
    assert grown.outcome is SandboxOutcome.MEMORY_LIMIT, grown
    assert grown.isolation["memory_budget"] == "per process"
    printed = run(PRINTED_MEMORY_ERROR)
    assert printed.outcome is SandboxOutcome.ERROR, printed


# What a program inside sees of its children's CPU time: /proc, as the kernel counts it.
CHILDREN_CPU = (
    "import os\n"
    "def busy_children(n):\n"
    "    children = []\n"
    "    for _ in range(n):\n"
    "        pid = os.fork()\n"
    "        if pid == 0:\n"
    "            while True:\n"
    "                pass\n"
    "        children.append(pid)\n"
    "    return children\n"
    "def children_cpu(children):\n"
    "    ticks = 0\n"
    "    for pid in children:\n"
    "        fields = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()\n"
    "        ticks += int(fields[11]) + int(fields[12])\n"
    "    return ticks / os.sysconf('SC_CLK_TCK')\n"
)

SIGXCPU_SENDERS = {
    "itself": "import os, signal\nos.kill(os.getpid(), signal.SIGXCPU)",
    "its child": (
        "import os, signal, time\n"
        "if os.fork() == 0:\n"
        "    os.kill(os.getppid(), signal.SIGXCPU)\n"
        "    os._exit(0)\n"
        "time.sleep(10)\n"
    ),
    # RLIMIT_CPU counts a process's own CPU time; its children's, reaped or running, is not
    # what the limit of this process measured, though the run's CPU time holds it.
    "itself, after its children used 2.1 s of CPU time": (
        "import os, signal, time\n"
        "for _ in range(3):\n"
        "    if os.fork() == 0:\n"
        "        while time.process_time() < 0.7:\n"
        "            pass\n"
        "        os._exit(0)\n"
        "for _ in range(3):\n"
        "    os.wait()\n"
        "os.kill(os.getpid(), signal.SIGXCPU)\n"
    ),
    "itself, while its children have used 2.1 s": CHILDREN_CPU
    + (
        "import signal\n"
        "children = busy_children(3)\n"
        "while children_cpu(children) < 2.1:\n"
        "    pass\n"
        "os.kill(os.getpid(), signal.SIGXCPU)\n"
    ),
}


@pytest.mark.parametrize("code", list(SIGXCPU_SENDERS.values()), ids=list(SIGXCPU_SENDERS))
def test_a_sigxcpu_the_program_sends_is_not_the_cpu_limit(code: str) -> None:
    result = run(code)
    assert result.outcome is SandboxOutcome.CRASHED, result
    assert result.signal == "SIGXCPU"
    assert result.message.startswith(
        "the program was killed by SIGXCPU from its own processes, not the CPU limit"
    )


def test_the_cpu_limit_is_still_the_cpu_limit() -> None:
    result = run("while True:\n    pass", SandboxLimits(cpu_seconds=1, timeout_s=20))
    assert result.outcome is SandboxOutcome.CPU_LIMIT, result
    assert (result.cpu_seconds or 0) >= 0.8


# --- nothing of the host ---------------------------------------------------------------------

LOOK_AROUND = """
import os
def show(what, read):
    try:
        print(what, repr(read()))
    except OSError as exc:
        print(what, type(exc).__name__)
show("init cmdline", lambda: open("/proc/1/cmdline", "rb").read())
show("init comm", lambda: open("/proc/1/comm").read())
show("init environ", lambda: open("/proc/1/environ", "rb").read())
show("init cwd", lambda: os.readlink("/proc/1/cwd"))
show("init fds", lambda: [os.readlink(f"/proc/1/fd/{fd}") for fd in os.listdir("/proc/1/fd")])
show("own cmdline", lambda: open("/proc/self/cmdline", "rb").read())
show("own environ", lambda: open("/proc/self/environ", "rb").read())
show("own cgroup", lambda: open("/proc/self/cgroup").read())
show("init cgroup", lambda: open("/proc/1/cgroup").read())
fds = sorted(int(fd) for fd in os.listdir("/proc/self/fd"))
print("own fds", [(fd, os.readlink(f"/proc/self/fd/{fd}")) for fd in fds[:-1]])
"""


def test_the_program_sees_nothing_of_the_host() -> None:
    result = run(LOOK_AROUND)
    assert result.outcome is SandboxOutcome.OK, result
    seen = result.stdout
    host = {
        str(ROOT),  # the checkout
        sys.prefix,  # the caller's venv
        sys.executable,
        "agentbench",  # the launcher's path, the cgroups' names
        f"-{os.getpid()}-",  # the caller's pid, as the run's cgroups name it
        "caller_pid",  # the launcher's configuration
        "cgroup_procs",
    }
    assert [text for text in host if text in seen] == [], seen
    shown = {" ".join(line.split(" ", 2)[:2]): line.split(" ", 2)[2] for line in seen.splitlines()}
    assert shown["init cmdline"].replace("\\x00", "") == "b'sandbox-init'", seen
    assert shown["init comm"] == "'sandbox-init\\n'"
    own_fds = seen.split("own fds ", 1)[1].strip()
    assert own_fds.startswith("[(0, '/dev/null'), (1, 'pipe:"), own_fds
    assert own_fds.count("pipe:") == 2 and own_fds.count("(") == 3, own_fds


# --- sockets ---------------------------------------------------------------------------------

FAMILIES = {
    "vsock": (socket.AF_VSOCK, socket.SOCK_STREAM),
    "netlink": (socket.AF_NETLINK, socket.SOCK_RAW),
    "packet": (socket.AF_PACKET, socket.SOCK_RAW),
    "inet": (socket.AF_INET, socket.SOCK_STREAM),
    "inet6": (socket.AF_INET6, socket.SOCK_DGRAM),
    "alg": (socket.AF_ALG, socket.SOCK_SEQPACKET),
}


@pytest.mark.parametrize("family, kind", list(FAMILIES.values()), ids=list(FAMILIES))
def test_a_socket_of_any_family_but_unix_cannot_be_made(family: int, kind: int) -> None:
    # Without the filter each ends otherwise: made (vsock, netlink, inet; alg where the kernel
    # has it), EPERM for want of CAP_NET_RAW (packet).
    code = (
        "import ctypes, errno\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        f"made = libc.socket({family}, {kind}, 0)\n"
        "print('made' if made >= 0 else errno.errorcode[ctypes.get_errno()])\n"
        f"print(libc.socketpair({family}, {kind}, 0, (ctypes.c_int * 2)()))\n"
    )
    result = run(code)
    assert result.outcome is SandboxOutcome.OK, result
    assert result.stdout.split() == [errno.errorcode[errno.EAFNOSUPPORT], "-1"]


def test_unix_sockets_and_what_uses_them_still_work() -> None:
    code = (
        "import asyncio, multiprocessing, socket\n"
        "a, b = socket.socketpair()\n"
        "a.send(b'x')\n"
        "print(b.recv(1).decode(), socket.socket(socket.AF_UNIX).family.name)\n"
        "async def three():\n"
        "    return 3\n"
        "print(asyncio.run(three()))\n"
        "if __name__ == '__main__':\n"
        "    with multiprocessing.Pool(2) as pool:\n"
        "        print(sum(pool.map(abs, [-1, -2])))\n"
    )
    result = run(code)
    assert result.outcome is SandboxOutcome.OK, result
    assert result.stdout.split() == ["x", "AF_UNIX", "3", "3"]


# --- code that cannot be run as given --------------------------------------------------------


async def test_code_with_a_nul_byte_is_refused_before_it_runs() -> None:
    result = run("print('a')\x00print('b')")
    assert result.outcome is SandboxOutcome.INVALID_INPUT, result
    assert result.stdout == ""
    assert result.message == (
        "the code holds a NUL byte at line 1, column 11; Python source cannot contain NUL "
        "bytes, so nothing was run"
    )
    told = await python_sandbox(LIMITS).invoke({"code": "x = 1\n\x00"})
    assert told.kind is ResultKind.BUSINESS_FAILURE
    assert "NUL byte at line 2, column 1" in (told.error or "")


# --- the CPU quota ---------------------------------------------------------------------------

BUSY = (
    "import os, time\n"
    "for _ in range({n}):\n"
    "    if os.fork() == 0:\n"
    "        while True:\n"
    "            pass\n"
    "time.sleep(60)\n"
)


def test_the_cpu_quota_throttles_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    if "cpu" in RunCgroup.create(memory_bytes=2**28, max_processes=4, cpu_share=1).missing:
        pytest.skip("no cpu cgroup here: the watch's test below covers the fallback")
    counted: list[CgroupUsage] = []
    real_usage = RunCgroup.usage

    def usage(self: RunCgroup) -> CgroupUsage:
        counted.append(real_usage(self))
        return counted[-1]

    monkeypatch.setattr(RunCgroup, "usage", usage)
    # A tenth of a CPU: 10 ms of every 100; the program uses 0.2 s of CPU time, then ends.
    code = "import time\nwhile time.process_time() < 0.2:\n    pass\n"
    result = run(code, SandboxLimits(cpu_share=0.1, timeout_s=60))
    assert result.outcome is SandboxOutcome.OK, result
    assert result.isolation["cpu_quota"].startswith("0.1 CPU per run (cgroup v")
    assert counted[-1].cpu_throttled > 0  # the kernel held it to its quota


def test_without_a_cpu_cgroup_a_run_over_its_quota_is_stopped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(RunCgroup, "create", without("cpu"))
    result = run(BUSY.format(n=15), SandboxLimits(cpu_share=0.25, timeout_s=60, cpu_seconds=30))
    assert result.outcome is SandboxOutcome.CPU_LIMIT, result
    assert result.message.startswith("stopped: its processes together used ")
    assert "more than the quota of 0.25 CPU allows" in result.message
    assert result.isolation["cpu_quota"] == f"0.25 CPU per run, {WATCHED}"
    assert any("CPU quota watched, not throttled" in w for w in result.warnings)


def test_a_run_within_its_quota_is_not_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(RunCgroup, "create", without("cpu"))
    code = "import time\nwhile time.process_time() < 1.5:\n    pass\nprint('done')"
    result = run(code, SandboxLimits(cpu_share=1, timeout_s=60))
    assert result.outcome is SandboxOutcome.OK, result


class Proc:
    """A /proc holding the sandbox's processes' CPU times (`/proc/PID/stat`) and children."""

    def __init__(self, root: Path, *, children_files: bool = True) -> None:
        self.root = root
        self.children_files = children_files

    def process(self, pid: int, ticks: tuple[int, int, int, int], *children: int) -> None:
        task = self.root / str(pid) / "task" / str(pid)
        task.mkdir(parents=True, exist_ok=True)
        utime, stime, cutime, cstime = ticks
        fields = ["S", "1"] + ["0"] * 9 + [str(utime), str(stime), str(cutime), str(cstime)]
        (self.root / str(pid) / "stat").write_text(f"{pid} (py thon) {' '.join(fields)} 0 0\n")
        if self.children_files:
            (task / "children").write_text("".join(f"{c} " for c in children))


def test_the_watch_counts_living_processes_and_what_was_reaped(tmp_path: Path) -> None:
    ticks = os.sysconf("SC_CLK_TCK")
    proc, now = Proc(tmp_path), [0.0]
    watch = CpuQuotaWatch(1.0, proc=tmp_path, now=lambda: now[0], burst_s=1.0)
    proc.process(10, (5, 5, 1 * ticks, 0), 11)  # init: itself not counted; one reaped orphan
    proc.process(11, (2 * ticks, 0, 0, ticks), 12)  # the program, and a child it reaped
    proc.process(12, (ticks, ticks, 0, 0))  # a living grandchild
    watch.saw({"forked": {"pid": 10}, "started": {}})
    now[0] = 5.0
    assert not watch.over()  # 6 s of CPU in 5 s: one CPU and the 1 s burst, not more
    assert watch.used_s == pytest.approx(6.0)
    proc.process(12, (3 * ticks, ticks, 0, 0))
    now[0] = 5.05
    assert not watch.over()  # /proc is read at most every 100 ms
    now[0] = 5.2
    assert watch.over()  # 8 s in 5.2 s: over 1 CPU plus the burst
    assert (watch.used_s, watch.elapsed_s) == (pytest.approx(8.0), 5.2)


def test_the_watch_keeps_its_last_look_once_the_run_has_ended(tmp_path: Path) -> None:
    ticks = os.sysconf("SC_CLK_TCK")
    proc, now = Proc(tmp_path), [0.0]
    watch = CpuQuotaWatch(2.0, proc=tmp_path, now=lambda: now[0])
    proc.process(10, (0, 0, 0, 0), 11)
    proc.process(11, (3 * ticks, 0, 0, 0))
    watch.saw({"forked": {"pid": 10}, "started": {}})
    now[0] = 2.0
    assert not watch.over()
    # Init ended and its PID namespace with it: the processes killed then are in no one's
    # cutime, so /proc now shows less than the run used.
    proc.process(10, (0, 0, 1, 0))
    (tmp_path / "11" / "stat").unlink()
    now[0] = 2.2
    assert not watch.over()
    assert watch.used_s == pytest.approx(3.0)


def test_without_children_files_the_watch_says_it_cannot_see(tmp_path: Path) -> None:
    Proc(tmp_path, children_files=False).process(10, (0, 0, 0, 0))
    watch = CpuQuotaWatch(1.0, proc=tmp_path, now=lambda: 10.0)
    watch.saw({"forked": {"pid": 10}, "started": {}})
    assert not watch.over()
    assert watch.measures.startswith("unavailable")


def test_the_cgroup_quota_is_written_as_the_kernel_reads_it(tmp_path: Path) -> None:
    _sandbox_cgroup._set_limit(tmp_path, "cpu", 2, 25_000)
    assert (tmp_path / "cpu.max").read_text() == "25000 100000"
    _sandbox_cgroup._set_limit(tmp_path, "cpu", 1, 150_000)
    assert (tmp_path / "cpu.cfs_period_us").read_text() == "100000"
    assert (tmp_path / "cpu.cfs_quota_us").read_text() == "150000"


# --- the CPU time reported ------------------------------------------------------------------

# An orphan that ends (the sandbox's init reaps it), then 15 busy processes still running when
# the program ends (killed as its PID namespace goes, which leaves their CPU time in no rusage).
# Printed: the CPU time of both as /proc showed it inside.
LIVING_AND_ENDED = CHILDREN_CPU + (
    "reader, writer = os.pipe()\n"
    "if os.fork() == 0:\n"
    "    if os.fork() == 0:\n"
    "        import time\n"
    "        while time.process_time() < 0.5:\n"
    "            pass\n"
    "        os.write(writer, f'{os.getpid()} {time.process_time()}'.encode())\n"
    "        os._exit(0)\n"
    "    os._exit(0)\n"
    "os.wait()\n"
    "orphan, ended_cpu = os.read(reader, 100).split()\n"
    "while os.path.exists(f'/proc/{int(orphan)}'):  # until init has reaped it\n"
    "    pass\n"
    "children = busy_children(15)\n"
    "while children_cpu(children) < 1.0:\n"
    "    pass\n"
    "print(float(ended_cpu) + children_cpu(children))\n"
)
# Where the run's CPU time is counted: the cgroup, or without one the sandbox's init as the
# program ends (what it reaped, and /proc for what still runs).
COUNTED_BY = {"the run's cgroup": (), "init, without a cpuacct cgroup": ("cpuacct",)}


@pytest.mark.parametrize("left_out", list(COUNTED_BY.values()), ids=list(COUNTED_BY))
def test_the_cpu_time_reported_is_the_whole_runs(
    left_out: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(RunCgroup, "create", without(*left_out))
    limits = SandboxLimits(timeout_s=60, cpu_seconds=30, max_processes=24)
    result = run(LIVING_AND_ENDED, limits)
    assert result.outcome is SandboxOutcome.OK, result
    seen = float(result.stdout)
    assert (result.cpu_seconds or 0) >= 0.8 * seen, (result.cpu_seconds, seen)


# Runs until the timeout kills it, printing its children's CPU time as it grows.
BUSY_UNTIL_KILLED = CHILDREN_CPU + (
    "children, shown = busy_children(15), 0.0\n"
    "while True:\n"
    "    seen = children_cpu(children)\n"
    "    if seen >= shown + 0.1:\n"
    "        print(seen)\n"
    "        shown = seen\n"
)
# Without any cpu cgroup the quota's watch counts; a share of 2 CPUs never stops it here.
KILLED_COUNTED_BY = {
    "the run's cgroup": ((), 1.0),
    "the quota's watch, without cpu cgroups": (("cpu", "cpuacct"), 2.0),
}


@pytest.mark.parametrize(
    "left_out, share", list(KILLED_COUNTED_BY.values()), ids=list(KILLED_COUNTED_BY)
)
def test_a_run_killed_at_its_timeout_reports_its_cpu_time(
    left_out: tuple[str, ...], share: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(RunCgroup, "create", without(*left_out))
    limits = SandboxLimits(timeout_s=2, cpu_seconds=30, cpu_share=share, max_processes=20)
    result = run(BUSY_UNTIL_KILLED, limits)
    assert result.outcome is SandboxOutcome.TIMEOUT, result
    seen = float(result.stdout.split()[-1])
    assert (result.cpu_seconds or 0) >= 0.8 * seen, (result.cpu_seconds, seen)


def test_the_cgroups_cpu_time_is_read_as_the_kernel_writes_it(tmp_path: Path) -> None:
    v1, v2 = tmp_path / "v1", tmp_path / "v2"
    v1.mkdir()
    v2.mkdir()
    (v1 / "cpuacct.usage").write_text("2430000000\n")  # nanoseconds
    (v2 / "cpu.stat").write_text("usage_usec 2430000\nuser_usec 2400000\nsystem_usec 30000\n")
    for directory, version in ((v1, 1), (v2, 2)):
        cgroup = RunCgroup(dirs={"cpuacct": directory}, versions={"cpuacct": version})
        assert cgroup.usage().cpu_seconds == pytest.approx(2.43)
    assert RunCgroup().usage().cpu_seconds is None  # nothing counted it: the run's init did


# --- terminal control sequences --------------------------------------------------------------

LOUD = (
    "print('\\x1b[31mred\\x1b[0m \\x1b]0;title\\x07 \\x9b2J \\x1b]52;c;cHduZWQ=\\x07 a\\rb\\tc')\n"
    "raise ValueError('\\x1b[2Jgone')\n"
)
ESCAPED = "\\x1b[31mred\\x1b[0m \\x1b]0;title\\x07 \\x9b2J \\x1b]52;c;cHduZWQ=\\x07 a\\rb\tc\n"
CONTROLS = "\x1b\x07\x9b\r"


def test_terminal_control_characters_are_kept_escaped() -> None:
    result = run(LOUD)
    assert result.stdout == ESCAPED  # a tab is text, not a control
    assert result.stderr.endswith("ValueError: \\x1b[2Jgone\n")
    assert result.message == "the program raised ValueError: \\x1b[2Jgone"
    assert [c for c in result.stdout + result.stderr + result.message if c in CONTROLS] == []


async def test_traces_show_prints_them_as_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "t.duckdb"
    model = ScriptedModel([ToolCall("python_sandbox", {"code": LOUD}), "done"])
    agent = Agent(name="a", tools=[python_sandbox(LIMITS, description="Run Python.")])
    with TraceStore(db) as store:
        result = await Runner.run(agent, "go", model=model, store=store)
    # As on a terminal: click strips colour codes (only those) from output that is not one.
    monkeypatch.setattr(click.utils, "should_strip_ansi", lambda *_: False)
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown):
        assert main(["traces", "show", result.run_id, "--db", str(db)]) == 0
    out = shown.getvalue()
    assert "the program raised ValueError: \\x1b[2Jgone" in out
    assert [c for c in out if c in CONTROLS] == []
