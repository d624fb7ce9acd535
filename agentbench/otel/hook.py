"""`OTelHook`: a runner hook that emits a run's GenAI spans live, on your tracer provider.

    from opentelemetry.sdk.trace import TracerProvider
    runner.run(agent, "hi", hooks=[OTelHook(tracer_provider=provider)])

The run's `invoke_agent` span is a child of whatever span is current where the run started
(your request handler's, say), handed-off runs are children of the run that handed off, and
model and tool calls children of their run. Message content follows the conventions' opt-in
(see `agentbench.otel.conventions`) unless `capture_content` says otherwise. Secrets are
scrubbed from the content with the trace store's redactor before a span sees them.

Tool definitions go out in the conventions' flat shape, and a call to a tool of an MCP server
(`agentbench.runtime.mcp`) carries the MCP conventions' attributes on its `execute_tool` span
(`mcp.method.name`, `network.transport`, `mcp.protocol.version`, `mcp.session.id`,
`error.type`…; see `agentbench.otel.mcp`).
"""

from __future__ import annotations

from typing import Any

from opentelemetry import trace

from agentbench._version import __version__
from agentbench.otel import conventions
from agentbench.otel.mcp import McpToolIndex
from agentbench.otel.spans import SpanWriter
from agentbench.trace.redaction.redactor import Redactor


class OTelHook:
    """Call it with every event (pass it in `hooks=`); it opens and ends spans as they happen."""

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None = None,
        *,
        capture_content: bool | None = None,
        redactor: Redactor | None = None,
    ) -> None:
        provider = tracer_provider or trace.get_tracer_provider()
        self.content = (
            conventions.content_from_env() if capture_content is None else capture_content
        )
        self._writer = SpanWriter(
            provider.get_tracer("agentbench", __version__),
            content=self.content,
            scrub=(redactor or Redactor()).value,
            mcp=McpToolIndex(),
        )

    def __call__(self, event: Any) -> None:
        self._writer(event)

    def close(self) -> None:
        """End the spans of runs still open (a process going away mid-run)."""
        self._writer.close()
