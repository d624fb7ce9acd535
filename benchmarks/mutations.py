"""The mutations `detection_power.py` applies: 79 behaviour changes and 10 equivalent rewrites.

Each is an exact substitution in one file of the repository. A behaviour-changing mutation
names the case(s) that must be flagged and, for each, the class and step (the model-call
iteration of the run it happens in; step 0 is the context a run starts with) its first
divergence must report: the root cause, not a downstream symptom. Some target paths that only
the newer golden suites (memory, mechanisms, the SQL row limit, the sandbox's long output)
exercise.
"""

from __future__ import annotations

from mutation_model import Expect, Mutation

RT = "agentbench/runtime"
EVALS = "agentbench/evals"
BUILTIN = "agentbench/runtime/builtin"

RUNTIME = [
    # -- loop brakes and repeat detection ------------------------------------------------
    Mutation(
        "max-iterations-default-6",
        f"{RT}/agent.py",
        "max_iterations: int = Field(8, ge=1)",
        "max_iterations: int = Field(6, ge=1)",
        "the default brake stops a runaway search two model calls early",
        (Expect("mechanisms/endless-search-default-brake", "missing_step", 7),),
    ),
    Mutation(
        "max-iterations-off-by-one",
        f"{RT}/loop.py",
        "if run.iteration >= limits.max_iterations:",
        "if run.iteration > limits.max_iterations:",
        "max_iterations allows one model call more: the brake due at its last step is missing",
        (
            Expect("brakes/runaway-reader-capped", "missing_step", 5),
            Expect("mechanisms/endless-search-default-brake", "missing_step", 8),
        ),
    ),
    Mutation(
        "repeat-warn-later",
        f"{RT}/agent.py",
        "repeat_warn_at: int = Field(2, ge=2)",
        "repeat_warn_at: int = Field(3, ge=2)",
        "the second identical call is no longer warned about",
        (Expect("brakes/repeated-call-stopped", "missing_step", 2),),
    ),
    Mutation(
        "repeat-stop-later",
        f"{RT}/agent.py",
        "repeat_stop_at: int = Field(3, ge=2)",
        "repeat_stop_at: int = Field(4, ge=2)",
        "the third identical call runs instead of stopping the loop",
        (Expect("brakes/repeated-call-stopped", "extra_step", 3),),
    ),
    Mutation(
        "repeat-stop-earlier",
        f"{RT}/agent.py",
        "repeat_stop_at: int = Field(3, ge=2)",
        "repeat_stop_at: int = Field(2, ge=2)",
        "the second identical call stops the loop, one model call early",
        (Expect("brakes/repeated-call-stopped", "missing_step", 2),),
    ),
    Mutation(
        "repeat-key-ignores-arguments",
        f"{RT}/tool_calls.py",
        "key = (tool.name, encoded.decode())",
        'key = (tool.name, "")',
        "calls to one tool with different arguments count as repeats",
        (
            Expect("brakes/runaway-reader-capped", "extra_step", 2),
            Expect("sre/compare-production", "extra_step", 1),
        ),
    ),
    Mutation(
        "repeat-warning-wording",
        f"{RT}/tool_calls.py",
        "Calling it again with the same arguments will stop the run;",
        "Another identical call ends the run;",
        "the repeat warning the model reads is worded differently",
        (Expect("brakes/repeated-call-stopped", "request_drift", 3),),
    ),
    # -- arguments parsing -----------------------------------------------------------------
    Mutation(
        "prose-wrapped-args-rejected",
        f"{RT}/arguments.py",
        "        value = _first_object(text)\n",
        "        value = None\n",
        "JSON after a prose preamble is no longer extracted; the call is rejected",
        (Expect("mechanisms/prose-wrapped-arguments", "tool_args_changed", 1),),
    ),
    # -- tool results: truncation and the three states ---------------------------------------
    Mutation(
        "truncation-limit-3000",
        f"{RT}/tools.py",
        "DEFAULT_MAX_RESULT_CHARS = 2_000",
        "DEFAULT_MAX_RESULT_CHARS = 3_000",
        "tool results are cut at 3,000 characters instead of 2,000",
        (Expect("mechanisms/oversized-log-truncated", "tool_result_changed", 1),),
    ),
    Mutation(
        "truncation-marker-wording",
        f"{RT}/tools.py",
        'return f"{text[:limit]}\\n…[truncated {cut:,} of {len(text):,} chars]", True',
        'return f"{text[:limit]}\\n…[{cut:,} of {len(text):,} chars not shown]", True',
        "the truncation marker the model reads is worded differently",
        (Expect("mechanisms/oversized-log-truncated", "tool_result_changed", 1),),
    ),
    Mutation(
        "truncation-keeps-tail",
        f"{RT}/tools.py",
        'return f"{text[:limit]}\\n…[truncated',
        'return f"{text[-limit:]}\\n…[truncated',
        "a cut result keeps its end instead of its start",
        (Expect("mechanisms/oversized-log-truncated", "tool_result_changed", 1),),
    ),
    Mutation(
        "business-failure-hint-wording",
        f"{RT}/tools.py",
        '"(The tool worked; this is its answer. Retrying the same call will not change it.)"',
        '"(The tool worked; this is its answer.)"',
        "a business failure's observation loses the do-not-retry hint",
        (Expect("sre/status-unknown-cluster", "request_drift", 2),),
    ),
    Mutation(
        "system-error-prefix",
        f"{RT}/tools.py",
        'return f"[system_error] {self.error}"',
        'return f"[error] {self.error}"',
        "a system error is shown to the model with another prefix",
        (Expect("brakes/tool-timeout", "request_drift", 2),),
    ),
    Mutation(
        "timeout-message-wording",
        f"{RT}/tools.py",
        'f"tool {self.name!r} timed out after {self.timeout_s:g} s"',
        'f"tool {self.name!r} gave no answer within {self.timeout_s:g} s"',
        "a tool timeout is reported in other words",
        (Expect("brakes/tool-timeout", "tool_result_changed", 1),),
    ),
    Mutation(
        "business-failure-as-system-error",
        f"{RT}/tools.py",
        "result = ToolResult.business_failure(exc.message, exc.data, stop=exc.stop)",
        "result = ToolResult.system_error(exc.message)",
        "a tool's business failure is classified as a system error (and never stops the run)",
        (
            Expect("sre/status-unknown-cluster", "tool_result_changed", 1),
            Expect("brakes/business-stop", "tool_result_changed", 1),
        ),
    ),
    Mutation(
        "business-stop-completes",
        f"{RT}/tool_calls.py",
        "run.finish(StopReason.BUSINESS_STOP, output=result.error)",
        "run.finish(StopReason.COMPLETED, output=result.error)",
        "a business failure that stops the run ends it as completed",
        (Expect("brakes/business-stop", "stop_reason_changed", 1),),
    ),
    Mutation(
        "parallel-results-reversed",
        f"{RT}/tool_calls.py",
        "        for p in ready:\n            yield _finished(run, p, results[p.call.id], step)\n"
        "        for event in run.context_events():",
        "        for p in reversed(ready):\n"
        "            yield _finished(run, p, results[p.call.id], step)\n"
        "        for event in run.context_events():",
        "parallel read-only calls are reported finished in reverse order",
        (
            Expect("sre/compare-production", "tool_args_changed", 1),
            Expect("sre/critical-alerts", "tool_args_changed", 1),
        ),
    ),
    # -- memory -----------------------------------------------------------------------------
    Mutation(
        "memory-summary-arrow",
        f"{RT}/memory.py",
        "lines.append(f\"{fn['name']}({fn['arguments']}) → {kind}: {_head(result, width)}\")",
        "lines.append(f\"{fn['name']}({fn['arguments']}) -> {kind}: {_head(result, width)}\")",
        "the rule summary of a tool exchange is written differently",
        (Expect("memory/lookups-summarized", "memory_changed", 5),),
    ),
    Mutation(
        "memory-drops-newest",
        f"{RT}/memory.py",
        "        drop: set[int] = set()\n        for index in movable:",
        "        drop: set[int] = set()\n        for index in reversed(movable):",
        "over the limit, the newest movable turns are dropped instead of the oldest",
        (Expect("memory/pinned-fact-outlives-dropped-turns", "memory_changed", 1),),
    ),
    Mutation(
        "memory-rejected-call-not-noise",
        f"{RT}/memory.py",
        'FAILED_KINDS = frozenset({"system_error", "rejected"})',
        'FAILED_KINDS = frozenset({"system_error"})',
        "a call rejected for its arguments is no longer a failed attempt a later success"
        " supersedes: it is summarized (a memory step the recording lacks) instead of dropped",
        (Expect("memory/noise-dropped-facts-kept", "extra_step", 5),),
    ),
    Mutation(
        "memory-failed-attempt-note",
        f"{RT}/memory.py",
        'f"{line} (failed attempt, later retried)" for line in self._lines(unit)',
        'f"{line} (failed attempt)" for line in self._lines(unit)',
        "the summary line kept for a dropped failed attempt is worded differently",
        (Expect("memory/noise-dropped-facts-kept", "request_drift", 5),),
    ),
    Mutation(
        "memory-keep-recent-default-3",
        f"{RT}/memory.py",
        "keep_recent: int = 4  # units",
        "keep_recent: int = 3  # units",
        "the default policy keeps three recent units whole instead of four",
        (Expect("memory_defaults/lookups-past-the-token-budget", "memory_changed", 7),),
    ),
    Mutation(
        "memory-result-chars-default-2500",
        f"{RT}/memory.py",
        "tool_result_chars: int = 2_000",
        "tool_result_chars: int = 2_500",
        "the default policy cuts tool results at 2,500 characters instead of 2,000",
        (Expect("memory_defaults/guide-cut-at-default-limit", "memory_changed", 2),),
    ),
    Mutation(
        "memory-summary-lines-shorter",
        f"{RT}/memory.py",
        "summary_line_tokens: int = 40",
        "summary_line_tokens: int = 8",
        "rule summaries keep a much shorter head of each result",
        (Expect("memory/lookups-summarized", "memory_changed", 5),),
    ),
    # -- context scopes and handoffs ---------------------------------------------------------
    Mutation(
        "request-scope-crosses-handoff",
        f"{RT}/runner.py",
        "request={},  # the request scope never crosses a handoff",
        "request=snapshot.request,",
        "request-scope variables are handed to the next agent (an extra start-context step of"
        " the receiving run, as replay/trajectory.py names it)",
        (Expect("mechanisms/request-scope-stays-behind", "extra_step", 0),),
    ),
    Mutation(
        "handoff-ignores-reads",
        f"{RT}/runner.py",
        "                if visible_to(key, target.name, target.reads)\n",
        "",
        "the next agent receives every session variable, not only those it may read",
        (Expect("customer_service/refund-large-gold", "context_changed", 0),),
    ),
    Mutation(
        "handoff-tool-answer",
        f"{RT}/handoffs.py",
        'return f"Transferring the conversation to {target.name}."',
        'return f"Handing the conversation to {target.name}."',
        "a transfer_to_ tool answers in other words",
        (Expect("customer_service/refund-eligible", "tool_result_changed", 1),),
    ),
    Mutation(
        "dispatch-answer",
        f"{RT}/orchestration.py",
        'return f"Dispatched to {agent_id}."',
        'return f"Routed to {agent_id}."',
        "a router's dispatch tool answers in other words",
        (Expect("customer_service/order-status", "tool_result_changed", 1),),
    ),
    Mutation(
        "handoff-tool-description",
        f"{RT}/handoffs.py",
        '"here with your summary; you stop."',
        '"here with your summary."',
        "the transfer_to_ tool is described differently to the model",
        (Expect("customer_service/refund-eligible", "request_drift", 1),),
    ),
    # -- the instructions' state so far -----------------------------------------------------
    Mutation(
        "state-line-shorter",
        f"{RT}/run_state.py",
        "_STATE_LINE_CHARS = 240",
        "_STATE_LINE_CHARS = 120",
        "each 'state so far' line keeps half as much of the result",
        # Only golden/memory shows the state (state_summary=True); the bulletin's line is long.
        (Expect("memory/noise-dropped-facts-kept", "request_drift", 2),),
    ),
    Mutation(
        "state-heading",
        f"{RT}/instructions.py",
        'STATE_HEADING = "## State so far"',
        'STATE_HEADING = "## Results so far"',
        "the instructions' state section has another heading",
        (Expect("memory/lookups-summarized", "request_drift", 2),),
    ),
    Mutation(
        "pinned-heading",
        f"{RT}/instructions.py",
        'PINNED_HEADING = "## Pinned facts"',
        'PINNED_HEADING = "## Facts to keep"',
        "the instructions' pinned-facts section has another heading",
        (Expect("memory/pinned-fact-outlives-dropped-turns", "request_drift", 2),),
    ),
]

MCP = [
    Mutation(
        "mcp-is-error-as-ok",
        f"{RT}/mcp/tools.py",
        "    if result.is_error:\n",
        "    if result.is_error and structured is not None:\n",
        "an isError result without structured content is taken for the tool's answer",
        (Expect("mcp_live/reservation-refused", "tool_result_changed", 1),),
    ),
    Mutation(
        "mcp-text-beside-structured-lost",
        f"{RT}/mcp/tools.py",
        'return {"structured": structured, "text": text}',
        "return structured",
        "text that says more than the structured content is no longer kept beside it",
        (Expect("mcp_live/history-text-beside-structured", "tool_result_changed", 1),),
    ),
]

BUILTIN_TOOLS = [
    Mutation(
        "sql-row-limit-off-by-one",
        f"{BUILTIN}/_sql_worker.py",
        "            if len(rows) == max_rows:",
        "            if len(rows) == max_rows - 1:",
        "the SQL tool returns one row fewer than its limit",
        (Expect("sql_analyst/pairs-over-row-limit", "tool_result_changed", 1),),
    ),
    Mutation(
        "sql-row-limit-note",
        f"{BUILTIN}/sql.py",
        'f"row limit of {max_rows:,} reached and more rows exist; "',
        'f"row limit of {max_rows:,} reached; "',
        "the note on a cut SQL answer no longer says more rows exist",
        (Expect("sql_analyst/pairs-over-row-limit", "tool_result_changed", 1),),
    ),
    Mutation(
        "sql-truncated-flag-dropped",
        f"{BUILTIN}/sql.py",
        '        if result.truncated == "rows":\n            data["truncated"] = True\n',
        '        if result.truncated == "rows":\n',
        "a SQL answer cut at the row limit is no longer flagged truncated",
        (Expect("sql_analyst/pairs-over-row-limit", "tool_result_changed", 1),),
    ),
    Mutation(
        "sandbox-output-limit-halved",
        f"{BUILTIN}/_sandbox_limits.py",
        "max_output_chars: int = 8_000",
        "max_output_chars: int = 4_000",
        "the sandbox keeps half as much of a program's output",
        (Expect("sre/smoke-test-long-output-and-exception", "tool_result_changed", 1),),
    ),
    Mutation(
        "sandbox-cut-marker",
        f"{BUILTIN}/_sandbox_process.py",
        'return f"{head}\\n…[{cut:,} of {self.total:,} bytes cut]…\\n{tail}"',
        'return f"{head}\\n…[{cut:,} bytes omitted]…\\n{tail}"',
        "the marker in a cut sandbox output is worded differently",
        (Expect("sre/smoke-test-long-output-and-exception", "tool_result_changed", 1),),
    ),
    Mutation(
        "sandbox-keeps-early-tail",
        f"{BUILTIN}/_sandbox_process.py",
        "del self.tail[: max(len(self.tail) - self._half, 0)]",
        "del self.tail[self._half :]",
        "the sandbox keeps the start of the tail, losing the traceback at the end",
        (Expect("sre/smoke-test-long-output-and-exception", "tool_result_changed", 1),),
    ),
    Mutation(
        "sandbox-exception-text",
        f"{BUILTIN}/_sandbox_outcome.py",
        'return SandboxOutcome.ERROR, f"the program raised {last_line}{note}"',
        'return SandboxOutcome.ERROR, f"the program failed with {last_line}{note}"',
        "an exception in a sandboxed program is reported in other words",
        (Expect("sre/smoke-test-long-output-and-exception", "tool_result_changed", 1),),
    ),
    Mutation(
        "calculator-division-floors",
        f"{BUILTIN}/calculator.py",
        "ast.Div: operator.truediv,",
        "ast.Div: operator.floordiv,",
        "the calculator's / divides to a whole number",
        (Expect("sre/busy-cores-prod-us", "tool_result_changed", 2),),
    ),
]

GOLDEN_AGENTS = [
    Mutation(
        "sre-threshold-instruction",
        "golden/sre/agent.py",
        "alert threshold is 85%.",
        "alert threshold is 90%.",
        "the SRE agent is told another alert threshold",
        (Expect("sre/status-prod-eu", "request_drift", 1),),
    ),
    Mutation(
        "sre-prod-eu-cpu",
        "golden/sre/agent.py",
        '"cpu_pct": 78,',
        '"cpu_pct": 81,',
        "prod-eu reports another CPU figure",
        (
            Expect("sre/status-prod-eu", "tool_result_changed", 1),
            Expect("sre/headroom-prod-eu", "tool_result_changed", 1),
        ),
    ),
    Mutation(
        "sre-status-drops-cluster-field",
        "golden/sre/agent.py",
        'return {"cluster": cluster, **status}',
        "return dict(status)",
        "cluster_status no longer names the cluster in its result",
        (Expect("sre/status-staging-quiet", "tool_result_changed", 1),),
    ),
    Mutation(
        "sre-checkout-latency",
        "golden/sre/agent.py",
        "        620,\n",
        "        640,\n",
        "one checkout latency sample changes",
        (Expect("sre/p95-latency-checkout", "tool_result_changed", 1),),
    ),
    Mutation(
        "refund-tier-threshold",
        "golden/customer_service/agent.py",
        'if amount > 100 and ctx.get("customer_tier") != "gold":',
        'if amount > 200 and ctx.get("customer_tier") != "gold":',
        "a silver customer's 150 EUR refund now goes through",
        (Expect("customer_service/refund-large-silver", "tool_result_changed", 2),),
    ),
    Mutation(
        "refund-window-60-days",
        "golden/customer_service/agent.py",
        "if age > 30:",
        "if age > 60:",
        "refunds stay open for 60 days",
        (Expect("customer_service/refund-too-old", "tool_result_changed", 2),),
    ),
    Mutation(
        "refund-gateway-never-flaky",
        "golden/customer_service/agent.py",
        'FLAKY_GATEWAY = {"D44"}',
        "FLAKY_GATEWAY: set[str] = set()",
        "the payment gateway answers the first attempt",
        (Expect("customer_service/refund-retried-idempotently", "tool_result_changed", 2),),
    ),
    Mutation(
        "order-status-no-age",
        "golden/customer_service/agent.py",
        'return {"order_id": order_id.upper(), **order, "age_days": age}',
        'return {"order_id": order_id.upper(), **order}',
        "order_status stops reporting the order's age",
        (Expect("customer_service/order-status", "tool_result_changed", 1),),
    ),
    Mutation(
        "refund-id-format",
        "golden/customer_service/agent.py",
        'refund = {"refund_id": f"R-{order_id.upper()}-{int(amount * 100)}", "amount": amount}',
        'refund = {"refund_id": f"R-{order_id.upper()}-{int(amount)}", "amount": amount}',
        "refund ids are built from whole euros",
        (Expect("customer_service/refund-eligible", "tool_result_changed", 2),),
    ),
    Mutation(
        "refunds-instructions-key",
        "golden/customer_service/agent.py",
        "idempotency key refund-<order id>.",
        "idempotency key refund-<order id>-1.",
        "the refund specialist is told another idempotency key format",
        (Expect("customer_service/refund-eligible", "request_drift", 1),),
    ),
    Mutation(
        "escalation-token-session-scope",
        "golden/mechanisms/agent.py",
        'f"esc-{ticket_id.upper()}-7f3a", scope="request")',
        'f"esc-{ticket_id.upper()}-7f3a", scope="session")',
        "the one-time escalation token is written to the session scope (an extra session write"
        " where the request-scope one goes missing) and crosses the handoff",
        (Expect("mechanisms/request-scope-stays-behind", "extra_step", 1),),
    ),
    Mutation(
        "log-shorter",
        "golden/mechanisms/agent.py",
        "for n in range(1, 121))",
        "for n in range(1, 101))",
        "the oversized log has 100 lines instead of 120",
        (Expect("mechanisms/oversized-log-truncated", "tool_result_changed", 1),),
    ),
    Mutation(
        "ticket-history-inverted",
        "golden/mechanisms/agent.py",
        "    if include_history:\n",
        "    if not include_history:\n",
        "lookup_ticket returns the history only when not asked for",
        (
            Expect("mechanisms/fenced-arguments", "tool_result_changed", 1),
            Expect("mechanisms/prose-wrapped-arguments", "tool_result_changed", 1),
        ),
    ),
    Mutation(
        "weather-lisbon",
        "golden/memory/agent.py",
        '"lisbon": "Lisbon: 24°C, sunny, light wind from the north-west",',
        '"lisbon": "Lisbon: 22°C, sunny, light wind from the north-west",',
        "Lisbon's weather changes",
        (Expect("memory/lookups-summarized", "tool_result_changed", 1),),
    ),
    Mutation(
        "memory-policy-roomier",
        "golden/memory/agent.py",
        "memory=MemoryPolicy(max_messages=8, keep_recent=2),",
        "memory=MemoryPolicy(max_messages=10, keep_recent=2),",
        "the travel agent's memory lets 10 messages through, so no summary is needed",
        (
            Expect("memory/lookups-summarized", "missing_step", 5),
            Expect("memory/pinned-fact-outlives-dropped-turns", "missing_step", 1),
        ),
    ),
    Mutation(
        "memory-policy-keep-recent-3",
        "golden/memory/agent.py",
        "memory=MemoryPolicy(max_messages=8, keep_recent=2),",
        "memory=MemoryPolicy(max_messages=8, keep_recent=3),",
        "the travel agent's memory keeps three recent units",
        (Expect("memory/lookups-summarized", "memory_changed", 5),),
    ),
    Mutation(
        "parts-stock-a100",
        "golden/mcp_live/parts_server.py",
        '"A-100": {"name": "hydraulic pump seal", "in_stock": 14, "bin": "R3-07"},',
        '"A-100": {"name": "hydraulic pump seal", "in_stock": 15, "bin": "R3-07"},',
        "the stub MCP server reports another stock figure (the server process is the copy's)",
        (Expect("mcp_live/part-in-stock", "tool_result_changed", 1),),
    ),
    Mutation(
        "brakes-max-iterations-4",
        "golden/brakes/agent.py",
        "limits=Limits(max_iterations=5, timeout_s=60),",
        "limits=Limits(max_iterations=4, timeout_s=60),",
        "the brakes agent stops one model call earlier",
        (Expect("brakes/runaway-reader-capped", "missing_step", 5),),
    ),
    Mutation(
        "slow-report-timeout-3s",
        "golden/brakes/agent.py",
        '@tool(effect="read_only", timeout_s=0.3)',
        '@tool(effect="read_only", timeout_s=3)',
        "the slow report gets time to answer",
        (Expect("brakes/tool-timeout", "tool_result_changed", 1),),
    ),
    Mutation(
        "sql-max-rows-100",
        "golden/sql_analyst/agent.py",
        'dialect="duckdb", max_rows=200)',
        'dialect="duckdb", max_rows=100)',
        "the SQL agent's row limit (and the tool description saying it) halves",
        (Expect("sql_analyst/pairs-over-row-limit", "request_drift", 1),),
    ),
]

EQUIVALENT = [
    Mutation(
        "eq-memory-first-request-pin",
        f"{RT}/memory.py",
        "return index == first_user or any(id(m) in self.pinned for m in unit.messages)",
        "return any(id(m) in self.pinned for m in unit.messages)",
        "drop memory's own pin of the first request: RunState already pins that message",
        equivalent=True,
    ),
    Mutation(
        "eq-rename-cut",
        f"{RT}/tools.py",
        '    cut = len(text) - limit\n    return f"{text[:limit]}\\n…[truncated {cut:,} of',
        '    hidden = len(text) - limit\n    return f"{text[:limit]}\\n…[truncated {hidden:,} of',
        "rename a local variable",
        equivalent=True,
    ),
    Mutation(
        "eq-truncate-guard-negated",
        f"{RT}/tools.py",
        "if limit <= 0 or len(text) <= limit:",
        "if not (limit > 0 and len(text) > limit):",
        "the same condition written through De Morgan",
        equivalent=True,
    ),
    Mutation(
        "eq-rename-fenced",
        f"{RT}/arguments.py",
        '    fenced = _FENCE.match(text) if text[0] == "`" else None  # stripped: a fence '
        "starts it\n    if fenced:\n        text = fenced.group(1).strip()",
        '    fence = _FENCE.match(text) if text[0] == "`" else None  # stripped: a fence '
        "starts it\n    if fence:\n        text = fence.group(1).strip()",
        "rename a local variable",
        equivalent=True,
    ),
    Mutation(
        "eq-sql-request-keys",
        f"{BUILTIN}/sql.py",
        '            "max_rows": max_rows,\n            "max_bytes": max_bytes,\n',
        '            "max_bytes": max_bytes,\n            "max_rows": max_rows,\n',
        "reorder the independent keys of the request sent to the SQL worker",
        equivalent=True,
    ),
    Mutation(
        "eq-dropped-decisions-comprehension",
        f"{RT}/memory.py",
        "        for reason, count in dropped.items():\n"
        '            decisions.append(Decision("dropped", reason, count, before, after))',
        "        decisions.extend(\n"
        '            Decision("dropped", reason, count, before, after)\n'
        "            for reason, count in dropped.items()\n"
        "        )",
        "replace a loop by a generator passed to extend",
        equivalent=True,
    ),
    Mutation(
        "eq-handoff-session-filter",
        f"{RT}/runner.py",
        "            session={\n"
        "                key: value\n"
        "                for key, value in self.session.items()\n"
        "                if visible_to(key, target.name, target.reads)\n"
        "            },\n",
        "            session=dict(\n"
        "                item\n"
        "                for item in self.session.items()\n"
        "                if visible_to(item[0], target.name, target.reads)\n"
        "            ),\n",
        "build the handed-over session with dict() over a generator instead of a comprehension",
        equivalent=True,
    ),
    Mutation(
        "eq-state-lines-concat",
        f"{RT}/instructions.py",
        '"\\n".join(f"- {s}" for s in state)',
        '"\\n".join("- " + str(s) for s in state)',
        "build the same lines by concatenation",
        equivalent=True,
    ),
    Mutation(
        "eq-event-kwargs-order",
        f"{RT}/loop.py",
        "yield run.event(ModelRequest, step=run.iteration, request=request)",
        "yield run.event(ModelRequest, request=request, step=run.iteration)",
        "reorder keyword arguments",
        equivalent=True,
    ),
    Mutation(
        "eq-log-line-param",
        "golden/mechanisms/agent.py",
        'def _log_line(number: int) -> str:\n    return f"{number:04d} INFO checkout request '
        'served in {90 + number % 40} ms\\n"',
        'def _log_line(n: int) -> str:\n    return f"{n:04d} INFO checkout request '
        'served in {90 + n % 40} ms\\n"',
        "rename a golden agent's helper parameter",
        equivalent=True,
    ),
]

# The client a served replay runs (golden/resilience): retries, streams, quirks and fallbacks,
# which a replay above the SDK never reaches.
SERVED = [
    Mutation(
        "retry-5xx-not-retried",
        f"{RT}/retry.py",
        "return status in RETRYABLE_STATUS or status >= 500",
        "return status in RETRYABLE_STATUS",
        "a 5xx is final: the client no longer retries it (nor does a FallbackModel move on)",
        (Expect("resilience/usd-after-503", "stop_reason_changed", 1),),
    ),
    Mutation(
        "retry-max-attempts-3",
        f"{RT}/retry.py",
        "max_attempts: int = 4",
        "max_attempts: int = 3",
        "the client gives up after three attempts: three 429s send the agent to its backup model",
        (Expect("resilience/gbp-after-429-retry-after", "response_changed", 1),),
    ),
    Mutation(
        "stream-cut-taken-whole",
        f"{RT}/openai_model.py",
        "                if state.finished:\n",
        "                if state.chunks:\n",
        "a stream that broke part-way is taken for the whole answer (a tool call's arguments cut)",
        (Expect("resilience/chf-stream-cut-mid-tool-call", "response_changed", 1),),
    ),
    Mutation(
        "stream-names-glued",
        f"{RT}/completions.py",
        'call["name"] = name if name.startswith(call["name"]) else call["name"] + name',
        'call["name"] = call["name"] + name',
        "a tool name repeated in every streamed chunk is glued together",
        (Expect("resilience/gbp-names-repeated-in-stream", "response_changed", 1),),
    ),
    Mutation(
        "empty-stream-taken-as-answer",
        f"{RT}/openai_model.py",
        "        if not state.chunks:\n            return None\n",
        "        if not state.chunks:\n            return state.response(request)\n",
        "llama.cpp's empty event stream is taken for an empty answer, not asked again unstreamed",
        (Expect("resilience/usd-from-llama-cpp", "response_changed", 1),),
    ),
    Mutation(
        "fallback-model-not-on-transient",
        f"{RT}/fallback.py",
        "if is_transient(error) or (self.errors and isinstance(error, self.errors)):",
        "if self.errors and isinstance(error, self.errors):",
        "a FallbackModel moves on only for the errors named in on=, not after a 503",
        (Expect("resilience/primary-model-down", "stop_reason_changed", 1),),
    ),
    Mutation(
        "fallback-record-names-primary",
        f"{RT}/fallback.py",
        'record = {"answered_by": answered_by, "chain": chain, "failed": failed}',
        'record = {"answered_by": chain[0], "chain": chain, "failed": failed}',
        "a fallback's record says the primary answered (which the agent's chain never does)",
        (Expect("resilience/primary-model-down", "request_drift", 1),),
    ),
    Mutation(
        "fallback-tool-after-business-failure",
        f"{RT}/fallback.py",
        "if result.kind is not ResultKind.SYSTEM_ERROR:",
        "if result.kind is ResultKind.OK:",
        "a fallback tool asks its next backend after a business failure too",
        (Expect("resilience/unknown-currency-no-fallback", "tool_result_changed", 1),),
    ),
    Mutation(
        "fallback-tool-path-dropped",
        f"{RT}/fallback.py",
        'return result.model_copy(update={"error": path})',
        "return result",
        "a fallback tool's ok answer no longer records which backend gave it and why",
        (Expect("resilience/yen-feed-falls-back", "tool_result_changed", 1),),
    ),
]

# Scorers made lenient: each turns a negative control (golden/negative_controls, strict_xfail)
# into an XPASS, which fails the gate.
SCORERS_LENIENT = [
    Mutation(
        "regex-always-ignores-case",
        f"{EVALS}/scorers/output_text.py",
        "        flags = 0\n        for flag in params.flags:",
        "        flags = re.IGNORECASE\n        for flag in params.flags:",
        "output_regex ignores case whether or not the expectation asks it to",
        (Expect("negative_controls/control-output-regex-case", "xpassed"),),
    ),
    Mutation(
        "not-contains-misses-the-start",
        f"{EVALS}/scorers/output_text.py",
        "if (at := haystack.find(word.lower() if self.params.ignore_case else word)) >= 0",
        "if (at := haystack.find(word.lower() if self.params.ignore_case else word)) > 0",
        "output_not_contains misses a banned text at the very start of the output",
        (Expect("negative_controls/control-output-not-contains-start", "xpassed"),),
    ),
    Mutation(
        "tool-called-times-at-most",
        f"{EVALS}/scorers/tool_use.py",
        "if count and (times is None or count == times):",
        "if count and (times is None or count <= times):",
        "tool_called's times is read as at most",
        (Expect("negative_controls/control-tool-called-times", "xpassed"),),
    ),
    Mutation(
        "trajectory-strict-misspelt",
        f"{EVALS}/scorers/trajectory_match.py",
        'if mode == "strict":',
        'if mode == "exact":',
        "trajectory's strict mode falls through to the order-blind comparison",
        (Expect("negative_controls/control-trajectory-order", "xpassed"),),
    ),
    Mutation(
        "token-budget-counts-output-only",
        f"{EVALS}/scorers/budgets.py",
        '("tokens", usage.total_tokens, self.params.max_tokens),',
        '("tokens", usage.output_tokens, self.params.max_tokens),',
        "token_budget's max_tokens is checked against the output tokens only",
        (Expect("negative_controls/control-token-budget", "xpassed"),),
    ),
    Mutation(
        "max-steps-counts-runs",
        f"{EVALS}/scorers/budgets.py",
        "total = sum(per_run.values())",
        "total = len(per_run)",
        "max_steps counts runs, not model calls",
        (Expect("negative_controls/control-max-steps", "xpassed"),),
    ),
]

# What no trajectory shows, the comparison must still flag: an expected failure that starts
# passing (XPASS), and usage read wrong from identical recordings (tokens, cost).
NOT_IN_THE_TRAJECTORY = [
    Mutation(
        "xfail-scorer-lenient",
        "agentbench/evals/scorers/output_text.py",
        "found = [w for w in wanted if (w.lower() if self.params.ignore_case else w) in haystack]",
        "found = [w for w in wanted if (w.lower() if self.params.ignore_case else w).strip(': ')"
        " in haystack]",
        "output_contains ignores a needle's trailing colon and spaces: an expected failure passes",
        (Expect("sre/forecast-not-available", "xpassed"),),
    ),
    Mutation(
        "usage-counts-swapped",
        "agentbench/runtime/completions.py",
        '"input_tokens": body.get("prompt_tokens") or 0,\n'
        '        "output_tokens": body.get("completion_tokens") or 0,',
        '"input_tokens": body.get("completion_tokens") or 0,\n'
        '        "output_tokens": body.get("prompt_tokens") or 0,',
        "prompt and completion token counts are swapped where usage is read: the cost of the "
        "same recorded usage is about 4x",
        (Expect("sre/headroom-prod-eu", "budget_regression"),),
    ),
]

MUTATIONS: list[Mutation] = [
    *RUNTIME,
    *MCP,
    *BUILTIN_TOOLS,
    *GOLDEN_AGENTS,
    *NOT_IN_THE_TRAJECTORY,
    *SERVED,
    *SCORERS_LENIENT,
    *EQUIVALENT,
]

if len({m.id for m in MUTATIONS}) != len(MUTATIONS):
    raise ValueError("two mutations share an id")
