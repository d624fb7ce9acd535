"""Awaiting a coroutine that usually finishes without ever suspending.

Most awaits of a replayed step never suspend: a replayed model answers from memory, an async
tool that only computes returns at once. Guarding such an await with a timer (a tool's
`timeout_s`) or a registration (the run's deadline) costs more than the await itself, and
neither can act before the coroutine suspends: a timer fires, and a cancellation lands, only
while the event loop runs. So the coroutine is first run up to its first suspension
(`first_step`); only if it suspends is the guard set up, and the rest awaited (`resume`)
exactly as `await` would have: what it yields goes to the task, what the task sends or throws
(a cancellation) goes back into it.
"""

from __future__ import annotations

import types
from collections.abc import Coroutine, Generator
from typing import Any

Step = tuple[bool, Any]  # (finished, its value) or (suspended, what it yielded to the task)


def first_step(coro: Coroutine[Any, Any, Any]) -> Step:
    """Run `coro` until it finishes or first suspends; what it raises propagates."""
    try:
        yielded = coro.send(None)
    except StopIteration as finished:
        return True, finished.value
    return False, yielded


@types.coroutine
def resume(coro: Coroutine[Any, Any, Any], yielded: Any) -> Generator[Any, Any, Any]:
    """Await the rest of a coroutine suspended at `yielded`: what `yield from` would do."""
    while True:
        try:
            sent = yield yielded
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:  # a cancellation thrown in by the task, typically
            try:
                yielded = coro.throw(exc)
            except StopIteration as finished:
                return finished.value
        else:
            try:
                yielded = coro.send(sent)
            except StopIteration as finished:
                return finished.value
