"""The spool's quarantine: journals that could not be stored whole, kept aside with the reason.

A dead process's journal that cannot be read (another user's, not a file at all) or has lines
that cannot be parsed is moved to `<spool>/quarantine/` with a `<name>.why` file beside it,
and a warning names it; the good lines of a readable one are stored first. Nothing is deleted:
fix the file (or its permissions) and move it back into the spool, and the next process that
opens the store stores it (runs already stored are skipped by id).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("agentbench.trace")

FOLDER = "quarantine"
WHY = ".why"


@dataclass(frozen=True)
class Quarantined:
    """A file in the quarantine, and why it is there."""

    path: Path
    why: str


def quarantine(path: Path, why: str, spool: Path) -> Path | None:
    """Move `path` into the spool's quarantine with a `.why` file; warn naming both.

    Returns where it went, or None if it could not be moved (then it stays where it was, and
    the warning says so) or someone else moved it first.
    """
    folder = spool / FOLDER
    target = folder / path.name
    try:
        folder.mkdir(parents=True, exist_ok=True)
        number = 1
        while os.path.lexists(target):
            number += 1
            target = folder / f"{path.stem}.{number}{path.suffix}"
        os.rename(path, target)
    except FileNotFoundError:
        return None  # another process quarantined or stored it meanwhile
    except OSError as exc:
        log.warning("%s: %s; could not move it to %s/ (%s), so it stays", path, why, folder, exc)
        return None
    try:
        target.with_name(target.name + WHY).write_text(why + "\n")
    except OSError as exc:
        log.warning("%s: could not write why it was quarantined (%s): %s", target, exc, why)
    log.warning(
        "%s: %s; moved to %s (the reason is in %s%s); everything else in the spool is stored",
        path.name,
        why,
        target,
        target.name,
        WHY,
    )
    return target


def quarantined(spool: Path) -> list[Quarantined]:
    """What is in the quarantine, oldest name first, each with its reason."""
    folder = spool / FOLDER
    try:
        names = sorted(e.name for e in os.scandir(folder) if not e.name.endswith(WHY))
    except OSError:
        return []
    found = []
    for name in names:
        try:
            why = (folder / (name + WHY)).read_text().strip()
        except OSError:
            why = "(no .why file beside it)"
        found.append(Quarantined(folder / name, why))
    return found
