"""The prefetching process: `python -m agentbench.replay.cassette_prefetch LISTING` parses the
cassettes listed, one a line, into the cassette cache, ahead of the run that reads them
(`cassette_cache.prefetching` starts it and stops it).

Apart from `cassette_cache` because it parses with `cassette`, which reads through the cache.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path

from agentbench.replay.cassette import _parse
from agentbench.replay.cassette_cache import _entry, cache_dir
from agentbench.yaml_source import read_source


def prefetch(listing: Path) -> int:
    """The prefetching process: parse each cassette listed into the cache, in order, until
    done or told to stop (SIGTERM). A cassette that cannot be parsed is skipped: the run
    reports it when it reads it."""
    folder = cache_dir()
    stop: list[bool] = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    parent = os.getppid()
    for line in listing.read_text(encoding="utf-8").splitlines():
        # A run killed outright (SIGKILL) cannot stop us: its end is seen as a new parent.
        if stop or folder is None or os.getppid() != parent:
            break
        path = Path(line)
        with contextlib.suppress(Exception):
            # One the run parsed first is skipped unread (a hit would still cost a read).
            text = read_source(path)
            if not _entry(folder, text).is_file():
                _parse(path)
    return 0


if __name__ == "__main__":
    sys.exit(prefetch(Path(sys.argv[1])))
