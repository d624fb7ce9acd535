"""The documentation pages (README.md and docs/**/*.md) and the fenced code blocks in them.

A page's blocks follow the docs' code-block convention: every fence names a language; `text`
is output or a diagram and never runs; python, bash, yaml, json and toml blocks run (or are
parsed) unless the line just before the fence is `<!-- not run: <reason> -->`. Other
directives on the lines just before a fence: `<!-- file: relative/path -->` writes the block
to that path instead (any language: it is data for the blocks after it), and
`<!-- exit: N -->` is the exit status a bash block is expected to end with. A page that breaks
the convention gets a `ConventionError` naming its page and line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

RUNNABLE = ("python", "bash", "yaml", "json", "toml")
NOT_CODE = "text"

_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>.*?)[ \t]*$")
_DIRECTIVE = re.compile(r"^\s*<!--\s*(?P<name>[a-z][a-z -]*?)\s*:\s*(?P<value>.*?)\s*-->\s*$")
_KNOWN_DIRECTIVES = ("not run", "file", "exit")


class ConventionError(Exception):
    """A page breaks the code-block convention; the message names the page and line."""


@dataclass(frozen=True)
class Block:
    """One fenced block of a page, with the directives written just above its fence."""

    page: str  # the page's path from the repository root, e.g. "docs/guides/replay.md"
    line: int  # the fence's line, counted from 1
    language: str
    body: str
    not_run: str | None = None  # the reason, when the block is marked as not run
    file: str | None = None  # where the block is written, when it is a file
    exit: int = 0

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def runs(self) -> bool:
        return self.not_run is None and self.file is None and self.language != NOT_CODE


def pages() -> list[Path]:
    """README.md and every Markdown page under docs/, in path order."""
    found = [ROOT / "README.md"]
    if DOCS.is_dir():
        found += sorted(DOCS.rglob("*.md"))
    return found


def page_id(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def blocks(page: Path) -> list[Block]:
    """The page's fenced blocks in page order; ConventionError names the first misuse."""
    return parse(page.read_text(encoding="utf-8"), page_id(page))


def parse(text: str, page: str) -> list[Block]:
    lines = text.splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None or ("`" in opening["info"] and opening["fence"][0] == "`"):
            index += 1
            continue
        start = index
        indent, fence = len(opening["indent"]), opening["fence"]
        body: list[str] = []
        index += 1
        while index < len(lines) and not _closes(lines[index], fence):
            body.append(_dedent(lines[index], indent))
            index += 1
        if index == len(lines):
            raise ConventionError(f"{page}:{start + 1}: this fence is never closed")
        index += 1
        found.append(_block(page, start, lines, opening["info"], body))
    return found


def _closes(line: str, fence: str) -> bool:
    closing = _FENCE.match(line)
    return (
        closing is not None
        and not closing["info"]
        and closing["fence"][0] == fence[0]
        and len(closing["fence"]) >= len(fence)
    )


def _dedent(line: str, indent: int) -> str:
    spaces = len(line) - len(line.lstrip(" "))
    return line[min(spaces, indent) :]


def _block(page: str, start: int, lines: list[str], info: str, body: list[str]) -> Block:
    where = f"{page}:{start + 1}"
    language = info.split()[0].lower() if info else ""
    directives = _directives_above(lines, start, where)
    file = directives.get("file")
    if not language:
        raise ConventionError(
            f"{where}: a fenced block without a language; name one "
            f"({', '.join((*RUNNABLE, NOT_CODE))}; `text` for output and diagrams)"
        )
    if file is None and language not in (*RUNNABLE, NOT_CODE):
        raise ConventionError(
            f"{where}: unknown language {language!r}: code is one of {', '.join(RUNNABLE)}, "
            f"output and diagrams are `text` (a `<!-- file: path -->` block may be any language)"
        )
    not_run = directives.get("not run")
    if not_run is not None and not not_run:
        raise ConventionError(f"{where}: `<!-- not run: -->` needs a reason after the colon")
    if file is not None:
        _check_file_path(file, where)
    exit_code = 0
    if "exit" in directives:
        if language != "bash":
            raise ConventionError(f"{where}: `<!-- exit: N -->` is for bash blocks only")
        if not directives["exit"].isdigit():
            raise ConventionError(
                f"{where}: `<!-- exit: {directives['exit']} -->` needs a whole number"
            )
        exit_code = int(directives["exit"])
    return Block(page, start + 1, language, "\n".join(body) + "\n", not_run, file, exit_code)


def _directives_above(lines: list[str], start: int, where: str) -> dict[str, str]:
    """The directives on the comment lines directly above the fence (no blank line between)."""
    directives: dict[str, str] = {}
    index = start - 1
    while index >= 0:
        directive = _DIRECTIVE.match(lines[index])
        if directive is None:
            break
        name = " ".join(directive["name"].split())
        if name not in _KNOWN_DIRECTIVES:
            raise ConventionError(
                f"{page_line(where, index)}: unknown directive `<!-- {name}: ... -->` above "
                f"a fence; the directives are " + ", ".join(f"`{d}:`" for d in _KNOWN_DIRECTIVES)
            )
        directives.setdefault(name, directive["value"])
        index -= 1
    if "not run" in directives and ("file" in directives or "exit" in directives):
        raise ConventionError(f"{where}: a block marked `not run` takes no other directive")
    return directives


def page_line(where: str, index: int) -> str:
    return f"{where.rsplit(':', 1)[0]}:{index + 1}"


def _check_file_path(path: str, where: str) -> None:
    pure = PurePosixPath(path)
    if not path or pure.is_absolute() or ".." in pure.parts:
        raise ConventionError(
            f"{where}: `<!-- file: {path} -->` needs a relative path inside the page's folder"
        )
