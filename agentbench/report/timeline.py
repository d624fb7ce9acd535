"""One trial's detail as plain data: input, expectations, output and the timeline of its runs.

This is what the page embeds as JSON and turns into DOM only when the case is expanded. Each
run's timeline lists its recorded rows in `seq` order — model calls with the request as stored
(messages added, edited and kept — each with its role, text, tool calls and call ids, which the
page turns into the transcript — parameters set, and the tool schemas as a table of
parameters), tool calls, context changes, memory decisions, handoffs, guards and coalesced
text — and ends with the stop reason. Long texts are
cut with a visible marker so one huge tool result cannot make the whole report heavy.
"""

from __future__ import annotations

from typing import Any

from agentbench.evals.comparing.compare_text import describe_divergence, drift_text
from agentbench.evals.comparing.stats import TrialOutcome
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
            "agent": row.agent,
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
            "agent": row.agent,
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
        "agent": call.agent,  # set when not the run's (a handoff inside a boundary run)
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
            {"id": c.get("id"), "name": str(c.get("name")), "arguments": clip(c.get("arguments"))}
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
    settings = dict(diff.get("set") or {})
    tools = settings.pop("tools", None)
    changes: dict[str, Any] = {
        "kept": kept,
        "added": added,
        "edited": edited,
        "set": {key: clip(value, 1_000) for key, value in settings.items()},
        "unset": [str(key) for key in diff.get("unset") or ()],
    }
    if tools is not None:
        table = tool_table(tools)
        if table is None:  # not the shape tools have: shown as it is
            changes["set"]["tools"] = clip(tools, 1_000)
        else:
            changes["tools"] = table
    return changes


def _message(message: Any) -> dict[str, Any]:
    """A request message as the page shows it: role and text; an assistant's tool calls by
    id, name and arguments; a tool message's call id (the page names its tool from it)."""
    if not isinstance(message, dict):
        return {"role": "?", "content": clip(message)}
    calls = []
    for call in message.get("tool_calls") or ():
        if isinstance(call, dict):
            function = call.get("function") if isinstance(call.get("function"), dict) else call
            calls.append(
                {
                    "id": call.get("id"),
                    "name": str(function.get("name", "?")),
                    "arguments": clip(function.get("arguments")),
                }
            )
    shown: dict[str, Any] = {
        "role": str(message.get("role", "?")),
        "content": clip(_text(message.get("content"))),
        "tool_calls": calls,
    }
    if message.get("tool_call_id") is not None:
        shown["tool_call_id"] = str(message["tool_call_id"])
    if message.get("name") is not None:
        shown["name"] = str(message["name"])
    return shown


def _text(content: Any) -> Any:
    """A message's content: its text parts joined when it is a list of parts."""
    if isinstance(content, list) and all(isinstance(p, dict) for p in content):
        texts = [p.get("text") for p in content if isinstance(p.get("text"), str)]
        if len(texts) == len(content):
            return "\n".join(texts)
    return content


def tool_table(tools: Any) -> list[dict[str, Any]] | None:
    """The request's tool schemas as rows a table shows — each tool's name, description and
    parameters (name, type, required, description) — or None when `tools` is not a list of
    function tools."""
    if not isinstance(tools, list):
        return None
    table = []
    for tool in tools:
        if not isinstance(tool, dict):
            return None
        function = tool.get("function") if isinstance(tool.get("function"), dict) else tool
        if "name" not in function:
            return None
        schema = function.get("parameters") if isinstance(function.get("parameters"), dict) else {}
        required = set(schema.get("required") or ())
        properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        table.append(
            {
                "name": str(function["name"]),
                "description": clip(function.get("description"), 1_000),
                "params": [
                    {
                        "name": str(name),
                        "type": schema_type(prop, schema.get("$defs") or {}),
                        "required": name in required,
                        "description": clip(prop.get("description"), 500)
                        if isinstance(prop, dict)
                        else None,
                        "default": clip(prop["default"], 200)
                        if isinstance(prop, dict) and "default" in prop
                        else None,
                    }
                    for name, prop in properties.items()
                ],
            }
        )
    return table


def schema_type(prop: Any, defs: Any, depth: int = 0) -> str:
    """A JSON schema's type in a few words: `string`, `list[integer]`, `"a" | "b"`, `Order`."""
    if not isinstance(prop, dict) or depth > 4:
        return "any"
    if "enum" in prop and isinstance(prop["enum"], list):
        return " | ".join(dumps(v) for v in prop["enum"][:8]) + (
            " | …" if len(prop["enum"]) > 8 else ""
        )
    if "const" in prop:
        return dumps(prop["const"])
    if isinstance(prop.get("$ref"), str):
        name = prop["$ref"].rsplit("/", 1)[-1]
        target = defs.get(name) if isinstance(defs, dict) else None
        if isinstance(target, dict) and "enum" in target:
            return schema_type(target, defs, depth + 1)
        return name
    for key in ("anyOf", "oneOf"):
        if isinstance(prop.get(key), list):
            return " | ".join(schema_type(p, defs, depth + 1) for p in prop[key])
    kind = prop.get("type")
    if isinstance(kind, list):
        return " | ".join(str(k) for k in kind)
    if kind == "array":
        return f"list[{schema_type(prop.get('items'), defs, depth + 1)}]"
    if kind == "object" and isinstance(prop.get("properties"), dict):
        return "object{" + ", ".join(prop["properties"]) + "}"
    return str(kind) if kind else "any"
