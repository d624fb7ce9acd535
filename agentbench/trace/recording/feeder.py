"""Recorded items applied to recorders: what the recording process does with what it reads,
and what its parent does with what it kept if that process dies (see `recording.channel`).
A recorder's failure is logged and costs only that event, except a `RecordingError` (the
store's disk refused the run), which is raised: whoever applies the items must tell it."""

from __future__ import annotations

import logging
import pickle
import traceback
from collections.abc import Callable
from typing import Any

from agentbench.errors import RecordingError
from agentbench.trace.errors import TraceStoreError
from agentbench.trace.recorder import TraceRecorder
from agentbench.trace.recording.event_wire import WireReader
from agentbench.trace.redaction.redactor import Redactor

log = logging.getLogger("agentbench.trace")

Reply = Callable[[tuple[Any, ...]], None]


class Feeder:
    """Applies items to recorders over a store: in the recording process, or in the parent
    after that process died (`adopt_shapes` False: the shape numbers are its own)."""

    def __init__(self, store: Any, *, reply: Reply | None, adopt_shapes: bool) -> None:
        self.store = store
        # None: recording in the process that encoded the items, where no one waits for an
        # answer (its flush is the store's own).
        self.reply = reply
        self.reader = WireReader(adopt_shapes=adopt_shapes)
        self.recorders: dict[int, Any] = {}

    def apply(self, hook: int, data: bytes) -> None:
        item = self.reader.item(hook, data)
        tag = item[0]
        if tag == "event":
            event = self.reader.event(item)
            recorder = self.recorders.get(hook)
            if recorder is None:
                log.warning("recording: an event of hook %d before its header; dropped", hook)
                return
            try:
                recorder(event)
            except RecordingError:
                raise  # the store could not keep the run: the caller must hear it
            except Exception as exc:  # as a failing hook in the parent: logged, never fatal
                # Masked with the run's own secrets (this process's environment lacks them).
                trace = "".join(traceback.format_exception(exc))
                log.warning(
                    "recording %s #%s failed; the run's other events are still recorded\n%s",
                    getattr(event, "kind", "?"),
                    getattr(event, "seq", "?"),
                    recorder.redactor.document(trace),
                )
        elif tag in ("header", "secrets"):
            self._hook_item(hook, item)
        elif tag == "end":
            self.recorders.pop(hook, None)
            self.reader.forget(hook)
            self._answer(("ended", hook))
        elif tag == "results":
            self.store.record_results(item[1])
            self._answer(("ended", hook))
        elif tag == "shapes":
            self.reader.adopt(item[1])
        elif tag == "flush":
            try:
                self.store.flush()
            except Exception as exc:
                self._answer(("flushed", item[1], _portable_error(exc)))
            else:
                self._answer(("flushed", item[1], None))
        else:
            raise ValueError(f"unknown recording item {tag!r}")

    def _hook_item(self, hook: int, item: tuple[Any, ...]) -> None:
        """A hook's header (its recorder made), or secrets learned where its runs ran (see
        `learning`: a replay's masks), which its recorder masks from now on."""
        if item[0] == "header":
            self.recorders[hook] = self._recorder(*item[1:])
            return
        recorder = self.recorders.get(hook)
        if recorder is not None:
            recorder.redactor.learn(item[1])

    def _answer(self, item: tuple[Any, ...]) -> None:
        if self.reply is not None:
            self.reply(item)

    def _recorder(self, labels: Any, rules: Any, code_version: str | None) -> Any:
        # The parent's environment secrets are literal values in `rules`: this process's
        # environment is not read (it may differ).
        return TraceRecorder(
            self.store,
            redactor=Redactor(rules, environ={}),
            labels=labels,
            code_version=lambda: code_version,
        )


def _portable_error(exc: Exception) -> Exception:
    """`exc` if it pickles (the store's own errors do), else a TraceStoreError saying it."""
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return TraceStoreError(f"{type(exc).__name__}: {exc}")
    return exc
