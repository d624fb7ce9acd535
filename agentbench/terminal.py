"""Text that is safe to show on a terminal: every control character a terminal would act on
written out as an escape (`\\x1b`, `\\x07`, `\\x9b`) instead.

What agentbench prints comes largely from others: a served request's user and content, a
model's answer, a tool's output, a case's id, an error a tool raised. A terminal acts on the
control characters in them — colours and cursor moves, a window title (OSC 0), a clipboard
write (OSC 52), a bell, an 8-bit CSI (U+009B) — so printed raw they could rewrite what the
user sees or reach their clipboard. `escaped` is the rule: C0 controls (but newline and tab,
which lay the text out), DEL and the C1 controls U+0080–U+009F become their Python escape.
The sandbox keeps its programs' output this way; `escaping_output` applies it to everything
the CLI writes to the terminal (see `agentbench.cli`).
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
from collections.abc import Iterator
from typing import Any, TextIO

# C0 controls but newline and tab, DEL, and C1 controls; and a lone surrogate (half an emoji),
# which no terminal's encoding can write: printed raw, it failed the command.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def escaped(text: str) -> str:
    """`text` with every terminal control character written as its escape (`\\x1b`, `\\r`);
    newlines and tabs are kept."""
    if not _CONTROL.search(text):
        return text
    return _CONTROL.sub(lambda found: repr(found.group())[1:-1], text)


class EscapingStream(io.TextIOBase):
    """A text stream that writes to `raw` with every control character escaped."""

    def __init__(self, raw: TextIO) -> None:
        self.raw = raw

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.raw, "encoding", None) or "utf-8"

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return getattr(self.raw, "errors", None)

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if not isinstance(text, str):  # a binary writer's bytes: refused as a text stream
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self.raw.write(escaped(text))
        return len(text)

    def flush(self) -> None:
        self.raw.flush()

    def isatty(self) -> bool:
        return self.raw.isatty()

    def fileno(self) -> int:
        return self.raw.fileno()


def raw_stream(stream: Any) -> Any:
    """The stream under an `EscapingStream` (for a writer that draws on the terminal
    itself, such as a progress bar), or `stream` itself."""
    return stream.raw if isinstance(stream, EscapingStream) else stream


@contextlib.contextmanager
def escaping_output(*, stdout: bool = True) -> Iterator[None]:
    """Within the block, what is written to stderr (and to stdout, unless `stdout` is False:
    a document for programs, such as JSON, stays byte for byte what its format says) has
    every control character escaped."""
    saved = sys.stdout, sys.stderr
    sys.stderr = EscapingStream(sys.stderr)
    if stdout:
        sys.stdout = EscapingStream(sys.stdout)
    try:
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        sys.stdout, sys.stderr = saved
