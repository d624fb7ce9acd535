"""Ctrl-C: what a command that was interrupted leaves behind, and how to go on from there.

`agentbench run` stores each trial as it finishes, so an interrupted eval can be resumed. A
command decorated with `explains_interruption` turns the KeyboardInterrupt into `Interrupted`,
whose message says what was kept: the eval id and the exact `--resume` command once the eval
was started, else that nothing was stored. The CLI prints it and exits 130, the shell's code
for a process ended by SIGINT, without a traceback. An eval stopped by its store's disk (full,
read-only) is told the same way, as that fault (exit 3): `ResumeNote.stopped_by`.
"""

from __future__ import annotations

import contextvars
import functools
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from agentbench.errors import Interrupted
from agentbench.trace.errors import StorageFaultError

F = TypeVar("F", bound=Callable[..., Any])

# Flags whose value names the eval: a resumed run names it with --resume instead.
_EVAL_FLAGS = ("--eval-id", "--resume")


@dataclass
class ResumeNote:
    """What an interrupted `run` had got to, filled in as it goes."""

    argv: Sequence[str] = ()  # the command line after `agentbench`
    eval_id: str | None = None
    store: Path | None = None
    planned: int | None = None  # trials this run meant to run
    # Whether the eval is in the store yet (so it can be resumed), and its trials stored so far.
    started: Callable[[], bool] = field(default=lambda: False)
    finished: Callable[[], int] = field(default=lambda: 0)
    # Trials among `finished` whose results the store's disk refused to keep.
    unkept: Callable[[], int] = field(default=lambda: 0)

    def message(self) -> str:
        if self.eval_id is None or not self.started():
            return "interrupted before the eval started: nothing was stored; run it again"
        done = self.finished()
        of = f" of {self.planned}" if self.planned is not None else ""
        where = f" in {self.store}" if self.store is not None else ""
        command = resume_command(self.argv, self.eval_id)
        if self.planned is not None and done >= self.planned:
            return (
                f"interrupted: eval {self.eval_id} has all {done} trial(s) stored{where}, but "
                f"was not gated and reported; do that with:\n  {command}"
            )
        return (
            f"interrupted: eval {self.eval_id} keeps the {done}{of} trial(s) that finished"
            f"{where}; run the rest with:\n  {command}"
        )

    def stopped_by(self, fault: StorageFaultError) -> StorageFaultError:
        """`fault` (the store's disk refused a write), saying what the eval keeps and how to
        finish it once there is room: the trials whose results could not be kept are not
        counted as finished, and `--resume` runs them again."""
        if self.eval_id is None or not self.started():
            return fault
        done = max(0, self.finished() - self.unkept())
        of = f" of {self.planned}" if self.planned is not None else ""
        return fault.adding(
            f"eval {self.eval_id} keeps the {done}{of} trial(s) that finished",
            advice=(
                "free some space on its disk, then run the rest with "
                f"`{resume_command(self.argv, self.eval_id)}` (the journals are stored first), "
                "or point --db / AGENTBENCH_DB at a store on another disk"
            ),
        )


_note: contextvars.ContextVar[ResumeNote | None] = contextvars.ContextVar(
    "agentbench_resume_note", default=None
)


def resume_command(argv: Sequence[str], eval_id: str) -> str:
    """`agentbench` + `argv` with the eval named by `--resume EVAL_ID` (and no `--eval-id`)."""
    kept: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg in _EVAL_FLAGS:
            skip = True
            continue
        if arg.startswith(tuple(f"{flag}=" for flag in _EVAL_FLAGS)):
            continue
        kept.append(arg)
    return shlex.join(["agentbench", *kept, "--resume", eval_id])


def command_line() -> Sequence[str]:
    """The arguments `agentbench` was called with (after the program's name), as the CLI
    handed them to click."""
    import click

    context = click.get_current_context(silent=True)
    obj = context.find_root().obj if context is not None else None
    return list(obj.get("argv", ())) if isinstance(obj, dict) else []


def note() -> ResumeNote:
    """The note of the command running now (a fresh one outside `explains_interruption`)."""
    found = _note.get()
    return found if found is not None else ResumeNote()


def explains_interruption(argv: Callable[[], Sequence[str]]) -> Callable[[F], F]:
    """Turn a KeyboardInterrupt in the decorated command into `Interrupted`, worded from the
    `note()` the command filled in, and a storage fault into one saying what the eval keeps;
    `argv` gives the command line it was called with."""

    def decorate(command: F) -> F:
        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            current = ResumeNote(argv=list(argv()))
            token = _note.set(current)
            try:
                return command(*args, **kwargs)
            except KeyboardInterrupt:
                raise Interrupted(current.message(), eval_id=current.eval_id) from None
            except StorageFaultError as fault:
                raise current.stopped_by(fault) from None
            finally:
                _note.reset(token)

        return wrapper  # type: ignore[return-value]

    return decorate
