"""The CLI boundary: every error a command raises becomes one line that says what and where.

Errors agentbench raises on purpose already say what was expected; a file the disk refused
(full, read-only) is the machine's fault and is said so (`disk_fault`); anything else is a bug
(in agentbench or in the agent code it ran), and a user still gets one line — the command,
the exception, the innermost frame outside installed libraries, and what to do — instead of
a traceback. `--debug` anywhere on the command line (or `AGENTBENCH_DEBUG=1`) adds the full
traceback. With `--json` the error is also written to stdout as JSON, so a script reading
stdout learns why there is no result.
"""

from __future__ import annotations

import errno
import itertools
import os
import sys
import sysconfig
import traceback
from dataclasses import dataclass
from pathlib import Path

import click
import orjson

from agentbench.errors import one_line

DEBUG_FLAG = "--debug"
DEBUG_ENV = "AGENTBENCH_DEBUG"
# Frames in these folders are libraries (pydantic, duckdb, the standard library): the place
# to name is the last frame of code someone here wrote.
_LIBRARY_DIRS = tuple(
    str(Path(p).resolve())
    for p in {sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"]}
)


@dataclass(frozen=True)
class Invocation:
    """What the user typed, minus the flags handled here."""

    args: list[str]
    debug: bool
    as_json: bool

    @classmethod
    def parse(cls, argv: list[str] | None) -> Invocation:
        given = list(sys.argv[1:] if argv is None else argv)
        debug = DEBUG_FLAG in given or os.environ.get(DEBUG_ENV, "") not in ("", "0")
        return cls([a for a in given if a != DEBUG_FLAG], debug, "--json" in given)

    @property
    def document_on_stdout(self) -> bool:
        """Whether stdout carries a document for programs (`--json`, `--format json|csv`),
        written as its format says rather than escaped for a terminal."""
        args = self.args
        formats = {b for a, b in itertools.pairwise(args) if a == "--format"}
        formats |= {a.removeprefix("--format=") for a in args if a.startswith("--format=")}
        return self.as_json or bool(formats & {"json", "csv"})

    def command(self, names: set[str]) -> str:
        """`agentbench run`, `agentbench traces list`: the command words that were typed."""
        words = ["agentbench"]
        for arg in self.args:
            if arg.startswith("-"):
                continue
            if len(words) == 1 and arg not in names:
                break
            words.append(arg)
            if len(words) == 3 or arg != "traces":
                break
        return " ".join(words)


def where(exc: BaseException) -> str:
    """`path/to/file.py:123 (function)` of the innermost frame that is not a library's."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "?"
    ours = [f for f in frames if not str(Path(f.filename).resolve()).startswith(_LIBRARY_DIRS)]
    frame = (ours or frames)[-1]
    path = Path(frame.filename)
    try:
        shown = str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        shown = str(path)
    return f"{shown}:{frame.lineno} ({frame.name})"


def unexpected(command: str, exc: BaseException, *, debug: bool) -> str:
    """The one line (and hint) for an exception nobody meant to raise."""
    message = one_line(exc, 300)
    hint = (
        "the full traceback is above"
        if debug
        else f"rerun with {DEBUG_FLAG} (or {DEBUG_ENV}=1) for the full traceback"
    )
    return (
        f"error: {command} failed: unexpected {type(exc).__name__} at {where(exc)}: {message}\n"
        f"  this is a bug in agentbench or in the code it ran; {hint}, and please report it"
    )


_DISK_SAYS = {
    errno.ENOSPC: "its disk is full",
    errno.EDQUOT: "its disk quota is used up",
    errno.EFBIG: "a file size limit was reached",
    errno.EROFS: "its filesystem is read-only",
    errno.EACCES: "this user may not write there",
    errno.EPERM: "this user may not write there",
}


def disk_fault(command: str, exc: BaseException) -> str | None:
    """The one line for a file the disk refused outside the store (a report, a cassette, an
    export DuckDB writes): not a bug, so no traceback hint. None if `exc` is not that."""
    # A DuckDB error can only come from a command that loaded DuckDB: one that did not is not
    # made to load it here.
    duckdb = sys.modules.get("duckdb")
    if not isinstance(exc, (OSError, duckdb.Error) if duckdb is not None else OSError):
        return None
    from agentbench.trace.storage.faults import fault_errno, file_of

    code = fault_errno(exc)
    if code is None:
        return None
    file = file_of(exc)
    where = f"{file}: " if file is not None else ""
    return f"error: {command} failed: {where}{os.strerror(code)} ({_DISK_SAYS[code]})"


def report(invocation: Invocation, exc: BaseException, line: str, exit_code: int, kind: str) -> int:
    """Print the error (stderr; also stdout as JSON with --json); return the exit code."""
    if invocation.debug:
        traceback.print_exception(exc, file=sys.stderr)
    click.echo(line, err=True)
    if invocation.as_json:
        error = {"kind": kind, "message": line.removeprefix("error: "), "exit_code": exit_code}
        click.echo(orjson.dumps({"error": error}).decode())
    return exit_code
