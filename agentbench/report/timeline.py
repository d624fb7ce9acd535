"""One trial's detail as plain data: input, expectations, output and the timeline of its runs.

This is what the page embeds as JSON and turns into DOM only when the case is expanded. Each
run's timeline lists its recorded rows in `seq` order — model calls with the request as stored
(messages added, edited and kept, parameters set), tool calls, context changes, memory
decisions, handoffs, guards and coalesced text — and ends with the stop reason. Long texts are
cut with a visible marker so one huge tool result cannot make the whole report heavy.
"""

from __future__ import annotations

from typing import Any

from agentbench.evals.compare_text import describe_divergence, drift_text
from agentbench.evals.stats import TrialOutcome
from agentbench.trace._json import dumps, loads
from agentbench.trace.schema import (
    ContextDiffRecord,
    EventRecord,
    LlmCallRecord,
    RunTrace,
    ToolCallRecord,
)

MAX_TEXT = 4_000  # characters of one shown value


def clip(value: Any, limit: int = MAX_TEXT) -> str | None:
    """A value as display text (strings as they are, data as JSON), cut past `limit`."""
    if value is None:
        return None
    text = value if isinstance(value, str) else dumps(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}…[cut: {len(text) - limit:,} of {len(text):,} chars not shown]"


def _json(text: str | None) -> Any:
    return loads(text) if text else None


def trial_detail(outcome: TrialOutcome, runs: list[RunTrace]) -> dict[str, Any]:
    """Everything the expanded row of one case × trial shows."""
    roots = [t.run for t in runs if not t.run.parent_run_id] or [t.run for t in runs]
    last = runs[-1].run if runs else None
    return {
        "input": clip(_json(roots[0].input)) if roots else None,
        "output": clip(_json(last.output)) if last else None,
        "error": outcome.error,
        "scores": [
            {
                "name": str(s.get("name")),
                "value": s.get("value"),
                "passed": bool(s.get("passed")),
                "reason": clip(s.get("reason")),
            }
            for s in outcome.scores
        ],
        "runs": [_run(trace) for trace in runs],
        "replay": _replay(outcome),
    }


def _replay(outcome: TrialOutcome) -> dict[str, Any] | None:
    """What replaying the recording showed: the drift from its root cause, and whether it
    failed the trial (it is only reported under --allow-drift)."""
    text = drift_text(outcome, 120)
    if text is None:
        if not outcome.divergences:
            return None
        text = describe_divergence(outcome.divergences[0], 120)
    if outcome.continued_live:  # the drift is not counted because the rest is real answers
        text += f"; {outcome.divergence_verdict()}"
    return {"text": clip(text), "counted": outcome.drift_failed or not outcome.drifts}


def _run(trace: RunTrace) -> dict[str, Any]:
    run = trace.run
    items = [_item(row) for row in trace.timeline()]
    return {
        "run_id": run.run_id,
        "parent": run.parent_run_id,
        "agent": run.agent,
        "model": run.model,
        "status": run.status,
        "stop_reason": run.stop_reason,
        "error": clip(_json(run.error)),
        "duration_ms": run.duration_ms,
        "tokens": (run.input_tokens or 0) + (run.output_tokens or 0),
        "items": [item for item in items if item is not None],
    }


def _item(row: Any) -> dict[str, Any] | None:
    if isinstance(row, LlmCallRecord):
        return _llm(row)
    if isinstance(row, ToolCallRecord):
        return {
            "kind": "tool",
            "seq": row.seq,
            "step": row.step,
            "tool": row.tool,
            "arguments": clip(_json(row.arguments)),
            "result_kind": row.result_kind or "unfinished",
            "result": clip(_json(row.result)),
            "error": clip(row.error),
            "effect": row.effect,
            "duration_ms": row.duration_ms,
        }
    if isinstance(row, ContextDiffRecord):
        return {
            "kind": "context",
            "seq": row.seq,
            "step": row.step,
            "scope": row.scope,
            "key": row.key,
            "op": row.op,
            "old": clip(_json(row.old)),
            "new": clip(_json(row.new)),
        }
    if isinstance(row, EventRecord):
        payload = _json(row.payload)
        return {
            "kind": row.kind,
            "seq": row.seq,
            "step": row.step,
            "payload": {k: clip(v) for k, v in payload.items()}
            if isinstance(payload, dict)
            else {"value": clip(payload)},
        }
    return None


def _llm(call: LlmCallRecord) -> dict[str, Any]:
    response = _json(call.response) or {}
    return {
        "kind": "llm",
        "seq": call.seq,
        "step": call.step,
        "purpose": call.purpose,
        "model": call.model,
        "input_tokens": call.input_tokens,
        "output_tokens": call.output_tokens,
        "latency_ms": call.latency_ms,
        "finish_reason": call.finish_reason,
        "messages": call.messages,
        "added": call.messages_added,
        "dropped": call.messages_dropped,
        "request": request_changes(_json(call.request_diff) or {}),
        "text": clip(response.get("text")),
        "tool_calls": [
            {"name": str(c.get("name")), "arguments": clip(c.get("arguments"))}
            for c in response.get("tool_calls") or ()
            if isinstance(c, dict)
        ],
    }


def request_changes(diff: dict[str, Any]) -> dict[str, Any]:
    """The stored request diff in a reader's terms: kept ranges, new and edited messages."""
    kept, added, edited = [], [], []
    position = 0  # index of the next message in the rebuilt request
    for op in diff.get("messages") or ():
        if op[0] == "keep":
            kept.append([op[1], op[2]])
            position += op[2] - op[1]
        elif op[0] == "add":
            for message in op[1]:
                added.append({"index": position, **_message(message)})
                position += 1
        elif op[0] == "edit":
            edited.append(
                {"index": position, "prefix": op[2], "suffix": op[3], "text": clip(op[4])}
            )
            position += 1
    return {
        "kept": kept,
        "added": added,
        "edited": edited,
        "set": {key: clip(value, 1_000) for key, value in (diff.get("set") or {}).items()},
        "unset": [str(key) for key in diff.get("unset") or ()],
    }


def _message(message: Any) -> dict[str, Any]:
    if not isinstance(message, dict):
        return {"role": "?", "content": clip(message)}
    calls = message.get("tool_calls") or ()
    return {
        "role": str(message.get("role", "?")),
        "content": clip(message.get("content")),
        "tool_calls": [clip(c.get("function", c)) for c in calls if isinstance(c, dict)],
    }
