"""Starting and watching one sandbox process: the time limits and the output caps.

`start_and_watch` runs `_sandbox_launcher.py` in its own session, feeds it its configuration
and the code on stdin (never in argv, which the sandbox could read), and reads
its stdout, stderr and report pipe until they close. It kills the whole process group when the
program's clock (`_sandbox_clock`: the program's time, not the machine's, and a wall-clock
backstop) runs out, when the program never starts, or when the output grows past its cap, and
once more at the end, so nothing the code started outlives the call even where the kernel gave
no PID namespace. What it returns is
raw (bytes counted, report records, how the process ended); `sandbox.py` turns that into an
outcome the model can read.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentbench.runtime.builtin._sandbox_clock import ProgramClock
from agentbench.runtime.builtin._sandbox_cpu import CpuQuotaWatch
from agentbench.terminal import escaped

LAUNCHER = Path(__file__).with_name("_sandbox_launcher.py")
_CHUNK = 65_536
_DRAIN_AFTER_EXIT_S = 0.2  # how long pipes held by escaped grandchildren may stay open
_POLL_S = 0.02  # the longest the watch waits for output before it reads the clocks again
_STOP_GRACE_S = 1.0  # how long a killed program's launcher gets to reap it and report


def shown(text: str) -> str:
    """`text` with every terminal control character written as an escape (`\x1b`, `\r`).

    The program's output is kept this way, so wherever it is shown later — the model's tool
    result, `traces show`, a run's terminal output, a report — it cannot drive a terminal.
    """
    return escaped(text)


class Capture:
    """Keeps the head and the tail of a stream (the tail is where a traceback ends)."""

    def __init__(self, keep_chars: int) -> None:
        self._half = max(keep_chars // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self._half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            del self.tail[: max(len(self.tail) - self._half, 0)]

    @property
    def truncated(self) -> bool:
        return self.total > len(self.head) + len(self.tail)

    def text(self) -> str:
        head = shown(self.head.decode("utf-8", errors="replace"))
        tail = shown(self.tail.decode("utf-8", errors="replace"))
        if not self.truncated:
            return head + tail
        cut = self.total - len(self.head) - len(self.tail)
        return f"{head}\n…[{cut:,} of {self.total:,} bytes cut]…\n{tail}"


@dataclass
class Watched:
    """What happened to one launcher process, before interpretation."""

    stdout: Capture
    stderr: Capture
    records: dict[str, dict[str, Any]] = field(default_factory=dict)  # by report stage
    # "timeout" (the program's time), "wall" (the backstop), "start" (never started), "output",
    # "cpu_quota" (its processes used more CPUs than their share, where no cgroup throttles)
    killed_for: str | None = None
    cpu_used: tuple[float, float] | None = None  # at a "cpu_quota" stop: CPU s, over wall s
    duration_s: float = 0.0
    program_s: float = 0.0  # the program's time, as its limit counted it
    clock: str = ""  # what that time is (_sandbox_clock.OWN_TIME or WALL_CLOCK)


def start_and_watch(
    config: dict[str, Any],
    code: bytes,
    *,
    clock: ProgramClock,
    keep_chars: int,
    max_bytes: int,
    quota: CpuQuotaWatch | None = None,
) -> Watched:
    """Run the launcher with `config` on `code` until it ends or `clock` (or `quota`, where no
    cgroup holds the CPU quota) says a limit is past; raises OSError only if it cannot start."""
    report_read, report_write = os.pipe()
    config = {**config, "report_fd": report_write}
    watched = Watched(Capture(keep_chars), Capture(keep_chars))
    started = time.monotonic()
    try:
        process = subprocess.Popen(
            [sys.executable, "-I", "-S", str(LAUNCHER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(report_write,),
            start_new_session=True,  # its own process group, so one killpg reaches everything
            env={},  # nothing of ours (API keys included) is inherited
            cwd="/",
        )
    except BaseException:
        os.close(report_read)
        raise
    finally:
        os.close(report_write)
    try:
        _send_code(process, json.dumps(config).encode() + b"\n" + code)
        _watch(process, report_read, watched, clock, max_bytes, quota)
    finally:
        _kill_group(process.pid)
        process.wait()
        os.close(report_read)
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()
    watched.duration_s = time.monotonic() - started
    watched.program_s, watched.clock = clock.program_time(), clock.measures
    return watched


def _send_code(process: subprocess.Popen[bytes], config_and_code: bytes) -> None:
    assert process.stdin is not None
    try:
        # The launcher reads all of stdin (its configuration's line, then the code) first.
        process.stdin.write(config_and_code)
        process.stdin.close()
    except BrokenPipeError:
        pass  # the launcher died at once; its stderr and exit say why


def _watch(
    process: subprocess.Popen[bytes],
    report_read: int,
    watched: Watched,
    clock: ProgramClock,
    max_bytes: int,
    quota: CpuQuotaWatch | None,
) -> None:
    assert process.stdout is not None and process.stderr is not None
    report = _Report()
    sinks = {
        process.stdout.fileno(): watched.stdout.feed,
        process.stderr.fileno(): watched.stderr.feed,
        report_read: report.feed,
    }

    def past_a_limit() -> str | None:
        if watched.stdout.total + watched.stderr.total > max_bytes:
            return "output"
        clock.saw(report.records)
        if quota is not None:
            quota.saw(report.records)
            if quota.over():
                watched.cpu_used = (quota.used_s, quota.elapsed_s)
                return "cpu_quota"
        return clock.over()

    with _Pump(sinks) as pump:
        watched.killed_for = pump.run(process.pid, past_a_limit)
        if watched.killed_for is not None:
            # Kill the sandbox's init rather than the launcher: its death ends the whole PID
            # namespace, the launcher reaps it and reports, and no zombie is left for the
            # host's init to collect.
            _kill_program(report.records, process.pid)
            grace_ends = time.monotonic() + _STOP_GRACE_S
            pump.run(process.pid, lambda: "grace" if time.monotonic() > grace_ends else None)
    watched.records = report.records


class _Report:
    """The launcher's report pipe, parsed into records as whole lines arrive."""

    def __init__(self) -> None:
        self._pending = b""
        self.records: dict[str, dict[str, Any]] = {}

    def feed(self, chunk: bytes) -> None:
        lines, _, self._pending = (self._pending + chunk).rpartition(b"\n")
        if lines:
            self.records.update(_parse_report(lines))


class _Pump:
    """Copies whatever arrives on some pipes into their sinks, until they close or a limit."""

    def __init__(self, sinks: dict[int, Callable[[bytes], object]]) -> None:
        self.sinks = sinks
        self.selector = selectors.DefaultSelector()
        for fd in sinks:
            self.selector.register(fd, selectors.EVENT_READ)

    def __enter__(self) -> _Pump:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.selector.close()

    def run(self, pid: int, past_a_limit: Callable[[], str | None]) -> str | None:
        """Pump until every pipe closes; returns the limit `past_a_limit` names, if one is."""
        exited_at: float | None = None
        while self.selector.get_map():
            stop = past_a_limit()
            if stop is not None:
                return stop
            now = time.monotonic()
            if exited_at is None and _has_exited(pid):
                exited_at = now
            if exited_at is not None and now - exited_at > _DRAIN_AFTER_EXIT_S:
                return None  # pipes held open by an escaped grandchild; stop listening
            for key, _ in self.selector.select(timeout=_POLL_S):
                chunk = os.read(key.fd, _CHUNK)
                if chunk:
                    self.sinks[key.fd](chunk)
                else:
                    self.selector.unregister(key.fd)
        return None


def _kill_program(records: dict[str, dict[str, Any]], pgid: int) -> None:
    pid = records.get("forked", {}).get("pid")
    if isinstance(pid, int) and pid > 0:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    else:
        _kill_group(pgid)  # not forked yet: the launcher itself is what is running


def _has_exited(pid: int) -> bool:
    # WNOWAIT leaves the launcher a zombie, so its pid (our process group id) cannot be
    # reused before the final killpg.
    result = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    return result is not None


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # nothing left in the group
        os.killpg(pgid, signal.SIGKILL)


def _parse_report(raw: bytes) -> dict[str, dict[str, Any]]:
    records: dict[str, dict[str, Any]] = {}
    for line in raw.decode("utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut short by a kill
        if isinstance(record, dict):
            records[str(record.pop("stage", "?"))] = record
    return records
