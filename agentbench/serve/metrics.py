"""`GET /metrics`: Prometheus counters and histograms of what the server did.

One registry per app (not prometheus_client's global one), so two servers in one process —
tests, or an app embedding ours — never share or double-register series.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

# Agent runs take seconds to minutes; HTTP overhead alone is milliseconds.
_RUN_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)

CONTENT_TYPE = CONTENT_TYPE_LATEST


class ServeMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "agentbench_http_requests",
            "HTTP requests answered, by route and status code.",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self.request_seconds = Histogram(
            "agentbench_http_request_duration_seconds",
            "Time from request to the end of the response, by route.",
            ["route"],
            buckets=_RUN_BUCKETS,
            registry=self.registry,
        )
        self.runs = Counter(
            "agentbench_runs",
            "Agent conversations finished, by agent and stop reason.",
            ["agent", "stop_reason"],
            registry=self.registry,
        )
        self.run_seconds = Histogram(
            "agentbench_run_duration_seconds",
            "Time an agent conversation ran (queue wait excluded), by agent.",
            ["agent"],
            buckets=_RUN_BUCKETS,
            registry=self.registry,
        )
        self.tokens = Counter(
            "agentbench_tokens",
            "Model tokens used by served runs, by agent and direction.",
            ["agent", "direction"],
            registry=self.registry,
        )
        self.rejected = Counter(
            "agentbench_rejected_requests",
            "Requests refused before running: overloaded (429), too large (413), unauthorized "
            "(401), not_local (403: a keyless server's Host or Origin), draining (503).",
            ["reason"],
            registry=self.registry,
        )
        self.running = Gauge(
            "agentbench_runs_in_progress", "Runs holding a slot now.", registry=self.registry
        )
        self.queued = Gauge(
            "agentbench_runs_queued", "Requests waiting for a slot now.", registry=self.registry
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)
