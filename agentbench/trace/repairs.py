"""Values the store could not hold as they were: repaired, and noted on their run's step.

`_json` makes every value it encodes storable — a lone surrogate (half of a UTF-16 pair: an
emoji a tool or model cut in two) becomes U+FFFD, an integer beyond 64 bits its digits — and
counts each change. The recorder reads the count around each event, and a change becomes a
note here: an `events` row of kind `text_repaired` at that event's seq, saying what held
the text and how many values changed, which `traces show` prints beside the step. Text
columns that are not JSON (a tool's error message, a model or tool name a server sent) are
made well-formed when their rows leave the recorder, and noted the same way. A run is
stored with its text repaired, never lost for it.
"""

from __future__ import annotations

import typing
from datetime import datetime
from typing import Any

from agentbench.trace import _json
from agentbench.trace.schema import RECORDS, TraceRecord

KIND = "text_repaired"

_WHAT = {
    "run_started": "the run's input",
    "model_request": "the model request",
    "model_response": "the model's answer",
    "text_delta": "the streamed text",
    "tool_started": "the arguments of tool {tool}",
    "tool_finished": "the result of tool {tool}",
    "tool_call_rejected": "the rejected call of tool {tool}",
    "context_changed": "context variable {key}",
    "run_finished": "the run's output",
}


def _text_columns(record: type[TraceRecord]) -> tuple[str, ...]:
    """A table's columns of plain text (not JSON: `_json` writes those well-formed)."""
    hints = typing.get_type_hints(record, include_extras=True)
    json_columns = set(record.json_columns())
    return tuple(
        name
        for name in record.model_fields
        if name not in json_columns and str in (*typing.get_args(hints[name]), hints[name])
    )


TEXT_COLUMNS: dict[str, tuple[str, ...]] = {
    table: _text_columns(record) for table, record in RECORDS.items()
}


def what_of(event: Any) -> str:
    """The part of a run an event's values are, in words (`the result of tool lookup`)."""
    template = _WHAT.get(event.kind, event.kind.replace("_", " "))
    return template.format(tool=getattr(event, "tool", "?"), key=getattr(event, "key", "?"))


def note(
    run_id: str,
    event: Any,
    made: _json.Repairs,
    what: str | None = None,
) -> dict[str, Any]:
    """The `events` row that flags `made` repairs of `event`'s values on its step."""
    # What was repaired, not how often: a value is encoded more than once (a request for its
    # diff and its hash), so counts would overstate it.
    payload: dict[str, Any] = {"what": what or what_of(event)}
    if made.surrogates:
        payload["lone_surrogates"] = True
    if made.big_integers:
        payload["big_integers"] = True
    return {
        "run_id": run_id,
        "seq": event.seq,
        "step": getattr(event, "step", None),
        "ts": event.ts,
        "kind": KIND,
        "payload": _json.dumps(payload),
    }


def well_formed_rows(table: str, rows: list[dict[str, Any]]) -> list[tuple[dict[str, Any], str]]:
    """Make the plain text columns of `rows` well-formed in place; the rows changed, each with
    the column (`tool_calls.error`) that was."""
    columns = TEXT_COLUMNS[table]
    changed: list[tuple[dict[str, Any], str]] = []
    for row in rows:
        for column in columns:
            text = row.get(column)
            if type(text) is str and not text.isascii():
                fixed = _json.well_formed(text, counted=False)
                if fixed is not text:
                    row[column] = fixed
                    changed.append((row, f"{table}.{column}"))
    return changed


def column_note(row: dict[str, Any], column: str, ts: datetime) -> dict[str, Any]:
    """The note for a plain text column made well-formed (see `well_formed_rows`)."""
    return {
        "run_id": row["run_id"],
        "seq": row.get("seq") or 0,
        "step": row.get("step"),
        "ts": row.get("ts") or ts,
        "kind": KIND,
        "payload": _json.dumps({"what": column, "lone_surrogates": True}),
    }


def describe(payload: dict[str, Any]) -> str:
    """A note in one line, for `traces show`."""
    changes = []
    if payload.get("lone_surrogates"):
        changes.append(
            "text held lone surrogates (half of a UTF-16 pair, like an emoji cut in two), "
            "stored with U+FFFD in their place"
        )
    if payload.get("big_integers"):
        changes.append("integers beyond 64 bits, stored as their digits (text)")
    return f"{payload.get('what', '?')}: {'; '.join(changes) or 'repaired'}"
