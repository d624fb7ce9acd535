"""What a run teaches a redactor where its events are only encoded, not recorded.

A store that records in its recording process (`recording.channel`) hands a run's events over
encoded; the rows, and their redaction, are made in the other process, whose redactor learns
the run's secrets (`Redactor.learned`) and masks the stored run with them. This process still
writes about the run — an eval's results and what is made of them, a cassette — and must mask
there what the run taught. Redacting every event here too would cost what the recording
process exists to save (a scan of every event is ~10% of a replayed run), so this process
learns what the issue's probes are made of, at the cost of a dictionary lookup a key: values
under a secret key in tool arguments (`password`, `Authorization` headers, any depth), in
context variables and in the run's context, and the secrets a replay's recording had masked
(`ReplayModel(on_secrets=...)`, straight into the same redactor). A pattern's secret met bare
elsewhere (the token of a `Bearer …` in the model's text, repeated without it) is learned by
the recording process alone: masked in the store, and where this process writes the pattern's
match itself.
"""

from __future__ import annotations

from typing import Any

from agentbench.trace.redaction.redactor import Redactor


class Learner:
    """Feeds a run's events to `redactor`, for what it learns (one per hook, as a recorder)."""

    __slots__ = ("redactor",)

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor

    def __call__(self, event: Any) -> None:
        kind = event.kind
        if kind == "tool_started":  # (a tool's finish repeats its arguments)
            self._keyed(event.arguments)
        elif kind == "context_changed":
            self._keyed({event.key: event.old})
            self._keyed({event.key: event.new})
        elif kind == "run_started":
            self._keyed(event.context)
            if isinstance(event.input, list):  # messages: a tool call's arguments among them
                self.redactor.json(event.input)
        elif kind == "tool_call_rejected":  # rare: its raw arguments are text, redacted whole
            self.redactor.text(event.raw_arguments)

    def _keyed(self, value: Any) -> None:
        """Learn the values under secret keys in `value` (a dictionary lookup a key)."""
        if isinstance(value, dict):
            for key, item in value.items():
                if self.redactor.is_secret_key(key if type(key) is str else str(key)):
                    self.redactor.keyed("secret", item)
                elif isinstance(item, dict | list):
                    self._keyed(item)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, dict | list):
                    self._keyed(item)
