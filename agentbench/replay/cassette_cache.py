"""Parsed cassettes, kept by content: a YAML cassette is parsed once per content, not per run.

Parsing YAML costs ~4 ms for a six-call cassette, a quarter of a replayed case's time, and a
suite is run again and again while its cassettes stay the same. So the data a cassette parses
to is kept as JSON (read back in a tenth of the time) under a key that is a hash of the file's
text and of this parser's version: an edited cassette, or a newer agentbench, simply misses,
and nothing needs invalidating. Only data that JSON keeps exactly is cached (a YAML timestamp
or `!!binary` body would come back as a string), so a hit is always what parsing would give.

The cache is `$AGENTBENCH_CACHE_DIR/cassettes` (default: `~/.cache/agentbench`); it may be
deleted at any time, and `AGENTBENCH_CACHE_DIR=off` turns it off. A cache that cannot be read
or written is skipped, never an error: it only ever saves time.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from agentbench._version import __version__

log = logging.getLogger("agentbench.cassette")

CACHE_ENV = "AGENTBENCH_CACHE_DIR"
# Part of every key: bump when what a cassette parses to changes for the same text.
PARSE_VERSION = 1
_NOT_FINITE = re.compile(r"\.(?:nan|inf)\b", re.IGNORECASE)


def cache_dir() -> Path | None:
    """Where parsed cassettes are kept, or None when the cache is off."""
    configured = os.environ.get(CACHE_ENV)
    if configured and configured.lower() in ("off", "0", "false", "no"):
        return None
    root = Path(configured) if configured else Path.home() / ".cache" / "agentbench"
    return root / "cassettes"


def parsed(text: str, parse: Callable[[str], Any]) -> Any:
    """What `parse(text)` gives, from the cache when this very text was parsed before."""
    folder = cache_dir()
    if folder is None:
        return parse(text)
    key = hashlib.blake2b(
        f"{PARSE_VERSION}:{__version__}\0{text}".encode(), digest_size=20
    ).hexdigest()
    path = folder / key[:2] / f"{key[2:]}.json"
    cached = _read(path)
    if cached is not None:
        return cached
    data = parse(text)
    _keep(path, text, data)
    return data


def _read(path: Path) -> Any:
    """The cached data at `path`; None when it is not cached (or half written by a crash)."""
    try:
        return orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None


def _keep(path: Path, text: str, data: Any) -> None:
    if _NOT_FINITE.search(text):  # YAML's .nan and .inf: JSON would keep them as null
        return
    try:
        # A datetime (YAML timestamp) would come back as text: refused like bytes, a set or an
        # integer past 64 bits, which JSON does not have at all.
        blob = orjson.dumps(data, option=orjson.OPT_PASSTHROUGH_DATETIME)
    except TypeError:
        return
    # Written whole, then renamed: a reader never sees half a file.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        try:
            tmp.write_bytes(blob)
        except FileNotFoundError:  # the first entry of its folder (a mkdir each time is slow)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_bytes(blob)
        tmp.replace(path)
    except OSError as exc:
        log.debug("cassette cache not written (%s): %s", path, exc)
