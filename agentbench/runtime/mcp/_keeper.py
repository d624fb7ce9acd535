"""Keeps an stdio MCP server's process group, and ends all of it when either side goes.

Run as `python -I _keeper.py SETTINGS` in a new session (so it leads a process group of its
own), it starts the server in that group on its own stdin, stdout and stderr (the pipes of the
agentbench process that started it), says the server's pid (or why it could not start) on the
report pipe, and then holds no pipe of the server's. It ends the group:

* when the server exits: whatever the server started and left behind goes with it;
* when the agentbench process closes the lifeline pipe, on purpose or by dying (SIGTERM,
  SIGKILL, a crash: the kernel closes it): the server gets `grace_s` to exit on its own (its
  stdin has ended too), then SIGTERM and `grace_s` more, then SIGKILL with everything else.

The last act is SIGKILL to the whole group, this process included. Standard library only:
this runs in a bare `python -I`, before anything of agentbench could be imported.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time

_POLL_S = 0.05  # how often the server's exit is looked at where no pidfd is available


def main() -> None:
    settings = json.loads(sys.argv[1])
    lifeline, report = settings["lifeline"], settings["report"]
    try:
        server = subprocess.Popen(settings["command"], cwd=settings["cwd"])
    except OSError as exc:
        _say(report, {"errno": exc.errno, "strerror": exc.strerror, "filename": exc.filename})
        os._exit(127)
    # Only now: an ignored signal stays ignored across exec, and the server must feel it.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # what it sends the group is not for itself
    _say(report, {"pid": server.pid})
    # From here on only the server holds its pipes: when it and its children are gone, the
    # agentbench process reads the end of its output.
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    if not _caller_gone_first(server, lifeline):
        _end_group()
    grace_s = float(settings["grace_s"])
    if _exited_within(server, grace_s):
        _end_group()
    with contextlib.suppress(OSError):
        os.killpg(0, signal.SIGTERM)
    _exited_within(server, grace_s)
    _end_group()


def _say(report: int, what: dict[str, object]) -> None:
    with contextlib.suppress(OSError):
        os.write(report, json.dumps(what).encode() + b"\n")
        os.close(report)


def _caller_gone_first(server: subprocess.Popen[bytes], lifeline: int) -> bool:
    """Wait until the server exits (False) or the lifeline ends (True)."""
    try:
        exited = os.pidfd_open(server.pid)
    except (AttributeError, OSError):
        exited = None
    watched = [lifeline] if exited is None else [lifeline, exited]
    while True:
        ready, _, _ = select.select(watched, [], [], _POLL_S if exited is None else None)
        if server.poll() is not None:
            return False
        if lifeline in ready:
            try:
                if not os.read(lifeline, 512):
                    return True
            except OSError:
                return True


def _exited_within(server: subprocess.Popen[bytes], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while server.poll() is None:
        if time.monotonic() >= deadline:
            return False
        time.sleep(_POLL_S)
    return True


def _end_group() -> None:
    os.killpg(0, signal.SIGKILL)
    os._exit(0)  # not reached: the group is this process's own


if __name__ == "__main__":
    main()
