"""CPU seconds of other processes, read from `/proc` (Linux): a server a benchmark started, with
the processes it started in turn, or a store's recording process — the CPU the machine pays
beside this process's own `time.process_time()`."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any


def process_cpu_s(pid: int, *, children: bool = False) -> float:
    """User + system CPU seconds of process `pid` so far (0 if it is gone), and with
    `children`, of its live child processes too."""
    pids = [pid]
    if children:
        with contextlib.suppress(OSError):  # gone, or not Linux: its own CPU only
            listed = Path(f"/proc/{pid}/task/{pid}/children").read_text()
            pids += [int(child) for child in listed.split()]
    total = 0.0
    for one in pids:
        try:
            fields = Path(f"/proc/{one}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def recording_process_cpu(store: Any) -> float:
    """CPU seconds a `TraceStore`'s recording process has used so far (0 without one)."""
    process = getattr(getattr(store, "_channel", None), "_process", None)
    return 0.0 if process is None else process_cpu_s(process.pid)
