"""This process's side of the recording process: the hook that encodes events, the channel
that sends them, and recording here again if that process dies.

A `TraceStore(..., recording_process=True)` gives runs a `ProcessRecorder` hook instead of a
`TraceRecorder`: it encodes each event as it happens (`event_wire`) and hands it to the
store's `RecordingChannel`, which writes them to the recording process (see
`recording.process`) a run at a time: when a run starts (so a crash shows it as incomplete),
when it finishes, and every `_WRITE_BYTES` between. The process is started with the store, and
imports what it needs while the caller sets its runs up. A run's items are kept until it ends
(see below): ~1.3 KB a step, so a 10,000-step session holds ~13 MB more than it would here.

Nothing sent is lost if the recording process dies: the channel keeps each hook's items until
the process says that hook's runs are in its journal ("ended"). If it dies before — killed,
or failing — the channel records what it kept itself, through the store's own journal, and
every run after that too (a warning says so once). A run it stored twice (journaled there just
before dying) is stored once: the store skips a run it has. If the process could not keep a
run (its disk full, the store read-only) it says so and exits, and the channel takes over the
same way: a run recorded here from then on that the disk refuses raises at once, and what it
refuses of the items the process had not confirmed (runs already handed back) is raised by
the next `flush` or `close` (a `RecordingError`, counting what was lost), or warned at
interpreter exit.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import itertools
import logging
import os
import pickle
import select
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from agentbench.errors import RecordingError
from agentbench.runtime import packed
from agentbench.trace.code_version import code_version as current_code_version
from agentbench.trace.recorder import RunLabels
from agentbench.trace.recording.event_wire import CHANNEL, WireWriter, frame, frames_in, new_shapes
from agentbench.trace.recording.feeder import Feeder
from agentbench.trace.recording.learning import Learner
from agentbench.trace.redaction.redactor import Redactor
from agentbench.trace.schema import RunRows

if TYPE_CHECKING:
    from agentbench.trace.recording.local import Recording
    from agentbench.trace.redaction.rules import RedactionRules
    from agentbench.trace.storage.database import WaitNotice

log = logging.getLogger("agentbench.trace")

# Items gathered before they are written, between a run's start and its end.
_WRITE_BYTES = 1 << 16
# How long a flush waits for the recording process beyond the store's own wait for its lock
# (the process bounds that wait itself; this only catches a process that hangs).
_FLUSH_MARGIN_S = 60.0
_EXIT_MARGIN_S = 10.0
_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)
_PIPE_BYTES = 1 << 20
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[3])


class ChannelStore(Protocol):
    """What a channel uses of the `TraceStore` it belongs to: described, not imported, since
    the store's module imports this one. Recording here again, it takes the store's own
    recording in this process (`_recorder_side`, and `_recording` if there is one yet)."""

    path: Path
    redaction: RedactionRules
    wait_s: float
    exit_wait_s: float
    fsync: bool
    on_wait: WaitNotice
    _recording: Recording | None

    def flush(self) -> None: ...

    def _recorder_side(self) -> Recording: ...


class ProcessRecorder:
    """The runner hook of a store recording in its recording process: one per `Runner` call
    (and the runs it hands off to), as `TraceRecorder` is. Its `redactor` learns the run's
    secrets here too (see `learning`), for what this process writes about the run."""

    __slots__ = (
        "_channel",
        "_generation",
        "_hook",
        "_labels",
        "_learn",
        "_open_runs",
        "_told",
        "_writer",
    )

    def __init__(
        self, channel: RecordingChannel, labels: RunLabels, redactor: Redactor | None = None
    ) -> None:
        self._channel = channel
        self._labels = labels
        self._learn = Learner(redactor or Redactor(channel.store.redaction))
        self._told = 0  # learned secrets the recording process has been told of
        self._writer: WireWriter | None = None
        self._hook = 0
        self._open_runs = 0
        self._generation = 0

    def __call__(self, event: Any) -> None:
        writer = self._writer
        if writer is None or self._generation != self._channel.generation:
            writer = self._begin()  # first, or the store was closed and opened again
        kind = event.kind
        data = writer.event(event)
        self._learn(event)
        learned = self._learn.redactor.learned
        if len(learned) != self._told:
            # Learned here, not from an event the process reads (a replay's masks): its
            # recorder must mask them too, before the run's rows are made.
            self._told = len(learned)
            self._channel.send(self._hook, writer.item(("secrets", sorted(learned))), now=False)
        if kind == "run_started":
            self._open_runs += 1
            self._channel.send(self._hook, data, now=True)
        elif kind == "run_finished":
            self._open_runs -= 1
            self._channel.send(self._hook, data, now=False)
            if self._open_runs <= 0:  # not a handoff's run, whose conversation goes on
                self._channel.send(self._hook, writer.item(("end",)), now=True)
                self._writer = None  # a later run of this hook begins again
        else:
            self._channel.send(self._hook, data, now=False)

    def _begin(self) -> WireWriter:
        """A new hook number, and its header: the labels, the redaction rules with this
        process's environment secrets, and the secrets learned so far, made literal, the code
        version."""
        writer = self._writer = WireWriter()
        self._hook = self._channel.new_hook()
        self._generation = self._channel.generation
        self._open_runs = 0
        rules = self._learn.redactor.portable_rules()
        self._told = len(self._learn.redactor.learned)
        header = ("header", self._labels, rules, current_code_version())
        self._channel.send(self._hook, writer.item(header), now=False)
        return writer


class RecordingChannel:
    """The recording process of one store, and what is on its way to it."""

    def __init__(self, store: ChannelStore) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        self._pid = os.getpid()
        self._process: subprocess.Popen[bytes] | None = None
        self._pending = bytearray()
        self._hooks = itertools.count(1)
        self._tokens = itertools.count(1)
        self._local: Feeder | None = None  # recording here: the process died
        # What the disk refused of the items recorded here when taking over, not told yet:
        # raised by the next `flush` or `close`.
        self._fault: RecordingError | None = None
        self.generation = 0  # one more each time its process is closed: hooks begin again
        self._new_process_state()

    def _new_process_state(self) -> None:
        # Each hook's items not yet confirmed in the process's journal, in order.
        self._kept: dict[int, list[bytes]] = {}
        self._shapes = 0  # packed shapes described to the process
        self._replies = bytearray()
        self._flushed: dict[int, BaseException | None] = {}
        self._exited = False  # its output ended
        self._unflushed = False  # items sent since the last flush returned
        self._closing = False

    def forked(self) -> None:
        """In a forked child: the recording process is the parent's. This copy's ends of its
        pipes are closed (kept open, the process would never see its input end when the
        parent closes it), the lock made anew (another thread may have held it at the fork),
        and the child records through a process of its own once it records."""
        process = self._process
        if process is not None:
            _release(process)  # never written through: the writer holds nothing unwritten
        self._lock = threading.Lock()
        self._reset()

    # -- called by hooks -------------------------------------------------------------------
    def start(self) -> None:
        """Start the recording process now (it takes a moment to import what it needs; a
        store made to record starts it early, so that happens while the runs are set up)."""
        with self._lock:
            if self._process is None and self._local is None:
                try:
                    self._process = self._start()
                except OSError as exc:
                    self._take_over(f"could not start ({exc})")

    def new_hook(self) -> int:
        return next(self._hooks)

    def send(self, hook: int, item: bytes, *, now: bool) -> None:
        """Send one hook's item: written at once (`now`) or with the next write."""
        with self._lock:
            if os.getpid() != self._pid:  # a forked child starts its own process
                self._reset()
            if self._local is not None:
                self._local.apply(hook, item)
                return
            if packed.shape_count() > self._shapes:
                described = new_shapes(self._shapes)
                self._shapes += len(described)
                self._pending += frame(CHANNEL, pickle.dumps(("shapes", described), 5))
            kept = self._kept.get(hook)
            if kept is None:
                kept = self._kept[hook] = []
            kept.append(item)
            self._unflushed = True
            self._pending += frame(hook, item)
            if now or len(self._pending) >= _WRITE_BYTES:
                self._write()

    def record_results(self, rows: list[dict[str, Any]]) -> None:
        """Eval result rows, journaled by the process as they come (their own hook)."""
        self.send(self.new_hook(), pickle.dumps(("results", rows), 5), now=True)

    # -- flushing and closing ----------------------------------------------------------------
    def flush(self, *, even_if_idle: bool = False) -> None:
        """Return once everything sent so far is stored (raising what stopped the store);
        `even_if_idle`: once the process answers, though nothing was sent since the last
        flush (it has started and opened the store)."""
        with self._lock:
            if os.getpid() != self._pid:
                self._reset()
            if even_if_idle and self._process is None and self._local is None:
                self._write()  # starts it
            # Nothing sent since the last flush: nothing to wait for (a command reading the
            # store before its first run does not wait for the process to start).
            wait = self._unflushed or even_if_idle
            if self._local is None and self._process is not None and wait:
                token = next(self._tokens)
                self._pending += frame(CHANNEL, pickle.dumps(("flush", token), 5))
                self._write()
                error = self._wait_for_flush(token)
                if error is not None:
                    raise error
                self._unflushed = False
            if self._local is not None:
                self._raise_fault()
                self._local.store.flush()

    def close(self, *, at_exit: bool = False) -> None:
        """Let the process store what it has and exit (it leaves its journal for the next
        process if the store stays busy); record here whatever it could not confirm. What
        the disk refused of that, not told yet, is raised (`at_exit`: warned)."""
        with self._lock:
            if os.getpid() != self._pid:
                return
            try:
                self._close_process()
            finally:
                fault, self._fault = self._fault, None
            if fault is not None and at_exit:
                log.warning("%s", fault)
            elif fault is not None:
                raise fault

    def _close_process(self) -> None:
        if self._process is None or self._local is not None:
            return
        process = self._process
        if self._pending:
            self._write()
        if self._local is not None:
            return
        self._closing = True
        with contextlib.suppress(OSError):
            process.stdin.close()  # type: ignore[union-attr]
        deadline = time.monotonic() + self.store.exit_wait_s + _EXIT_MARGIN_S
        while time.monotonic() < deadline and not self._exited:
            self._read_replies(min(0.5, max(0.0, deadline - time.monotonic())))
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
        _release(process)
        # Status 0: it read everything to the end and stored it (or left its journal).
        if process.returncode != 0:
            self._take_over(
                "did not exit in time"
                if process.returncode is None
                else f"exited with status {process.returncode}"
            )
        self._process = None
        _open_channels.discard(self)
        # Recording again starts a new process, and hooks begin again with it (a header
        # first); runs still open here are stored as they were when it closed.
        self._new_process_state()
        self.generation += 1

    # -- the process ---------------------------------------------------------------------
    def _start(self) -> subprocess.Popen[bytes]:
        store = self.store
        env = dict(os.environ)
        # The process imports this very agentbench, however this one was found.
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "agentbench.trace.recording.process",
                str(store.path),
                repr(store.wait_s),
                repr(store.exit_wait_s),
                "1" if store.fsync else "0",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            close_fds=True,
            # Out of the terminal's process group: a Ctrl-C is the command's to handle (it
            # closes this process's input, and what was sent is stored); delivered here too,
            # it would land while the process is still importing, as a traceback.
            start_new_session=True,
        )
        assert process.stdout is not None and process.stdin is not None
        os.set_blocking(process.stdout.fileno(), False)
        # Room for a few dozen runs on their way: the process keeps pace on average, and a
        # run it takes longer over (a batch being committed) does not hold this one up.
        with contextlib.suppress(OSError):
            fcntl.fcntl(process.stdin.fileno(), _F_SETPIPE_SZ, _PIPE_BYTES)
        _open_channels.add(self)
        return process

    def _write(self) -> None:
        """Write what is pending (blocking while the process's input is full: it is behind)."""
        if self._process is None:
            try:
                self._process = self._start()
            except OSError as exc:
                self._take_over(f"could not start ({exc})")
                return
        self._read_replies(0.0)
        if self._local is not None:
            return
        data, self._pending = memoryview(bytes(self._pending)), bytearray()
        fd = self._process.stdin.fileno()  # type: ignore[union-attr]
        try:
            while data:
                data = data[os.write(fd, data) :]
        except OSError as exc:  # BrokenPipeError: it died
            self._take_over(f"stopped reading ({exc.strerror or exc})")

    def _read_replies(self, wait_s: float) -> None:
        """Handle what the process said, waiting up to `wait_s` for it to say something."""
        process = self._process
        if process is None or self._exited:
            return
        fd = process.stdout.fileno()  # type: ignore[union-attr]
        if wait_s > 0:
            select.select([fd], [], [], wait_s)
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                break
            except OSError:
                chunk = b""
            if not chunk:  # its output ended: it exited
                self._exited = True
                break
            self._replies += chunk
        for _, data in frames_in(self._replies):
            self._reply(pickle.loads(data))
        if self._exited and not self._closing:
            process.wait()
            self._take_over(f"exited with status {process.returncode}")

    def _reply(self, item: tuple[Any, ...]) -> None:
        tag = item[0]
        if tag == "ended":
            self._kept.pop(item[1], None)
        elif tag == "flushed":
            self._flushed[item[1]] = item[2]
        elif tag == "notice":
            self.store.on_wait(item[1])
        elif tag == "fault":
            self._take_over(f"could not keep a run ({item[1].headline})", quiet=True)

    def _wait_for_flush(self, token: int) -> BaseException | None:
        """Wait (holding the lock, letting go of it while nothing is to be read) for the
        answer to flush `token`: the store may be another process's for a while, and hooks
        on other threads go on meanwhile, as they would recording here."""
        process = self._process
        deadline = time.monotonic() + self.store.wait_s + _FLUSH_MARGIN_S
        while token not in self._flushed:
            if self._local is not None:
                return None  # it died: the flush is done here (see `flush`)
            if self._process is not process:
                return None  # closed meanwhile, which stored everything it had
            if self._exited or time.monotonic() > deadline:
                self._take_over("did not answer a flush")
                return None
            fd = process.stdout.fileno()  # type: ignore[union-attr]
            self._lock.release()
            try:
                select.select([fd], [], [], 0.5)
            except (OSError, ValueError):  # closed by another thread: seen above next time
                pass
            finally:
                self._lock.acquire()
            self._read_replies(0.0)
        return self._flushed.pop(token)

    def _take_over(self, why: str, *, quiet: bool = False) -> None:
        """Record here from now on, starting with every item the process did not confirm
        (`quiet`: the process said why itself, and what it costs is told as a fault)."""
        if self._local is not None:
            return
        (log.info if quiet else log.warning)(
            "the recording process for %s %s; recording in this process from now on "
            "(%d unconfirmed recorders' events are recorded here)",
            self.store.path,
            why,
            len(self._kept),
        )
        process = self._process
        if process is not None:
            if process.poll() is None:
                process.kill()  # it may be stuck; what it journaled is recovered like any crash
                process.wait()
            _release(process)
        self._exited = True
        self._local = Feeder(_InProcess(self.store), reply=None, adopt_shapes=False)
        kept, self._kept = self._kept, {}
        self._pending = bytearray()
        for hook in sorted(kept):
            for item in kept[hook]:
                try:
                    self._local.apply(hook, item)
                except RecordingError as fault:  # counted by the store; told once, later
                    self._fault = fault
                except Exception:  # one item the store refuses costs no other item
                    log.warning("recording an item of recorder %d here failed", hook, exc_info=True)

    def _raise_fault(self) -> None:
        """Tell the fault met recording what the process had not confirmed (once)."""
        fault, self._fault = self._fault, None
        if fault is not None:
            raise fault


def _release(process: subprocess.Popen[bytes]) -> None:
    for pipe in (process.stdin, process.stdout):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()


class _InProcess:
    """The store's own recording in this process, as the `Feeder` of a dead process uses it."""

    def __init__(self, store: ChannelStore) -> None:
        self.store = store

    def run_started(self, row: dict[str, Any]) -> None:
        self.store._recorder_side().run_started(row)

    def run_part(self, rows: RunRows) -> None:
        self.store._recorder_side().run_part(rows)

    def run_finished(self, rows: RunRows) -> None:
        self.store._recorder_side().run_finished(rows)

    def record_results(self, rows: list[dict[str, Any]]) -> None:
        if rows:
            self.store._recorder_side().run_finished(RunRows(results=list(rows)))

    def flush(self) -> None:
        recording = self.store._recording
        if recording is not None:
            recording.flush(self.store.wait_s, self.store.on_wait)


_open_channels: weakref.WeakSet[RecordingChannel] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for channel in list(_open_channels):
        _open_channels.discard(channel)
        channel.forked()


os.register_at_fork(after_in_child=_after_fork_in_child)


@atexit.register
def _close_at_exit() -> None:
    for channel in list(_open_channels):
        with contextlib.suppress(Exception):
            channel.close(at_exit=True)
