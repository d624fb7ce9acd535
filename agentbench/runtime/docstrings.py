"""Parameter descriptions from Google-, NumPy- and Sphinx-style docstrings.

Only what a tool schema needs: the summary (everything before the first section) and one
description per parameter. Unknown styles yield the whole docstring as the summary and no
parameter descriptions, which is still a valid tool.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field

_GOOGLE_ARGS = re.compile(r"^\s*(Args|Arguments|Parameters|Params)\s*:\s*$")
_GOOGLE_SECTION = re.compile(
    r"^\s*(Returns?|Yields?|Raises?|Examples?|Notes?|Attributes|See Also|Warnings?|Todo)\s*:\s*$"
)
_GOOGLE_PARAM = re.compile(r"^(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")
_NUMPY_UNDERLINE = re.compile(r"^\s*-{3,}\s*$")
_SPHINX_PARAM = re.compile(r"^\s*:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")
_SPHINX_ANY = re.compile(r"^\s*:\w+")


@dataclass
class ParsedDocstring:
    summary: str = ""
    params: dict[str, str] = field(default_factory=dict)


def parse_docstring(doc: str | None) -> ParsedDocstring:
    """Split a docstring into its summary and per-parameter descriptions."""
    if not doc:
        return ParsedDocstring()
    lines = inspect.cleandoc(doc).splitlines()
    for parser in (_parse_numpy, _parse_google, _parse_sphinx):
        parsed = parser(lines)
        if parsed is not None:
            return parsed
    return ParsedDocstring(summary="\n".join(lines).strip())


def _join(parts: list[str]) -> str:
    return " ".join(p.strip() for p in parts if p.strip())


def _parse_google(lines: list[str]) -> ParsedDocstring | None:
    start = next((i for i, line in enumerate(lines) if _GOOGLE_ARGS.match(line)), None)
    if start is None:
        return None
    summary = "\n".join(lines[:start]).strip()
    params: dict[str, str] = {}
    indent: int | None = None
    current: str | None = None
    for line in lines[start + 1 :]:
        if _GOOGLE_SECTION.match(line) or _GOOGLE_ARGS.match(line):
            break
        if not line.strip():
            continue
        width = len(line) - len(line.lstrip())
        if indent is None:
            indent = width
        if width < indent:
            break
        match = _GOOGLE_PARAM.match(line.strip()) if width == indent else None
        if match:
            current = match.group(1).lstrip("*")
            params[current] = match.group(3).strip()
        elif current is not None:
            params[current] = _join([params[current], line])
    return ParsedDocstring(summary=summary, params=params)


def _parse_numpy(lines: list[str]) -> ParsedDocstring | None:
    header = next(
        (
            i
            for i in range(len(lines) - 1)
            if lines[i].strip() in ("Parameters", "Arguments", "Args")
            and _NUMPY_UNDERLINE.match(lines[i + 1])
        ),
        None,
    )
    if header is None:
        return None
    summary = "\n".join(lines[:header]).strip()
    params: dict[str, str] = {}
    current: str | None = None
    body = lines[header + 2 :]
    for i, line in enumerate(body):
        if i + 1 < len(body) and _NUMPY_UNDERLINE.match(body[i + 1]):
            break  # the next section's title
        if not line.strip():
            continue
        if not line.startswith((" ", "\t")):
            # "name : type" or just "name"; several names may share one entry ("x, y : int")
            names = line.split(":", 1)[0]
            current = names.split(",")[0].strip().lstrip("*")
            params[current] = ""
            for extra in names.split(",")[1:]:
                params[extra.strip().lstrip("*")] = ""
        elif current is not None:
            params[current] = _join([params[current], line])
    return ParsedDocstring(summary=summary, params=params)


def _parse_sphinx(lines: list[str]) -> ParsedDocstring | None:
    first = next((i for i, line in enumerate(lines) if _SPHINX_PARAM.match(line)), None)
    if first is None:
        return None
    summary = "\n".join(lines[:first]).strip()
    params: dict[str, str] = {}
    current: str | None = None
    for line in lines[first:]:
        match = _SPHINX_PARAM.match(line)
        if match:
            current = match.group(1)
            params[current] = match.group(2).strip()
        elif _SPHINX_ANY.match(line):
            current = None
        elif current is not None and line.strip():
            params[current] = _join([params[current], line])
    return ParsedDocstring(summary=summary, params=params)
