"""The recording process: a child that turns its parent's events into rows and stores them.

Recording a run costs more than running it when the model is a cassette: redaction, request
diffs, JSON and DuckDB take ~1.5 ms of Python a run for ~2.6 ms of running it. A suite runs
its trials in one process, whose GIL allows one of these at a time, so the parent only
encodes each event (`event_wire`, ~5 µs) and this process does the rest on another core:
the same `TraceRecorder`, over a `TraceStore` with its own journal, as the parent would use.

    python -m agentbench.trace.recording.process STORE WAIT_S EXIT_WAIT_S FSYNC

It reads frames on stdin (see `event_wire`) until they end — its parent closed them, or
died — then stores what it has and exits, so every run the parent finished is stored even
if the parent is killed. Ctrl-C reaches the whole process group; this process ignores it
and ends with its input. It answers on stdout (frames of hook 0):

* ("ended", hook): every run of that hook (or that batch of results) is in its journal,
  durable: the parent lets go of the hook's frames, which it keeps until then in case this
  process dies (it then records them itself, see `recording.channel`);
* ("flushed", token, error): everything before the flush request is stored (error: what
  stopped it, raised in the parent);
* ("notice", text): the store's wait notices, for the parent to show;
* ("fault", error): the disk refused a run (full, or the store read-only); this process then
  stops reading and exits with `FAULT_STATUS`, and the parent records what it did not
  confirm itself (keeping it if there is room again, else saying what was lost).

Items it reads: on hook 0, ("shapes", [...]) and ("flush", token); on a hook, ("header",
labels, rules, code version) first, then ("event", ...) items — and ("secrets", values) when
the parent learned of secrets the events do not show (see `learning`) — then ("end",); or
("results", rows) alone.
"""

from __future__ import annotations

import logging
import signal
import sys
from pathlib import Path
from typing import Any

# The exit status after a ("fault", error) answer.
FAULT_STATUS = 3


def main(argv: list[str]) -> int:
    # Before anything else: a Ctrl-C meant for the parent must not cut the storing short.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import pickle

    from agentbench.errors import RecordingError
    from agentbench.trace.recording.event_wire import CHANNEL, frame, frames
    from agentbench.trace.recording.feeder import Feeder
    from agentbench.trace.store import TraceStore

    path, wait_s, exit_wait_s, fsync = argv
    out = sys.stdout.buffer
    parent_gone = False

    def reply(item: tuple[Any, ...]) -> None:
        nonlocal parent_gone
        if parent_gone:
            return
        try:
            out.write(frame(CHANNEL, pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL)))
            out.flush()
        except BrokenPipeError:  # the parent died: what it sent is still stored
            parent_gone = True

    store = TraceStore(
        Path(path),
        wait_s=float(wait_s),
        exit_wait_s=float(exit_wait_s),
        on_wait=lambda text: reply(("notice", text)),
        fsync=fsync == "1",
    )
    feeder = Feeder(store, reply=reply, adopt_shapes=True)
    try:
        for hook, data in frames(sys.stdin.buffer):
            feeder.apply(hook, data)
    except RecordingError as exc:
        # The disk refused a run (full, or the store read-only): the parent takes over every
        # item not confirmed yet, and keeps what it can or says what it could not.
        reply(("fault", exc))
        return FAULT_STATUS
    except Exception:
        # Through agentbench's logger, whose filter masks secrets (a bare traceback would
        # not be); the parent records what this process did not confirm.
        logging.getLogger("agentbench.trace").exception("the recording process failed")
        return 1
    finally:
        store.close()  # what was read is stored, however reading ended
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
