"""SRE operations agent (seed 000): cluster status, threshold arithmetic, a Python sandbox.

The cluster data is a fixed fixture, so replaying the suite's cassettes is deterministic.
"""

from __future__ import annotations

from agentbench import Agent, BusinessFailure, tool
from agentbench.tools import SandboxLimits, calculator, python_sandbox

CLUSTERS: dict[str, dict] = {
    "prod-eu": {
        "nodes": 12,
        "cores_per_node": 16,
        "cpu_pct": 78,
        "mem_pct": 64,
        "pods": 412,
        "alerts": [{"severity": "warning", "message": "node prod-eu-7 disk at 85%"}],
    },
    "prod-us": {
        "nodes": 20,
        "cores_per_node": 32,
        "cpu_pct": 91,
        "mem_pct": 72,
        "pods": 880,
        "alerts": [{"severity": "critical", "message": "CPU above 90% for 15 minutes"}],
    },
    "staging": {
        "nodes": 4,
        "cores_per_node": 8,
        "cpu_pct": 35,
        "mem_pct": 40,
        "pods": 96,
        "alerts": [],
    },
}

LATENCIES_MS: dict[str, list[int]] = {
    "checkout": [
        112,
        98,
        134,
        101,
        480,
        120,
        99,
        105,
        131,
        97,
        143,
        110,
        620,
        108,
        115,
        102,
        125,
        119,
        104,
        138,
    ],
    "search": [35, 41, 38, 33, 36, 90, 34, 37, 39, 40, 32, 36, 38, 35, 37, 120, 36, 34, 33, 35],
}


@tool(effect="read_only", idempotent=True, timeout_s=5)
def cluster_status(cluster: str) -> dict:
    """Current health of a Kubernetes cluster: nodes, CPU and memory use, pods, open alerts.

    Args:
        cluster: Cluster name, e.g. "prod-eu".
    """
    status = CLUSTERS.get(cluster)
    if status is None:
        raise BusinessFailure(f"no cluster named {cluster!r}", data={"known": sorted(CLUSTERS)})
    return {"cluster": cluster, **status}


@tool(effect="read_only", idempotent=True, timeout_s=5)
def recent_latencies(service: str) -> list[int]:
    """The last 20 request latencies of a service, in milliseconds.

    Args:
        service: Service name, e.g. "checkout".
    """
    values = LATENCIES_MS.get(service)
    if values is None:
        raise BusinessFailure(
            f"no latency data for {service!r}", data={"known": sorted(LATENCIES_MS)}
        )
    return values


# The sandbox normally describes the isolation it finds on this machine; the suite pins one
# wording so its recorded requests do not depend on the kernel it is replayed on.
sandbox = python_sandbox(
    SandboxLimits(timeout_s=10),
    description=(
        "Run a Python 3 program in an isolated sandbox (no network, 10 s) and return its stdout "
        "and stderr. print() every result you need."
    ),
)

sre_agent = Agent(
    name="sre",
    description="Answers operational questions about our Kubernetes clusters.",
    instructions=(
        "You are an SRE assistant. Look facts up with the tools; never guess numbers. Use the "
        "calculator for arithmetic and the Python sandbox for statistics over lists. The CPU "
        "alert threshold is 85%. Answer in one or two sentences."
    ),
    tools=[cluster_status, recent_latencies, calculator, sandbox],
)
