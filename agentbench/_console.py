"""The installed `agentbench` command: the CLI, and a quiet exit on Ctrl-C at any moment.

Importing the CLI takes a second or more (every command's libraries); a Ctrl-C meanwhile would
end in a traceback from the import machinery. This module imports nothing heavy itself (the
package's `__init__` loads its names lazily), so the interrupt is caught here wherever it lands,
and the command ends as an interrupted command does: exit 130, one line, no traceback.
"""

from __future__ import annotations

import contextlib
import os
import sys

EXIT_INTERRUPTED = 130


def run() -> None:
    try:
        from agentbench.cli import main

        code = main()
    except KeyboardInterrupt:
        code = _interrupted()
    with contextlib.suppress(KeyboardInterrupt, OSError):
        sys.stdout.flush()
    sys.exit(code)


def _interrupted() -> int:
    # os.write: no buffered stream that a second Ctrl-C could leave half-flushed.
    with contextlib.suppress(KeyboardInterrupt, OSError):
        os.write(2, b"interrupted\n")
    return EXIT_INTERRUPTED
