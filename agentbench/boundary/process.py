"""Run one process to its end, bounded: its own process group, output read up to a limit, a
deadline, and every process of the group killed when it is over (timeout, cancel, or done).

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


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
    """Start `argv`, hand it `stdin`, and wait (at most `timeout_s`) for it to exit and close
    its output. Cancelled, it kills the process group first."""
    process = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=dict(env),
        cwd=cwd,
        start_new_session=True,  # its own group: its children are killed with it
    )
    assert process.stdin and process.stdout and process.stderr
    stdout = _Head(stdout_limit)
    stderr = _Tail(stderr_limit)
    work = asyncio.gather(
        _feed(process.stdin, stdin),
        _read(process.stdout, stdout),
        _read(process.stderr, stderr),
        process.wait(),
    )
    timed_out = False
    try:
        async with asyncio.timeout(timeout_s):
            await _until_done_or_overflow(work, stdout)
    except TimeoutError:
        timed_out = True
    finally:
        # Done, timed out or cancelled: nothing of the group outlives the turn (a child left
        # holding the pipes would keep the next read waiting).
        _kill_group(process.pid)
        work.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await work
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
    killed = timed_out or stdout.overflow
    return Finished(
        None if killed else process.returncode,
        stdout.data(),
        stderr.data(),
        timed_out=timed_out,
        stdout_overflow=stdout.overflow,
    )


async def _until_done_or_overflow(work: asyncio.Future[object], stdout: _Head) -> None:
    overflowed = asyncio.ensure_future(stdout.overflowed.wait())
    try:
        await asyncio.wait({work, overflowed}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        overflowed.cancel()
    if work.done() and not work.cancelled():
        work.result()  # an error reading the pipes is the harness's, not the agent's


async def _feed(pipe: asyncio.StreamWriter, data: bytes) -> None:
    # A program that exits without reading its input is its own business, not an error.
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        pipe.write(data)
        await pipe.drain()
        pipe.close()
        await pipe.wait_closed()


class _Head:
    """The first `limit` bytes of a stream; past them, `overflowed` is set."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.chunks: list[bytes] = []
        self.size = 0
        self.overflow = False
        self.overflowed = asyncio.Event()

    def add(self, chunk: bytes) -> None:
        room = self.limit - self.size
        if len(chunk) > room:
            chunk = chunk[:room]
            self.overflow = True
            self.overflowed.set()
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


async def _read(pipe: asyncio.StreamReader, into: _Head | _Tail) -> None:
    while chunk := await pipe.read(65536):
        into.add(chunk)
        if isinstance(into, _Head) and into.overflow:
            return


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
