"""`blocking=False` sync tools, on the event loop's own thread, under a watchdog that
interrupts a call at its timeout.

Handing a call to another thread and back costs two thread wake-ups: 100-150 µs on a 2-core
virtual machine, ten times a whole replayed step. A tool its author declares pure
computation (`blocking=False`) runs on the event loop's thread instead, and something must
still stop it at its timeout (a loop that never ends, a computation far bigger than meant).
Python cannot stop a thread from outside, but the main thread can be interrupted by a
signal: its handler runs between two bytecodes of the tool, and a blocking call
(`time.sleep`, a socket read, a lock, a subprocess wait) returns early to let it run. So on
the main thread one watchdog thread sends it `INTERRUPT_SIGNAL` when a call passes its
deadline, and the handler raises inside the call; again, less and less often, for as long
as the call goes on (a tool may catch it, or be interrupted in cleanup that waits). Off the
main thread, or where the signal is someone else's, the timeout is cooperative.

The watchdog is never woken for a call (a wake-up is the very cost being saved): a call only
sets `_current`, and the watchdog looks at it every `_POLL_S`. So a call is interrupted
within `_POLL_S` of its deadline. The watchdog exits after `_IDLE_EXIT_S` without calls.

What cannot be interrupted: C code that holds the GIL (on a thread, that would have stalled
the loop too) or that retries an interrupted system call without letting Python handle the
signal (SQLite's busy wait). The watchdog then logs, once, which tool is stuck.

Tools are never moved here on their own (see `tools`): only their author knows that a tool
does not wait, run an event loop of its own, or keep things bound to its thread.
"""

from __future__ import annotations

import contextvars
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger("agentbench.tools")

# A real-time signal, which nobody else is likely to use. Where there are none (macOS,
# Windows), no call is interrupted: SIGUSR1/2 are often taken, and a handler set from C
# (faulthandler's, say) does not show in `signal.getsignal`.
INTERRUPT_SIGNAL: int = signal.SIGRTMIN + 4 if hasattr(signal, "SIGRTMIN") else 0
_POLL_S = 0.02
_IDLE_EXIT_S = 10.0
# A call still running after an interruption is interrupted again, at most this far apart.
_REINTERRUPT_MAX_S = 1.0
# After its deadline, how long until the watchdog says a call does not stop.
_STUCK_WARNING_S = 1.0


class _Interrupted(BaseException):
    """Raised inside a call past its deadline; a BaseException so `except Exception` in the
    tool does not swallow it."""


class _Watched:
    """The call running now: its deadline, and the watchdog's interruptions of it."""

    __slots__ = ("deadline", "interrupt_at", "interrupts", "name", "raised")

    def __init__(self, name: str, deadline: float) -> None:
        self.name = name
        self.deadline = deadline
        self.interrupt_at = deadline  # when the watchdog sends the signal next
        self.interrupts = 0  # signals sent
        self.raised = False  # the handler raised in the call


_current: _Watched | None = None
_watchdog_running = False
_calls = 0  # calls started, so an idle watchdog can tell a quiet spell from a busy one
_lock = threading.Lock()  # only to start or stop the watchdog, never per call
# Whether the interrupt signal's handler is ours: checked when the watchdog starts and at each
# of its polls, not per call (`signal.getsignal` costs a few µs, a good part of a call here).
_handler_ours = False


def available() -> bool:
    """Whether a call here now can be interrupted at its timeout: on the main thread, with
    the signal handler ours, and no other watched call running (a tool that runs a nested
    event loop, whose own calls are then cooperative)."""
    global _handler_ours
    if _current is not None or threading.get_ident() != threading.main_thread().ident:
        return False
    if _handler_ours and _watchdog_running:  # which keeps `_handler_ours` up to date
        return True
    if not INTERRUPT_SIGNAL or not hasattr(signal, "pthread_kill"):
        return False
    handler = signal.getsignal(INTERRUPT_SIGNAL)
    if handler is not _on_signal:
        if handler != signal.SIG_DFL:  # someone else's (None: set from C): leave it alone
            _handler_ours = False
            return False
        signal.signal(INTERRUPT_SIGNAL, _on_signal)
    _handler_ours = True
    return True


def call(name: str, fn: Callable[[], Any], timeout_s: float | None, *, watch: bool) -> Any:
    """Run `fn` here, in a copy of the caller's context variables (as on a thread: what the
    tool sets does not leak into the run); raise TimeoutError once it passes `timeout_s`,
    whether the watchdog interrupted it (`watch`, where `available()`) or it returned (or
    raised) too late, as a thread would have stopped waiting at the deadline."""
    global _current, _calls
    deadline = None if timeout_s is None else time.perf_counter() + timeout_s
    watched = None
    if deadline is not None and watch:
        watched = _current = _Watched(name, deadline)
        _calls += 1
        if not _watchdog_running:
            _start_watchdog()
    try:
        try:
            value = contextvars.copy_context().run(fn)
        finally:
            if watched is not None:
                _current = None
    except _Interrupted:
        if watched is None:
            raise  # the watched call's around this one (a tool running an event loop)
        # Also when it lands in the `finally` above, before `_current` was cleared.
        _current = None
        raise TimeoutError from None
    except Exception:
        if _overran(deadline, watched):
            raise TimeoutError from None
        raise
    if _overran(deadline, watched):
        raise TimeoutError
    return value


def _overran(deadline: float | None, watched: _Watched | None) -> bool:
    """Past the deadline, or interrupted (a tool that caught it and returned in time)."""
    if deadline is None:
        return False
    return time.perf_counter() > deadline or (watched is not None and watched.raised)


def _on_signal(signum: int, frame: object) -> None:
    watched = _current
    if watched is not None and watched.interrupts:
        watched.raised = True
        raise _Interrupted
    # Otherwise the call ended as the signal was sent: nothing to interrupt. (It runs on the
    # main thread, the one that sets `_current`: a late signal never reaches the next call.)


def _start_watchdog() -> None:
    global _watchdog_running
    with _lock:
        if _watchdog_running:
            return
        _watchdog_running = True
    _check_handler()
    main = threading.main_thread().ident
    threading.Thread(
        target=_watch, args=(main,), name="agentbench-tool-watchdog", daemon=True
    ).start()


def _check_handler() -> None:
    """Someone may have set their own handler for the signal since: then calls stop coming
    here, and none is interrupted (their timeout is cooperative)."""
    global _handler_ours
    if _handler_ours and signal.getsignal(INTERRUPT_SIGNAL) is not _on_signal:
        _handler_ours = False


def _watch(main: int) -> None:
    global _watchdog_running
    seen, quiet_since = _calls, time.monotonic()
    warned: _Watched | None = None
    while True:
        time.sleep(_POLL_S)
        _check_handler()
        watched = _current
        if watched is None:
            if _calls != seen:
                seen, quiet_since = _calls, time.monotonic()
            elif time.monotonic() - quiet_since > _IDLE_EXIT_S:
                with _lock:
                    # Stopped first, then checked: a call that read "running" before this
                    # has already set `_current` or counted itself, and one that reads
                    # "stopped" waits for the lock to start a watchdog.
                    _watchdog_running = False
                    if _current is None and _calls == seen:
                        return
                    _watchdog_running = True
            continue
        now = time.perf_counter()
        if now < watched.interrupt_at:
            continue
        # Counted first: the handler may run before this thread gets the GIL back.
        watched.interrupts += 1
        watched.interrupt_at = now + min(_REINTERRUPT_MAX_S, _POLL_S * 2**watched.interrupts)
        # Checked just before: a handler set to SIG_DFL between the two would let the signal
        # end the process. Nobody else uses this signal; setting it is the one way in.
        if _handler_ours:
            signal.pthread_kill(main, INTERRUPT_SIGNAL)
        if warned is not watched and now - watched.deadline > _STUCK_WARNING_S:
            warned = watched
            log.warning(
                "tool %r has run on the event loop %.1f s past its timeout and does not stop "
                "when interrupted (waiting in C code, or catching the interruption); drop "
                "blocking=False so that it runs on a thread of its own",
                watched.name,
                now - watched.deadline,
            )


def _after_fork() -> None:
    """In a forked child: no watchdog runs here, and the call (if any) is the parent's."""
    global _current, _watchdog_running, _lock
    _current, _watchdog_running, _lock = None, False, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
