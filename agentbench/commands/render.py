"""Text rendering for the `traces` commands: aligned tables and a run's timeline.

Plain text only (no colours), so output pastes cleanly into issues and CI logs; every long
value is cut with a visible `…`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from agentbench.runtime.fallback import fallback_of
from agentbench.trace import repairs
from agentbench.trace._json import dumps, loads
from agentbench.trace.schema import (
    ContextDiffRecord,
    EventRecord,
    LlmCallRecord,
    RunRecord,
    RunTrace,
    ToolCallRecord,
)

CELL_CHARS = 48


def clip(text: str, limit: int = CELL_CHARS) -> str:
    text = " ".join(text.split())  # one line: newlines and runs of spaces become one space
    return text if len(text) <= limit else text[: limit - 1] + "…"


def cell(value: Any, limit: int = CELL_CHARS) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, float):
        return f"{value:.1f}" if abs(value) < 1e6 else f"{value:.4g}"
    if isinstance(value, dict | list):
        return clip(dumps(value), limit)
    return clip(str(value), limit)


def table(columns: Sequence[str], rows: Sequence[Sequence[Any]], limit: int = CELL_CHARS) -> str:
    """An aligned text table, a header line and one line per row."""
    cells = [[cell(v, limit) for v in row] for row in rows]
    widths = [len(c) for c in columns]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()]
    lines += [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    ]
    return "\n".join(lines)


def text_of(json_text: str | None, limit: int = 120) -> str:
    """A JSON column shown as text: strings without quotes, anything else as compact JSON."""
    if json_text is None:
        return "—"
    value = loads(json_text)
    return clip(value if isinstance(value, str) else dumps(value), limit)


def _tokens(run: RunRecord) -> int | str | None:
    """A run's tokens; marked ≈ when some were estimated (the server reported no usage)."""
    if run.input_tokens is None:
        return None
    total = (run.input_tokens or 0) + (run.output_tokens or 0)
    return f"≈{total}" if run.usage_estimated else total


def runs_table(runs: Sequence[RunRecord]) -> str:
    columns = ["RUN_ID", "STARTED (UTC)", "AGENT", "STATUS", "STOP", "LLM", "TOOLS", "TOKENS"]
    columns += ["MS", "INPUT"]
    rows = [
        [
            r.run_id,
            r.started_at,
            r.agent,
            r.status,
            r.stop_reason,
            r.llm_calls,
            r.tool_calls,
            _tokens(r),
            None if r.duration_ms is None else round(r.duration_ms),
            text_of(r.input, 40),
        ]
        for r in runs
    ]
    return table(columns, rows)


def timeline(trace: RunTrace) -> str:
    """The run as a readable timeline: header, one line per recorded step, outcome."""
    run = trace.run
    lines = [
        f"run {run.run_id}  agent {run.agent}  {run.status}"
        + (f" (stop: {run.stop_reason})" if run.stop_reason else ""),
        f"  started  {cell(run.started_at)} UTC"
        + (f" · {run.duration_ms:.0f} ms" if run.duration_ms is not None else "")
        + f" · model {run.model or '?'} · code {run.code_version or 'unknown'}",
    ]
    if run.parent_run_id:
        lines.append(f"  parent   {run.parent_run_id}")
    if run.eval_id or run.case_id:
        lines.append(f"  eval     {run.eval_id or '—'} case {run.case_id or '—'} trial {run.trial}")
    if run.origin:
        lines.append(f"  imported {_origin_text(run.origin)}")
        if run.not_replayable:
            lines.append(f"  cannot be replayed: {run.not_replayable}")
    elif run.request_id or run.conversation_id:
        lines.append(
            f"  served   request {run.request_id or '—'} conversation "
            f"{run.conversation_id or '—'} by {run.agent_ref or '?'}"
            + (f" for caller {run.caller}" if run.caller else "")
        )
    repaired = [e.seq for e in trace.events if e.kind == repairs.KIND]
    if repaired:
        lines.append(
            "  repaired text the store could not hold as it was (U+FFFD for half an emoji) at "
            f"seq {', '.join(map(str, sorted(set(repaired))))}: see 'repaired' below"
        )
    lines.append(f"  input    {text_of(run.input)}")
    context = loads(run.context) if run.context else None
    if isinstance(context, dict) and any(context.values()):  # scopes that hold something
        lines.append(f"  context  {text_of(run.context)}")
    lines += ["", "   seq step  what"]
    for item in trace.timeline():
        lines.append(
            f"  {item.seq:>4} {'' if item.step is None else item.step:>4}  "
            # A boundary target's framework may hand off inside one run: whose step it is.
            + (f"[{item.agent}] " if getattr(item, "agent", None) else "")
            + _describe(item)
        )
    lines.append("")
    if run.status == "incomplete":
        lines.append("  the process recording this run stopped before it finished (incomplete)")
    else:
        lines.append(f"  output   {text_of(run.output)}")
        if run.error:
            lines.append(f"  error    {text_of(run.error)}")
        lines.append(
            f"  stop     {run.stop_reason} · {_count(run.llm_calls, 'llm call')} · "
            f"{_count(run.tool_calls, 'tool call')} · "
            f"tokens {run.input_tokens} in / {run.output_tokens} out"
            + (" (≈: estimated, the server reported none)" if run.usage_estimated else "")
        )
    for child in trace.children:
        lines.append(f"  child    {child.run_id}  agent {child.agent}  {child.status}")
    return "\n".join(lines)


def _count(number: int | None, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _describe(item: Any) -> str:
    describe: Callable[[Any], str] = _DESCRIBERS.get(type(item), lambda i: repr(i))
    return describe(item)


def _llm(call: LlmCallRecord) -> str:
    response = loads(call.response) if call.response else None
    if response is None:
        outcome = "no response"
    elif response.get("tool_calls"):
        outcome = "→ " + ", ".join(c["name"] for c in response["tool_calls"])
    else:
        outcome = "→ " + clip(str(response.get("text") or ""), 60)
    purpose = "" if call.purpose == "agent" else f" [{call.purpose}]"
    changes = f"+{call.messages_added}"
    if call.messages_dropped:
        changes += f" -{call.messages_dropped}"
    latency = "" if call.latency_ms is None else f" {call.latency_ms:.0f} ms"
    return (
        f"llm{purpose}  {call.model or '?'}  {call.input_tokens}→{call.output_tokens} tok"
        f"{latency}  {call.messages} msgs ({changes})  {call.finish_reason or ''} {outcome}"
        + _fallback(response)
    )


def _fallback(response: dict[str, Any] | None) -> str:
    """`  (fell back: primary HTTP 503 → backup)` for a call a `FallbackModel` passed on."""
    found = fallback_of(response)
    if not found or not found.get("failed"):
        return ""
    failed = [
        f"{f.get('model')} "
        + (f"HTTP {f['status_code']}" if f.get("status_code") else str(f.get("error")))
        for f in found["failed"]
    ]
    return f"  (fell back: {', '.join(failed)} → {found.get('answered_by')})"


def _tool(call: ToolCallRecord) -> str:
    kind = call.result_kind or "unfinished"
    shown = call.error if call.error else text_of(call.result, 60) if call.result else ""
    duration = "" if call.duration_ms is None else f" {call.duration_ms:.0f} ms"
    return f"tool  {call.tool}({text_of(call.arguments, 60)}) → {kind}{duration}  {clip(shown, 60)}"


def _context(diff: ContextDiffRecord) -> str:
    if diff.op == "add":
        change = f"= {text_of(diff.new, 50)}"
    elif diff.op == "remove":
        change = f"removed (was {text_of(diff.old, 50)})"
    else:
        change = f"{text_of(diff.old, 40)} → {text_of(diff.new, 40)}"
    return f"context  {diff.scope}.{diff.key} {diff.op}: {change}"


def _event(event: EventRecord) -> str:
    p = loads(event.payload) or {}
    if event.kind == "memory_decision":
        return (
            f"memory  {p.get('action')} {p.get('messages')} messages "
            f"({p.get('tokens_before')}→{p.get('tokens_after')} tokens): {p.get('reason')}"
        )
    if event.kind == "handoff":
        child = f"  child {p['child_run_id']}" if p.get("child_run_id") else ""
        return (
            f"handoff  {p.get('from_agent')} → {p.get('to_agent')} ({p.get('mode')})"
            f"{': ' + p['reason'] if p.get('reason') else ''}{child}"
        )
    if event.kind == "guard_triggered":
        return f"guard  {p.get('guard')} {p.get('action')}: {clip(str(p.get('message')), 80)}"
    if event.kind == "text_delta":
        return f"text  {clip(str(p.get('text')), 80)!r} ({p.get('deltas')} deltas)"
    if event.kind == repairs.KIND:
        return f"repaired  {repairs.describe(p)}"
    return f"{event.kind}  {clip(dumps(p), 90)}"


_DESCRIBERS: dict[type, Callable[[Any], str]] = {
    LlmCallRecord: _llm,
    ToolCallRecord: _tool,
    ContextDiffRecord: _context,
    EventRecord: _event,
}


def _origin_text(origin: str) -> str:
    """Where an imported run came from, in one line (its stored origin is JSON)."""
    found = loads(origin)
    if not isinstance(found, dict):
        return str(origin)
    text = f"from {found.get('file', '?')} · trace {found.get('trace_id', '?')}"
    text += f" · {found.get('instrumentation', '?')}"
    if found.get("content"):
        text += f" ({', '.join(found['content'])})"
    if found.get("joined_traces"):
        text += f" · {len(found['joined_traces']) + 1} traces joined by conversation"
    return text
