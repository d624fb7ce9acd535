"""Where a sync tool runs: on a thread unless its author declares `blocking=False`, and never
moved on its own; a `blocking=False` call on the main thread's event loop is interrupted at
its timeout by the watchdog — asleep in C, looping in Python, catching the interruption or
waiting in its cleanup — and elsewhere its timeout is cooperative."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import logging
import os
import signal
import threading
import time
from typing import Any

import pytest

from agentbench import tool
from agentbench.runtime import inline
from agentbench.runtime.tools import ResultKind

MAIN = threading.main_thread().ident


def _spin(seconds: float) -> None:
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        pass


@pytest.fixture
def kills(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The watchdog's signals, counted (and still sent)."""
    sent: list[int] = []
    real = signal.pthread_kill

    def counting(thread: int, signum: int) -> None:
        if signum == inline.INTERRUPT_SIGNAL:
            sent.append(thread)
        real(thread, signum)

    monkeypatch.setattr(signal, "pthread_kill", counting)
    return sent


async def test_a_default_tool_stays_on_threads_however_quick_its_calls() -> None:
    threads: set[int | None] = set()

    @tool
    def add(n: int) -> int:
        threads.add(threading.get_ident())
        return n + 1

    for n in range(20):
        assert (await add.invoke({"n": n})).data == n + 1
    assert MAIN not in threads


async def test_a_non_blocking_tool_that_sleeps_after_all_is_interrupted(kills: list[int]) -> None:
    @tool(blocking=False, timeout_s=0.2)
    def misdeclared() -> str:
        time.sleep(30)  # its author was wrong: it waits
        return "late"

    started = time.perf_counter()
    result = await misdeclared.invoke({})
    assert time.perf_counter() - started < 5
    assert result.kind is ResultKind.SYSTEM_ERROR
    assert result.error == "tool 'misdeclared' timed out after 0.2 s"
    assert kills == [MAIN]


async def test_a_non_blocking_tool_looping_forever_is_interrupted() -> None:
    @tool(blocking=False, timeout_s=0.1)
    def forever() -> str:
        while True:
            pass

    started = time.perf_counter()
    result = await forever.invoke({})
    assert time.perf_counter() - started < 5
    assert result.error == "tool 'forever' timed out after 0.1 s"


async def test_a_tool_that_catches_the_interruption_is_interrupted_again_and_named(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, kills: list[int]
) -> None:
    monkeypatch.setattr(inline, "_STUCK_WARNING_S", 0.05)

    @tool(blocking=False, timeout_s=0.05)
    def stubborn() -> str:
        for _ in range(3):
            with contextlib.suppress(BaseException):  # what a careless tool does
                time.sleep(30)
        time.sleep(30)
        return "never"

    started = time.perf_counter()
    with caplog.at_level(logging.WARNING, logger="agentbench.tools"):
        result = await stubborn.invoke({})
    assert time.perf_counter() - started < 5
    assert result.error == "tool 'stubborn' timed out after 0.05 s"
    assert len(kills) >= 4
    warnings = [r.getMessage() for r in caplog.records if "'stubborn'" in r.getMessage()]
    assert len(warnings) == 1 and "drop blocking=False" in warnings[0]


async def test_a_tool_whose_cleanup_waits_is_still_stopped() -> None:
    """The first interruption lands in `result()`; the pool's exit then waits for its worker,
    and is interrupted in turn."""

    @tool(blocking=False, timeout_s=0.1)
    def delegates() -> str:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            return pool.submit(time.sleep, 2).result()

    started = time.perf_counter()
    result = await delegates.invoke({})
    assert time.perf_counter() - started < 1.5
    assert result.error == "tool 'delegates' timed out after 0.1 s"


async def test_calls_ending_at_their_deadline_never_take_an_interruption_with_them(
    kills: list[int],
) -> None:
    """Overrunning calls, over and over: the watchdog's signal comes during some and just
    after others. One that comes after its call ended must be dropped, not raised in the loop
    or in the next call, which is on time."""

    @tool(blocking=False, timeout_s=0.02)
    def overruns() -> str:
        _spin(0.03)
        return "late"

    @tool(blocking=False, timeout_s=5)
    def on_time() -> str:
        _spin(0.001)
        return "ok"

    for _ in range(25):
        assert (await overruns.invoke({})).kind is ResultKind.SYSTEM_ERROR
        assert (await on_time.invoke({})).data == "ok"
        await asyncio.sleep(0.001)
    assert kills  # some signals were sent


def test_a_signal_for_a_call_that_ended_or_for_no_call_raises_nothing() -> None:
    inline._on_signal(inline.INTERRUPT_SIGNAL, None)  # no call running
    fresh = inline._Watched("next", time.perf_counter() + 5)
    inline._current = fresh  # a new call, not interrupted
    try:
        inline._on_signal(inline.INTERRUPT_SIGNAL, None)
    finally:
        inline._current = None
    assert not fresh.raised


def test_off_the_main_thread_the_timeout_is_cooperative(kills: list[int]) -> None:
    @tool(blocking=False, timeout_s=0.05)
    def slow() -> str:
        _spin(0.2)
        return "late"

    results: list[Any] = []
    worker = threading.Thread(target=lambda: results.append(asyncio.run(slow.invoke({}))))
    worker.start()
    worker.join()
    assert results[0].error == "tool 'slow' timed out after 0.05 s"
    assert kills == []


async def test_a_signal_someone_else_handles_is_left_alone(kills: list[int]) -> None:
    previous = signal.getsignal(inline.INTERRUPT_SIGNAL)
    theirs: list[int] = []
    signal.signal(inline.INTERRUPT_SIGNAL, lambda signum, frame: theirs.append(signum))
    await asyncio.sleep(inline._POLL_S * 5)  # a running watchdog notices at its next look
    try:

        @tool(blocking=False, timeout_s=0.05)
        def slow() -> str:
            _spin(0.2)
            return "late"

        assert (await slow.invoke({})).error == "tool 'slow' timed out after 0.05 s"
        assert kills == [] and theirs == []
        assert signal.getsignal(inline.INTERRUPT_SIGNAL) is not inline._on_signal
    finally:
        signal.signal(inline.INTERRUPT_SIGNAL, previous)


REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="none")


@pytest.mark.parametrize("blocking", [True, False])
async def test_both_placements_see_the_runs_context_and_leak_nothing_into_it(
    blocking: bool,
) -> None:
    @tool(blocking=blocking)
    def which() -> str:
        seen = REQUEST_ID.get()
        REQUEST_ID.set("set by the tool")
        return seen

    token = REQUEST_ID.set("r-1")
    try:
        for _ in range(3):
            assert (await which.invoke({})).data == "r-1"
            assert REQUEST_ID.get() == "r-1"
    finally:
        REQUEST_ID.reset(token)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_gets_a_watchdog_of_its_own() -> None:
    @tool(blocking=False, timeout_s=0.2)
    def naps() -> str:
        time.sleep(5)
        return "late"

    @tool(blocking=False, timeout_s=5)
    def quick() -> str:
        return "ok"

    asyncio.run(quick.invoke({}))  # the parent's watchdog runs now
    assert inline._watchdog_running
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        try:
            started = time.perf_counter()
            result = asyncio.run(naps.invoke({}))
            os.write(write, f"{time.perf_counter() - started:.2f} {result.error}".encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        elapsed, message = pipe.read().split(" ", 1)
    os.waitpid(child, 0)
    assert float(elapsed) < 2
    assert message == "tool 'naps' timed out after 0.2 s"


def test_an_interruption_meant_for_an_outer_call_leaves_it_watched() -> None:
    """A call made inside a watched one is not watched itself; the outer call's interruption
    passes through it, and the outer call, if it goes on, is interrupted again."""
    assert inline.available()

    def outer() -> str:
        with contextlib.suppress(BaseException):
            inline.call("inner", lambda: _spin(2), 5, watch=inline.available())
        _spin(2)
        return "late"

    started = time.perf_counter()
    with pytest.raises(TimeoutError):
        inline.call("outer", outer, 0.05, watch=True)
    assert time.perf_counter() - started < 1.5
