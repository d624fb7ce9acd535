"""Run one process to its end, bounded: its own process group, output read up to a limit, a
deadline, and every process of the group killed when it is over (exited, timed out, too much
output, or cancelled).

`run_process` is what a command agent (`boundary.command`) does once per turn. It never
raises for what the process did (a non-zero exit, a timeout, too much output): that is in
the `Finished` it returns, for the caller to turn into the run's error. Only a program that
cannot be started raises (`OSError`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

# After the program exits, how long a process it started outside its group (`setsid`) may
# keep its output open before it is read no further.
DRAIN_S = 2.0
REAP_S = 5.0  # how long a killed process is waited for (SIGKILL: at once)


@dataclass(frozen=True)
class Finished:
    """How a process ended and what it wrote."""

    returncode: int | None  # None: killed by us (timed out, or too much output)
    stdout: bytes
    stderr: bytes  # its last `stderr_limit` bytes
    timed_out: bool = False
    stdout_overflow: bool = False  # wrote more than `stdout_limit`: killed, stdout cut


async def run_process(
    argv: Sequence[str],
    *,
    stdin: bytes,
    env: Mapping[str, str],
    cwd: Path,
    timeout_s: float,
    stdout_limit: int,
    stderr_limit: int,
) -> Finished:
    """Start `argv`, hand it `stdin`, and wait (at most `timeout_s`) for it to exit. What it
    left running in its group is killed then (holding its output, it would keep the turn
    open); so is the whole group on a timeout, too much output, or a cancel."""
    loop = asyncio.get_running_loop()
    transport, seen = await loop.subprocess_exec(
        lambda: _Output(stdout_limit, stderr_limit),
        *argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(env),
        cwd=cwd,
        start_new_session=True,  # its own group: its children are killed with it
    )
    pid = transport.get_pid()
    timed_out = False
    try:
        pipe = transport.get_pipe_transport(0)
        if pipe is not None:  # a program that exits unread leaves a broken pipe, not an error
            pipe.write(stdin)  # type: ignore[attr-defined]
            pipe.close()  # once what is buffered is written: the program reads to its end
        try:
            async with asyncio.timeout(timeout_s):
                await _first(seen.exited, seen.overflowed)
                if not seen.overflowed.is_set():
                    _kill_group(pid)
                    await _drained(seen)
        except TimeoutError:
            timed_out = True
    finally:
        _kill_group(pid)
        transport.close()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(seen.exited.wait(), REAP_S)
    killed = timed_out or seen.stdout.overflow
    return Finished(
        None if killed else transport.get_returncode(),
        seen.stdout.data(),
        seen.stderr.data(),
        timed_out=timed_out,
        stdout_overflow=seen.stdout.overflow,
    )


async def _first(*events: asyncio.Event) -> None:
    waiting = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in waiting:
            task.cancel()


async def _drained(seen: _Output) -> None:
    """The rest of what the exited program wrote: until its pipes close, or DRAIN_S when a
    process it started outside its group holds them (what the program wrote is read by
    then: it is in the pipe already)."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(_first(seen.closed, seen.overflowed), DRAIN_S)


class _Output(asyncio.SubprocessProtocol):
    """What the process writes, and when it exits — which asyncio's `Process.wait` says only
    once every process holding its pipes has closed them."""

    def __init__(self, stdout_limit: int, stderr_limit: int) -> None:
        self.stdout = _Head(stdout_limit)
        self.stderr = _Tail(stderr_limit)
        self.exited = asyncio.Event()
        self.closed = asyncio.Event()  # exited, and every pipe closed
        self.overflowed = asyncio.Event()

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        chunk = data.encode() if isinstance(data, str) else data
        if fd == 1:
            self.stdout.add(chunk)
            if self.stdout.overflow:
                self.overflowed.set()
        elif fd == 2:
            self.stderr.add(chunk)

    def process_exited(self) -> None:
        self.exited.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed.set()


class _Head:
    """The first `limit` bytes of a stream; past them, `overflow` is set."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.chunks: list[bytes] = []
        self.size = 0
        self.overflow = False

    def add(self, chunk: bytes) -> None:
        room = self.limit - self.size
        if len(chunk) > room:
            chunk = chunk[:room]
            self.overflow = True
        self.chunks.append(chunk)
        self.size += len(chunk)

    def data(self) -> bytes:
        return b"".join(self.chunks)


class _Tail:
    """The last `limit` bytes of a stream (an error is at the end of what a program says)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.buffer = bytearray()

    def add(self, chunk: bytes) -> None:
        self.buffer += chunk
        if len(self.buffer) > 2 * self.limit:  # trimmed now and then, not at every chunk
            del self.buffer[: -self.limit]

    def data(self) -> bytes:
        return bytes(self.buffer[-self.limit :])


def _kill_group(pid: int | None) -> None:
    if pid is None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
