"""The GenAI semantic conventions' names, and when message content may be written.

Names follow the OpenTelemetry GenAI conventions (gen-ai spans, agent spans). Content —
messages, tool arguments and results, tool definitions — is opt-in, as the conventions say:
on when asked for (`capture_content=True`, `--content`), or when the environment opts in the
way the official instrumentations read it: `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`
set to `span_only` or `span_and_event` together with
`OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`. agentbench writes content only in
the latest form (JSON attributes on the span); the older event-based form is read on import
but never written. The same opt-in switches the provider attribute from `gen_ai.system`
(v1.30) to `gen_ai.provider.name`.
"""

from __future__ import annotations

import os

OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
SYSTEM_V1_30 = "gen_ai.system"
AGENT_NAME = "gen_ai.agent.name"
AGENT_ID = "gen_ai.agent.id"
CONVERSATION_ID = "gen_ai.conversation.id"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
RESPONSE_ID = "gen_ai.response.id"
FINISH_REASONS = "gen_ai.response.finish_reasons"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
TOOL_DEFINITIONS = "gen_ai.tool.definitions"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
ERROR_TYPE = "error.type"

# Request parameters with a convention name: OpenAI body key → attribute.
REQUEST_PARAMETERS = {
    "temperature": "gen_ai.request.temperature",
    "top_p": "gen_ai.request.top_p",
    "max_tokens": "gen_ai.request.max_tokens",
    "max_completion_tokens": "gen_ai.request.max_tokens",
    "seed": "gen_ai.request.seed",
    "stop": "gen_ai.request.stop_sequences",
    "frequency_penalty": "gen_ai.request.frequency_penalty",
    "presence_penalty": "gen_ai.request.presence_penalty",
    "n": "gen_ai.request.choice.count",
}

# What agentbench adds under its own namespace, so its own spans come back whole.
RUN_ID = "agentbench.run_id"
PARENT_RUN_ID = "agentbench.parent_run_id"
RUN_INPUT = "agentbench.run.input"
RUN_CONTEXT = "agentbench.run.context"
RUN_OUTPUT = "agentbench.run.output"
STOP_REASON = "agentbench.stop_reason"
RUN_ERROR = "agentbench.run.error"
ITERATIONS = "agentbench.iterations"
PURPOSE = "agentbench.purpose"
STEP = "agentbench.step"
REQUEST_REST = "agentbench.request.params"  # body keys other than model, messages and tools
LATENCY_MS = "agentbench.response.latency_ms"
ATTEMPTS = "agentbench.response.attempts"
USAGE_ESTIMATED = "agentbench.usage.estimated"
RESULT_KIND = "agentbench.tool.result_kind"
TOOL_ERROR = "agentbench.tool.error"
TOOL_EFFECT = "agentbench.tool.effect"
TOOL_TRUNCATED = "agentbench.tool.truncated"
TOOL_STOPS = "agentbench.tool.stops_run"
TOOL_REJECTED = "agentbench.tool.rejected"
RAW_ARGUMENTS = "agentbench.tool.raw_arguments"
EVENT_PREFIX = "agentbench."  # span events: agentbench.handoff, agentbench.guard_triggered, …

CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
STABILITY_ENV = "OTEL_SEMCONV_STABILITY_OPT_IN"
LATEST = "gen_ai_latest_experimental"


def latest_opted_in() -> bool:
    """Whether the environment opts into the latest experimental GenAI conventions."""
    return LATEST in {part.strip() for part in os.environ.get(STABILITY_ENV, "").split(",")}


def content_from_env() -> bool:
    """Whether the environment asks for message content on spans (see the module docstring)."""
    mode = os.environ.get(CONTENT_ENV, "").strip().lower()
    return latest_opted_in() and mode in ("span_only", "span_and_event")


def provider_attribute() -> str:
    return PROVIDER if latest_opted_in() else SYSTEM_V1_30
