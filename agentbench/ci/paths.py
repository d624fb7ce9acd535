"""Where a case lives, as CI tools want it: a path relative to the repository, and a line.

A result's `source` is "file:line" as the suite was found (relative to the working directory
the eval ran in, or absolute). CI annotations and JUnit `file` attributes need the path relative
to the checkout root: `root` if given, else `GITHUB_WORKSPACE` (the checkout on GitHub Actions),
else the working directory. A file outside the root keeps the path it was recorded with.
"""

from __future__ import annotations

import os
from pathlib import Path


def checkout_root(root: Path | None = None) -> Path:
    return (root or Path(os.environ.get("GITHUB_WORKSPACE") or Path.cwd())).resolve()


def split_source(source: str | None, root: Path | None = None) -> tuple[str | None, int | None]:
    """("golden/sre/cases/sre.yaml", 12) from "golden/sre/cases/sre.yaml:12"; (None, None)."""
    if not source:
        return None, None
    file, sep, line = source.rpartition(":")
    if not sep or not line.isdigit():
        file, line = source, ""
    path = Path(file)
    base = checkout_root(root)
    absolute = (path if path.is_absolute() else Path.cwd() / path).resolve()
    try:
        shown = absolute.relative_to(base).as_posix()
    except ValueError:
        shown = path.as_posix()  # outside the root: as recorded (absolute stays absolute)
    return shown, int(line) if line else None
