"""The Python sandbox against escapes: host files and sockets, kernel interfaces, state carried
from one run to the next, and runs starving each other.

These are the project's own attacks, grouped by what they try. Each asserts containment and
the message the model would see. Every syscall attack is chosen so that, without the filter,
the call would succeed or fail with a different error than EPERM, so a passing test shows
the filter at work rather than a missing capability.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from sandbox_support import (
    LIMITS,
    Check,
    ended,
    no_stray_processes,  # noqa: F401  (autouse)
    per_run_budgets,  # noqa: F401  (by name)
    printed,
    raised,
    run,
)

from agentbench.runtime.builtin._sandbox_seccomp import _NUMBERS
from agentbench.tools import SandboxLimits, SandboxOutcome, sandbox_isolation

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

ROOT = Path(__file__).resolve().parents[1]
MACHINE = os.uname().machine


@pytest.fixture(scope="module", autouse=True)
def fully_isolated() -> None:
    facts = sandbox_isolation().isolation
    missing = [k for k in ("filesystem", "seccomp", "pid_namespace") if facts.get(k) != "ok"]
    if missing:
        pytest.skip(f"this machine gives no {', '.join(missing)}: nothing here to attack")


# --- host files and sockets ------------------------------------------------------------------

HOST_PATHS = [
    "/run",
    "/var",
    "/home",
    "/root",
    "/srv",
    "/opt",
    "/mnt",
    "/sys",
    "/boot",
    str(ROOT),
    str(ROOT / "golden" / "sql_analyst" / "shop.duckdb"),
    str(Path.home()),
    __file__,
]


@pytest.mark.parametrize("path", HOST_PATHS)
def test_host_paths_do_not_exist_in_the_sandbox(path: str) -> None:
    result = run(f"import os\nprint(os.path.lexists({path!r}))")
    assert result.outcome is SandboxOutcome.OK, result
    assert result.stdout == "False\n", f"{path} is visible in the sandbox"


def test_the_whole_tree_is_the_interpreter_and_scratch_space() -> None:
    # Everything outside the read-only system directories, listed by the code itself.
    code = (
        "import os\n"
        "skip = ('/usr', '/proc')\n"
        "for top, dirs, files in os.walk('/'):\n"
        "    dirs[:] = [d for d in dirs if os.path.join(top, d) not in skip]\n"
        "    for name in dirs + files:\n"
        "        print(os.path.join(top, name))\n"
    )
    result = run(code)
    assert result.outcome is SandboxOutcome.OK, result
    seen = set(result.stdout.split())
    expected = {
        "/bin", "/sbin", "/lib", "/lib64", "/usr", "/proc",  # system dirs (or their links)
        "/etc", "/etc/passwd", "/etc/group", "/etc/hostname", "/etc/ld.so.cache",
        "/dev", "/dev/null", "/dev/zero", "/dev/random", "/dev/urandom", "/dev/fd",
        "/dev/stdin", "/dev/stdout", "/dev/stderr", "/dev/shm",
        "/tmp", "/tmp/.shm", "/tmp/work", "/tmp/work/main.py",
    }  # fmt: skip
    assert seen <= expected | {"/lib32", "/libx32"}, sorted(seen - expected)


def test_mountinfo_lists_only_the_sandbox_mounts() -> None:
    result = run("for line in open('/proc/self/mountinfo'):\n    print(line.split()[4])")
    assert result.outcome is SandboxOutcome.OK, result
    mounts = set(result.stdout.split())
    allowed = {"/", "/usr", "/etc/ld.so.cache", "/dev", "/tmp", "/proc"}
    allowed |= {f"/dev/{d}" for d in ("null", "zero", "random", "urandom")}
    assert mounts <= allowed, sorted(mounts - allowed)


@pytest.fixture
def host_socket(tmp_path: Path) -> Iterator[tuple[str, list[bytes]]]:
    """A unix socket server on the host, outside /tmp where one can be made, that records."""
    directory = Path("/run") if os.access("/run", os.W_OK) else ROOT
    path = str(directory / f"agentbench-test-{uuid.uuid4().hex[:8]}.sock")
    received: list[bytes] = []
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(path)
        os.chmod(path, 0o777)
        server.listen()
        server.settimeout(0.2)
        stop = threading.Event()

        def serve() -> None:
            while not stop.is_set():
                try:
                    conn, _ = server.accept()
                except TimeoutError:
                    continue
                with conn:
                    received.append(conn.recv(100))
                    conn.sendall(b"hello from the host")

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        try:
            yield path, received
        finally:
            stop.set()
            thread.join()
            os.unlink(path)


def test_a_host_unix_socket_is_unreachable(host_socket: tuple[str, list[bytes]]) -> None:
    path, received = host_socket
    code = f"import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect({path!r})\ns.send(b'x')"
    result = run(code)
    raised("FileNotFoundError")(result)
    assert received == []


def test_a_host_abstract_socket_is_unreachable() -> None:
    # Abstract sockets have no file; the network namespace is what separates them.
    name = f"\0agentbench-test-{uuid.uuid4().hex[:8]}"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(name)
        server.listen()
        code = f"import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect({name!r})"
        raised("ConnectionRefusedError")(run(code))


FILESYSTEM_ATTACKS: dict[str, tuple[str, Check]] = {
    "the caller's root through /proc": (
        f"print(open('/proc/{os.getpid()}/root/etc/hostname').read())",
        raised("FileNotFoundError"),
    ),
    "init's root and memory": (
        "print(open('/proc/1/root/etc/hostname').read(), open('/proc/1/mem', 'rb').read(1))",
        raised("PermissionError"),  # init stays root: the program cannot look into it
    ),
    "write into the standard library": (
        "import os\nopen(os.__file__, 'a').write('# pwned')",
        raised("Read-only file system", "PermissionError"),
    ),
    "create a file at the root": ("open('/evil', 'w')", raised("Read-only file system")),
    "make a device node": (
        "import os, stat\nos.mknod('/tmp/sda', stat.S_IFBLK | 0o600, os.makedev(8, 0))",
        raised("PermissionError"),
    ),
    "the host's name": ("import socket\nprint(socket.gethostname())", printed("sandbox")),
    "users on the machine": (
        "import pwd\nprint(sorted(p.pw_name for p in pwd.getpwall()))",
        printed("['nobody', 'root']" if os.geteuid() == 0 else "['root', 'sandbox']"),
    ),
}


@pytest.mark.parametrize(
    "code, check", list(FILESYSTEM_ATTACKS.values()), ids=list(FILESYSTEM_ATTACKS)
)
def test_filesystem_attack_is_contained(code: str, check: Check) -> None:
    check(run(code))


# --- the syscall filter ----------------------------------------------------------------------

SYSCALL_PRELUDE = (
    "import ctypes, errno, os\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "def call(nr, *args):\n"
    "    result = libc.syscall(nr, *args)\n"
    "    return errno.errorcode[ctypes.get_errno()] if result == -1 else result\n"
)
# name → (arguments as Python source, what the call gives without the filter)
SYSCALL_ATTACKS = {
    "add_key": ("b'user', b'agentbench', b'x', 1, -4", "a key id"),
    "keyctl": ("0, -4, 1", "the user keyring's id"),
    "request_key": ("b'user', b'agentbench-absent', None, 0", "ENOKEY"),
    "ptrace": ("0, 0, 0, 0", "0 (PTRACE_TRACEME)"),
    "process_vm_readv": ("os.getpid(), None, 0, None, 0, 0", "0"),
    "unshare": ("0x10000000", "0 (a new user namespace)"),
    "setns": ("-1, 0", "EBADF"),
    "bpf": ("-1, None, 0", "EINVAL"),
    "userfaultfd": ("0xFFFF", "EINVAL"),
    "perf_event_open": ("None, 0, -1, -1, 0", "EFAULT"),
    "io_uring_setup": ("0, None", "EINVAL or EFAULT"),
    "mount": ("b'none', b'/tmp', b'tmpfs', 0, None", "EPERM from capabilities too"),
    "finit_module": ("-1, b'', 0", "EPERM from capabilities too"),
    "kexec_load": ("0, 0, None, 0", "EPERM from capabilities too"),
}


@pytest.fixture
def numbers() -> dict[str, int]:
    if MACHINE not in _NUMBERS:
        pytest.skip(f"no syscall table for {MACHINE}")
    return _NUMBERS[MACHINE]


@pytest.mark.parametrize("name", list(SYSCALL_ATTACKS))
def test_a_denied_syscall_fails_with_eperm(name: str, numbers: dict[str, int]) -> None:
    arguments, _ = SYSCALL_ATTACKS[name]
    result = run(f"{SYSCALL_PRELUDE}print(call({numbers[name]}, {arguments}))")
    printed("EPERM")(result)


def test_clone_into_new_namespaces_is_denied(numbers: dict[str, int]) -> None:
    clone_newuser_sigchld = 0x10000000 | 17
    code = (
        f"{SYSCALL_PRELUDE}"
        f"pid = call({numbers['clone']}, {clone_newuser_sigchld}, None, None, None, 0)\n"
        "if pid == 0:\n    os._exit(0)  # only without the filter: the clone's child\n"
        f"print(pid, call({numbers['clone3']}, None, 0))\n"
    )
    # clone3 says ENOSYS (its flags cannot be inspected), so the C library falls back to clone.
    printed("EPERM ENOSYS")(run(code))


def test_fork_and_threads_still_work() -> None:
    code = (
        "import os, threading\n"
        "t = threading.Thread(target=print, args=('thread',)); t.start(); t.join()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n    os._exit(7)\n"
        "print(os.waitpid(pid, 0)[1] >> 8)\n"
    )
    assert run(code).stdout.split() == ["thread", "7"]


@pytest.mark.skipif(MACHINE != "x86_64", reason="x86_64's other ABIs")
def test_other_abis_are_refused() -> None:
    # x32 numbering, then a 32-bit `int 0x80` keyctl from machine code the program maps.
    code = (
        f"{SYSCALL_PRELUDE}"
        "import mmap\n"
        "print(call(0x40000000 + 250, 0, 0))\n"
        "page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)\n"
        "page.write(bytes([0xB8, 0x20, 0x01, 0, 0, 0xCD, 0x80, 0xC3]))\n"
        "address = ctypes.addressof(ctypes.c_char.from_buffer(page))\n"
        "int80 = ctypes.CFUNCTYPE(ctypes.c_int)(address)\n"
        "print(-int80() == errno.EPERM)\n"
    )
    assert run(code).stdout.split() == ["EPERM", "True"]


# --- state carried between runs --------------------------------------------------------------


def test_nothing_a_run_leaves_reaches_the_next() -> None:
    token = uuid.uuid4().hex[:8]
    leave = (
        f"{SYSCALL_PRELUDE}"
        "import sys\n"
        f"open('/dev/shm/{token}', 'w').write('x')\n"
        f"open('/tmp/{token}', 'w').write('x')\n"
        # System V shared memory, keyed: the IPC namespace is the run's own.
        f"print(libc.shmget(0x{token}, 4096, 0o1666) >= 0)\n"
    )
    assert run(leave).stdout == "True\n"
    find = (
        f"{SYSCALL_PRELUDE}"
        f"print(os.path.exists('/dev/shm/{token}'), os.path.exists('/tmp/{token}'),"
        f" libc.shmget(0x{token}, 0, 0) >= 0)\n"
    )
    assert run(find).stdout == "False False False\n"


# --- budgets: one run cannot starve another --------------------------------------------------

TREE_MEMORY = (
    "import os, sys, time\n"
    "children = []\n"
    "for _ in range(4):\n"
    "    pid = os.fork()\n"
    "    if pid == 0:\n"
    "        block = bytearray(100 * 2**20)\n"
    "        block[::4096] = b'x' * len(block[::4096])\n"
    "        time.sleep(2)\n"
    "        os._exit(0)\n"
    "    children.append(pid)\n"
    "statuses = [os.waitpid(pid, 0)[1] for pid in children]\n"
    "sys.exit('a child was killed' if any(statuses) else 0)\n"
)


@pytest.mark.usefixtures("per_run_budgets")
def test_memory_is_a_budget_for_the_whole_tree() -> None:
    # Each child stays under the per-process limit; together they are 400 MB of 256.
    result = run(TREE_MEMORY)
    assert result.outcome is SandboxOutcome.MEMORY_LIMIT, result
    assert result.message == "memory limit of 256 MB exceeded"


@pytest.mark.usefixtures("per_run_budgets")
def test_processes_and_threads_share_one_budget() -> None:
    # 8 children of 5 threads each would be 41 tasks; all of them, held at once, get 16.
    code = (
        "import os, threading, time\n"
        "children = []\n"
        "for _ in range(8):\n"
        "    try:\n"
        "        pid = os.fork()\n"
        "    except BlockingIOError:\n"
        "        break\n"
        "    if pid == 0:\n"
        "        started = 0\n"
        "        for _ in range(4):\n"
        "            try:\n"
        "                threading.Thread(target=time.sleep, args=(5,), daemon=True).start()\n"
        "            except RuntimeError:\n"
        "                break\n"
        "            started += 1\n"
        "        time.sleep(3)\n"
        "        os._exit(started)\n"
        "    children.append(pid)\n"
        "threads = sum(os.waitpid(pid, 0)[1] >> 8 for pid in children)\n"
        "print(1 + len(children) + threads)\n"
    )
    result = run(code)
    assert result.outcome is SandboxOutcome.OK, result
    assert int(result.stdout) == 16


FORK_TO_THE_LIMIT = (
    "import os, time\n"
    "count = 0\n"
    "try:\n"
    "    while True:\n"
    "        if os.fork() == 0:\n"
    "            time.sleep(30)\n"
    "            os._exit(0)\n"
    "        count += 1\n"
    "except BlockingIOError:\n"
    "    pass\n"
    "block = bytearray(150 * 2**20)\n"
    "block[::4096] = b'x' * len(block[::4096])\n"
    "print(count)\n"
)


@pytest.mark.usefixtures("per_run_budgets")
def test_eight_concurrent_sandboxes_each_get_their_full_limits() -> None:
    # Each forks until refused and holds 150 MB of 256: per-user or per-process limits
    # would let the first runs take what the later ones need.
    limits = SandboxLimits(timeout_s=60, cpu_seconds=10, memory_mb=256, max_processes=16)
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: run(FORK_TO_THE_LIMIT, limits), range(8)))
    assert [r.outcome for r in results] == [SandboxOutcome.OK] * 8, results
    # The program itself is one of the 16.
    assert [r.stdout for r in results] == ["15\n"] * 8


# --- how a run ends is what happened ---------------------------------------------------------

CAUSES: dict[str, tuple[str, Check]] = {
    "CPU loop": ("while True:\n    pass", ended(SandboxOutcome.CPU_LIMIT)),
    "CPU loop that ignores SIGXCPU": (
        "import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True:\n    pass",
        ended(SandboxOutcome.CPU_LIMIT),
    ),
    "memory growth": (
        "chunks = []\nwhile True:\n    chunks.append(bytearray(2**20))",
        ended(SandboxOutcome.MEMORY_LIMIT),
    ),
    "its own child kills it": (
        "import os, signal, time\nif os.fork() == 0:\n    os.kill(os.getppid(), signal.SIGKILL)\n"
        "    os._exit(0)\ntime.sleep(5)",
        lambda r: (
            (r.outcome is SandboxOutcome.CRASHED and r.signal == "SIGKILL") or pytest.fail(str(r))
        ),
    ),
    "abort": ("import os\nos.abort()", lambda r: r.signal == "SIGABRT" or pytest.fail(str(r))),
}


@pytest.mark.parametrize("code, check", list(CAUSES.values()), ids=list(CAUSES))
def test_the_cause_is_what_happened(code: str, check: Check) -> None:
    check(run(code))


def test_cpu_limit_is_reported_by_its_signal() -> None:
    result = run("while True:\n    pass", SandboxLimits(cpu_seconds=1, timeout_s=20))
    assert result.outcome is SandboxOutcome.CPU_LIMIT, result
    assert result.signal == "SIGXCPU"
    assert result.message == "CPU time limit of 1 s exceeded"


def test_a_program_started_is_never_blamed_for_the_sandbox() -> None:
    # The program's own exit code 125 (what `env` uses for "could not run") stays its own.
    result = run("raise SystemExit(125)", LIMITS)
    assert result.outcome is SandboxOutcome.ERROR
    assert result.message == "the program exited with code 125"
