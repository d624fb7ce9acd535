"""Masking a run's rows again with the secrets learned while it ran.

A value is known to be a secret only once redaction meets it somewhere that says so — a tool
argument named `password`, a `Bearer` header, a configured pattern — and by then the same
value may be recorded elsewhere already: in the run's input (recorded first), in the model
request that carried it to the model, in a tool result. The run's redactor remembers what it
masked (`Redactor.learned`) and masks it wherever it meets it from then on; when the run ends,
the rows built before are masked again here, through that redactor: JSON columns in their
strings (numbers, quotes and escape sequences untouched, the rest byte for byte), and the
run's requests encoded again from the first one that holds a secret, since a request's diff
and hash depend on the requests before it.

Where a run's rows are when it ends decides where this happens:

* held whole by its recorder (the usual case): masked before they go to the journal, so
  neither the journal nor the store ever holds a learned secret;
* a long run's parts went to the journal as it ran (`recorder.SPILL_ROWS`). Its rules, with
  the secrets learned, travel with its last rows in memory only (`RunRows.remask`, never
  journaled), and the parts are masked as they are read back into the store (`remask_stored`,
  which reads them twice: once to follow the requests to the last rows, once to insert). The
  journal, deleted once the run is stored, holds each part as it was written until then; a
  process that dies first leaves them so.

A run's start marker (journaled when it starts, so a crash shows it) holds no input or
context for the same reason: they are recorded before anything in them is known to be secret.
The secrets are a run's recorder's: a conversation's later runs (handoffs) and a trial's later
turns start knowing what the earlier ones learned, but an earlier run already stored is not
masked again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from agentbench.trace import _json
from agentbench.trace.redaction.redactor import Redactor
from agentbench.trace.redaction.rules import RedactionRules
from agentbench.trace.request_diff import RequestChain, apply_diff, encode_request
from agentbench.trace.schema import RECORDS, RunRows

# Text columns that are not JSON but hold what a run said (an id or a name never does).
_FREE_TEXT = {"tool_calls": ("error",), "runs": ("not_replayable",)}
_COLUMNS = {
    name: (tuple(record.json_columns()), _FREE_TEXT.get(name, ()))
    for name, record in RECORDS.items()
    if name != "llm_calls"
}


@dataclass
class _Requests:
    """One run's requests of one purpose, as stored (`previous`) and as encoded again."""

    previous: dict[str, Any] | None = None
    chain: RequestChain | None = None
    started: bool = False


@dataclass
class Remasker:
    """Masks rows with `masker` (a redactor that knows the secrets), following each run's
    requests from row to row; rows must come in the order they were made."""

    masker: Redactor
    secrets: Iterable[str]
    _spelled: tuple[str, ...] = field(init=False)
    _requests: dict[tuple[str, str], _Requests] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        # A row stored before the whole of a secret was known may hold what a key-value rule
        # left of it after a mask (`my password: [REDACTED] horse battery staple`) too.
        self._spelled = self.masker.spelled(self.secrets)

    @classmethod
    def of(cls, redactor: Redactor) -> Remasker:
        """What `redactor` (a run's) learned, masked with it."""
        return cls(redactor, frozenset(redactor.learned))

    @classmethod
    def for_rules(cls, rules: RedactionRules) -> Remasker:
        """Masking with `rules` (`Redactor.portable_rules` of a run's redactor)."""
        return cls(Redactor(rules, environ={}), rules.secret_values)

    def holds(self, text: str) -> bool:
        return any(form in text for form in self._spelled)

    def rows(self, rows: RunRows, runs: Callable[[str], bool] = lambda run_id: True) -> RunRows:
        """`rows` masked in place (those of the runs `runs` says yes to); returns them."""
        if not self._spelled:
            return rows
        for name, (json_columns, text_columns) in _COLUMNS.items():
            for row in rows.table(name):
                if runs(row["run_id"]):
                    self._row(row, json_columns, text_columns)
        for row in rows.llm_calls:
            if runs(row["run_id"]):
                self._llm_call(row)
        return rows

    def _row(
        self, row: dict[str, Any], json_columns: tuple[str, ...], texts: tuple[str, ...]
    ) -> None:
        for column in json_columns:
            value = row.get(column)
            if type(value) is str and self.holds(value):
                row[column] = self.masker.json_text(value)
        for column in texts:
            value = row.get(column)
            if type(value) is str and self.holds(value):
                row[column] = self.masker.text(value)

    def _llm_call(self, row: dict[str, Any]) -> None:
        response = row.get("response")
        if type(response) is str and self.holds(response):
            row["response"] = self.masker.json_text(response)
        state = self._requests.setdefault((row["run_id"], row.get("purpose", "agent")), _Requests())
        request = apply_diff(state.previous, _json.loads(row["request_diff"]))
        if not state.started:
            if not self.holds(_json.dumps(request)):
                state.previous = request
                return
            # The requests before this one hold no secret: they stay as stored, and this
            # one's diff is made against the one before, as stored.
            state.started = True
            if state.previous is not None:
                _, state.chain = encode_request(None, state.previous, self.masker)
        encoded, state.chain = encode_request(state.chain, request, self.masker)
        row.update(
            request_diff=_json.dumps(encoded.diff),
            request_hash=encoded.hash,
            messages=encoded.messages,
            messages_added=encoded.added,
            messages_dropped=encoded.dropped,
        )
        state.previous = request


def remask_stored(rows: RunRows) -> None:
    """Before a batch is stored: the runs that carry rules to mask them again with (long runs
    that learned a secret after a part of them went to the journal, see the module's
    docstring) have their last rows masked now and each part masked as it is read back."""
    if not rows.remask:
        return
    plans = dict(rows.remask)
    ahead = _ByRun(plans)
    for load in rows.parts:  # follow each run's requests through its parts to its last rows
        ahead.rows(load())
    ahead.rows(rows)
    again = _ByRun(plans)
    rows.parts = [_masked_part(load, again) for load in rows.parts]
    rows.remask = {}


@dataclass
class _ByRun:
    """A `Remasker` per run of a batch that has rules to mask it with."""

    plans: dict[str, RedactionRules]
    _maskers: dict[str, Remasker] = field(default_factory=dict)

    def rows(self, rows: RunRows) -> RunRows:
        for run_id in {row["run_id"] for name in RECORDS for row in rows.table(name)}:
            rules = self.plans.get(run_id)
            if rules is None:
                continue
            masker = self._maskers.get(run_id)
            if masker is None:
                masker = self._maskers[run_id] = Remasker.for_rules(rules)
            masker.rows(rows, runs=lambda other, run_id=run_id: other == run_id)  # type: ignore[misc]
        return rows


def _masked_part(load: Callable[[], RunRows], masker: _ByRun) -> Callable[[], RunRows]:
    return lambda: masker.rows(load())
