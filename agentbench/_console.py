"""The installed `agentbench` command: the CLI, and a quiet exit on Ctrl-C at any moment.

Importing the CLI takes a second or more (every command's libraries); a Ctrl-C meanwhile would
end in a traceback from the import machinery, or surface as another error (Python wraps an
exception raised while a class is being created in a RuntimeError). So from this module's first
lines until the command itself starts, a Ctrl-C ends the process at once (there is nothing to
keep yet); the package's `__init__` loads its names lazily, so little runs before that. Once
the command runs, an interrupt ends it as an interrupted command does: exit 130, one line, no
traceback (an interrupted `run` first says what it kept).
"""

from __future__ import annotations

import os
import signal
import sys

EXIT_INTERRUPTED = 130


def _interrupted() -> int:
    # os.write: no buffered stream that a second Ctrl-C could leave half-flushed. (No
    # contextlib.suppress here: importing it would take longer than this whole module.)
    try:  # noqa: SIM105
        os.write(2, b"interrupted\n")
    except (KeyboardInterrupt, OSError):
        pass
    return EXIT_INTERRUPTED


def _quit_at_once(signum: int, frame: object) -> None:
    os._exit(_interrupted())


# Importing this module is starting the command (the console script's first line does it).
_previous = signal.signal(signal.SIGINT, _quit_at_once)


def run() -> None:
    try:
        from agentbench.cli import main, user_interrupted
    except KeyboardInterrupt:  # raised by the import itself, not by the signal
        sys.exit(_interrupted())
    signal.signal(signal.SIGINT, _previous)
    try:
        code = main()
    except BaseException as exc:
        if not user_interrupted(exc):
            raise
        code = _interrupted()
    try:  # noqa: SIM105
        sys.stdout.flush()
    except (KeyboardInterrupt, OSError):
        pass
    sys.exit(code)
