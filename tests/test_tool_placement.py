"""Where a sync tool runs: a default (`blocking=None`) tool moves from threads to the event loop
once its calls show it computes without waiting, goes back for good when a call there holds
the loop, and a call on the event loop is interrupted at its timeout by the watchdog — even
one asleep in C or looping forever in Python."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import signal
import threading
import time

import pytest

from agentbench import Agent, Runner, ScriptedModel, ToolCall, tool
from agentbench.runtime import inline
from agentbench.runtime.tools import _PROVEN_CALLS, ResultKind

MAIN = threading.main_thread().ident


def _spin(seconds: float) -> None:
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        pass


async def test_a_quick_tool_moves_to_the_event_loop_after_proving_itself() -> None:
    threads: list[int | None] = []

    @tool
    def add(n: int) -> int:
        threads.append(threading.get_ident())
        return n + 1

    for n in range(_PROVEN_CALLS + 3):
        assert (await add.invoke({"n": n})).data == n + 1
    assert all(ident != MAIN for ident in threads[:_PROVEN_CALLS])
    assert threads[_PROVEN_CALLS:] == [MAIN] * 3
    assert add.proven_quick


async def test_a_tool_that_waits_stays_on_threads() -> None:
    threads: list[int | None] = []

    @tool
    def waits() -> str:
        threads.append(threading.get_ident())
        time.sleep(0.0005)  # quick, but idle: I/O would look like this
        return "ok"

    for _ in range(_PROVEN_CALLS * 3):
        assert (await waits.invoke({})).data == "ok"
    assert MAIN not in threads
    assert not waits.proven_quick


async def test_blocking_true_always_uses_a_thread() -> None:
    threads: list[int | None] = []

    @tool(blocking=True)
    def add(n: int) -> int:
        threads.append(threading.get_ident())
        return n + 1

    for n in range(_PROVEN_CALLS * 3):
        await add.invoke({"n": n})
    assert MAIN not in threads


async def _proven(made) -> None:
    for _ in range(_PROVEN_CALLS):
        await made.invoke({"hang": False})
    assert made.proven_quick


async def test_a_proven_tool_that_then_sleeps_is_interrupted_at_its_timeout() -> None:
    @tool(timeout_s=0.2)
    def cached(hang: bool) -> str:
        if hang:
            time.sleep(30)  # a cache miss on a network call that never answers
        return "hit"

    await _proven(cached)
    started = time.perf_counter()
    result = await cached.invoke({"hang": True})
    assert time.perf_counter() - started < 5
    assert result.kind is ResultKind.SYSTEM_ERROR
    assert result.error == "tool 'cached' timed out after 0.2 s"
    # It held the loop: from now on it runs on threads, and works there.
    assert not cached.proven_quick
    assert (await cached.invoke({"hang": False})).data == "hit"
    for _ in range(_PROVEN_CALLS * 2):
        await cached.invoke({"hang": False})
    assert not cached.proven_quick


async def test_a_non_blocking_tool_looping_forever_is_interrupted() -> None:
    @tool(blocking=False, timeout_s=0.1)
    def forever() -> str:
        while True:
            pass

    started = time.perf_counter()
    result = await forever.invoke({})
    assert time.perf_counter() - started < 5
    assert result.error == "tool 'forever' timed out after 0.1 s"


async def test_a_tool_that_swallows_the_interruption_still_times_out_and_is_named(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inline, "_STUCK_WARNING_S", 0.1)

    @tool(blocking=False, timeout_s=0.05)
    def stubborn() -> str:
        try:
            _spin(1)
        except BaseException:  # what a careless tool does
            _spin(0.4)
        return "late"

    with caplog.at_level(logging.WARNING, logger="agentbench.tools"):
        result = await stubborn.invoke({})
    assert result.error == "tool 'stubborn' timed out after 0.05 s"
    assert any(
        "'stubborn'" in r.getMessage() and "blocking=True" in r.getMessage() for r in caplog.records
    )


async def test_the_interruption_never_lands_after_the_call() -> None:
    """Calls ending right at their deadline, over and over: the signal may come just after
    one returned, and must then be ignored, not raised in the loop."""

    @tool(blocking=False, timeout_s=0.02)
    def edge() -> str:
        _spin(0.019)
        return "ok"

    kinds = set()
    for _ in range(40):
        kinds.add((await edge.invoke({})).kind)
        await asyncio.sleep(0.002)
    assert kinds <= {ResultKind.OK, ResultKind.SYSTEM_ERROR}


def test_off_the_main_thread_a_default_tool_stays_on_threads() -> None:
    threads: list[int | None] = []

    @tool
    def add(n: int) -> int:
        threads.append(threading.get_ident())
        return n + 1

    async def calls() -> int | None:
        for n in range(_PROVEN_CALLS * 3):
            await add.invoke({"n": n})
        return threading.get_ident()

    loop_thread: list[int | None] = []
    worker = threading.Thread(target=lambda: loop_thread.append(asyncio.run(calls())))
    worker.start()
    worker.join()
    assert add.proven_quick  # it would run on the loop, if the loop were on the main thread
    assert loop_thread[0] not in threads and MAIN not in threads


async def test_a_signal_someone_else_handles_keeps_tools_on_threads() -> None:
    previous = signal.getsignal(inline.INTERRUPT_SIGNAL)
    signal.signal(inline.INTERRUPT_SIGNAL, lambda *_: None)
    await asyncio.sleep(inline._POLL_S * 5)  # the watchdog, if running, notices at its next look
    try:
        threads: list[int | None] = []

        @tool
        def add(n: int) -> int:
            threads.append(threading.get_ident())
            return n + 1

        for n in range(_PROVEN_CALLS * 2):
            await add.invoke({"n": n})
        assert MAIN not in threads
    finally:
        signal.signal(inline.INTERRUPT_SIGNAL, previous)


REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="none")


@pytest.mark.parametrize("blocking", [True, False, None])
async def test_every_placement_sees_the_runs_context_and_leaks_nothing_into_it(
    blocking: bool | None,
) -> None:
    @tool(blocking=blocking)
    def which() -> str:
        seen = REQUEST_ID.get()
        REQUEST_ID.set("set by the tool")
        return seen

    token = REQUEST_ID.set("r-1")
    try:
        for _ in range(_PROVEN_CALLS + 2):
            assert (await which.invoke({})).data == "r-1"
            assert REQUEST_ID.get() == "r-1"
    finally:
        REQUEST_ID.reset(token)


async def test_a_run_moves_its_tool_to_the_loop_and_keeps_the_same_messages() -> None:
    def lookup(key: str) -> str:
        """Look a key up."""
        return key.upper()

    def script() -> ScriptedModel:
        calls = [ToolCall("lookup", {"key": f"k{i}"}, id=f"c{i}") for i in range(6)]
        return ScriptedModel([*calls, "done"])

    auto = tool(effect="read_only")(lookup)
    threaded = tool(effect="read_only", blocking=True)(lookup)
    moved = await Runner.run(Agent(name="a", tools=[auto]), "go", model=script())
    kept = await Runner.run(Agent(name="a", tools=[threaded]), "go", model=script())
    assert auto.proven_quick
    assert moved.completed and moved.messages == kept.messages
