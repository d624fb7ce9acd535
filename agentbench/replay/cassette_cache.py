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

The first run of a large suite (on a new machine, in CI) finds the cache empty: `prefetching`
then parses the suite's cassettes into it in a second process (`cassette_prefetch`), on
another core, ahead of the run that reads them — which parses any it gets to first itself, as
it always did.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from agentbench._version import __version__
from agentbench.yaml_source import SourceError, read_source

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
    path = _entry(folder, text)
    cached = _read(path)
    if cached is not None:
        return cached
    data = parse(text)
    _keep(path, text, data)
    return data


def _entry(folder: Path, text: str) -> Path:
    key = hashlib.blake2b(
        f"{PARSE_VERSION}:{__version__}\0{text}".encode(), digest_size=20
    ).hexdigest()
    return folder / key[:2] / f"{key[2:]}.json"


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


# Fewer cassettes than this are parsed faster than a second process starts (~0.5 s).
PREFETCH_MIN = 100


@contextlib.contextmanager
def prefetching(cassettes: Iterable[Path]) -> Iterator[None]:
    """While the block runs, a second process parses `cassettes` (YAML ones, in the order
    they will be read) into the cache — when it is on, they are many, the machine has another
    core, and the first and last are not cached yet (a suite run before is read from the
    cache: nothing to do). It is stopped when the block ends, finished or not.

    `cassettes` may be a generator: they are written to the worker's listing as they come,
    never all held (an eval of a million trials would hold a path each)."""
    folder = cache_dir()
    if folder is None or _cores() < 2:
        yield
        return
    listing = _listing(cassettes)
    if listing is None or _cached(folder, (listing.first, listing.last)):
        if listing is not None:
            listing.path.unlink(missing_ok=True)
        yield
        return
    try:
        worker = subprocess.Popen(
            [sys.executable, "-m", "agentbench.replay.cassette_prefetch", str(listing.path)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C is the command's to handle: it stops this one
        )
    except OSError as exc:
        log.debug("cassettes not prefetched: %s", exc)
        listing.path.unlink(missing_ok=True)
        yield
        return
    try:
        yield
    finally:
        _stop(worker)
        listing.path.unlink(missing_ok=True)


@dataclass(frozen=True)
class _Listing:
    path: Path
    first: Path
    last: Path


def _listing(cassettes: Iterable[Path]) -> _Listing | None:
    """The YAML cassettes written one a line to a temporary file (a trial's repeats, which
    come one after another, once), or None when there are fewer than `PREFETCH_MIN`."""
    first: Path | None = None
    previous: Path | None = None
    count = 0
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as out:
        for path in cassettes:
            if path == previous or path.suffix.lower() == ".json":
                continue
            out.write(f"{path}\n")
            first = first or path
            previous = path
            count += 1
    if first is None or previous is None or count < PREFETCH_MIN:
        Path(out.name).unlink(missing_ok=True)
        return None
    return _Listing(Path(out.name), first, previous)


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _cached(folder: Path, paths: Sequence[Path]) -> bool:
    """Whether the first and the last cassette are cached (or cannot be read here)."""
    for path in paths:
        try:
            text = read_source(path)  # bounded: a named pipe is not waited on
        except SourceError:
            continue
        if not _entry(folder, text).is_file():
            return False
    return True


def _stop(worker: subprocess.Popen[bytes]) -> None:
    """Ask the prefetching process to stop after the cassette it is on (it only ever saves
    time), and wait for it; one that does not stop within a few seconds is killed."""
    if worker.poll() is None:
        worker.terminate()
    try:
        worker.wait(timeout=5)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.wait()
