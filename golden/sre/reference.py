"""Reference policy for the SRE suite: what a capable model would do, deterministically."""

from __future__ import annotations

import re
from typing import Any

from golden._reference import call, results_of, route

PRODUCTION = ("prod-eu", "prod-us")


def _status_answer(status: dict[str, Any]) -> str:
    alerts = status["alerts"]
    alert_text = (
        "; ".join(f"{a['severity']}: {a['message']}" for a in alerts)
        if alerts
        else "no open alerts"
    )
    return (
        f"{status['cluster']} has {status['nodes']} nodes at {status['cpu_pct']}% CPU and "
        f"{status['mem_pct']}% memory, running {status['pods']} pods ({alert_text})."
    )


def _status(match: re.Match[str], request: dict[str, Any]) -> Any:
    cluster = match.group(1).lower()
    seen = results_of(request, "cluster_status")
    if not seen:
        return call("cluster_status", cluster=cluster)
    if seen[-1].failed:
        return f"There is no cluster named {cluster}; I know prod-eu, prod-us and staging."
    return _status_answer(seen[-1].json())


def _busy_cores(match: re.Match[str], request: dict[str, Any]) -> Any:
    cluster = match.group(1).lower()
    status = results_of(request, "cluster_status")
    if not status:
        return call("cluster_status", cluster=cluster)
    data = status[-1].json()
    math = results_of(request, "calculator")
    if not math:
        expression = f"{data['nodes']} * {data['cores_per_node']} * {data['cpu_pct']} / 100"
        return call("calculator", expression=expression)
    return f"About {math[-1].content} CPU cores are busy in {cluster}."


def _headroom(match: re.Match[str], request: dict[str, Any]) -> Any:
    cluster, threshold = match.group(1).lower(), match.group(2)
    status = results_of(request, "cluster_status")
    if not status:
        return call("cluster_status", cluster=cluster)
    math = results_of(request, "calculator")
    if not math:
        return call("calculator", expression=f"{threshold} - {status[-1].json()['cpu_pct']}")
    return (
        f"{cluster} has {math[-1].content} percentage points of CPU headroom before {threshold}%."
    )


def _percentile(match: re.Match[str], request: dict[str, Any]) -> Any:
    percentile, service = int(match.group(1)), match.group(2).lower()
    values = results_of(request, "recent_latencies")
    if not values:
        return call("recent_latencies", service=service)
    if values[-1].failed:
        return f"I have no latency data for {service}."
    runs = results_of(request, "python_sandbox")
    if not runs:
        code = (
            f"values = sorted({values[-1].json()})\n"
            f"rank = max(1, -(-{percentile} * len(values) // 100))\n"
            "print(values[rank - 1])"
        )
        return call("python_sandbox", code=code)
    output = runs[-1].json()
    result = output.get("stdout", "").strip() if isinstance(output, dict) else str(output)
    return f"The p{percentile} latency of {service} is {result} ms."


def _capacity(match: re.Match[str], request: dict[str, Any]) -> Any:
    cluster, target = match.group(1).lower(), match.group(2)
    status = results_of(request, "cluster_status")
    if not status:
        return call("cluster_status", cluster=cluster)
    data = status[-1].json()
    math = results_of(request, "calculator")
    if not math:
        return call(
            "calculator", expression=f"ceil({data['nodes']} * {data['cpu_pct']} / {target})"
        )
    needed = int(float(math[-1].content))
    change = needed - data["nodes"]
    verb = (
        f"add {change} nodes"
        if change > 0
        else f"remove {-change} nodes"
        if change < 0
        else "keep it as is"
    )
    return (
        f"To run {cluster} at {target}% CPU it needs {needed} nodes: {verb} (now {data['nodes']})."
    )


def _compare(match: re.Match[str], request: dict[str, Any]) -> Any:
    seen = {o.arguments.get("cluster"): o.json() for o in results_of(request, "cluster_status")}
    if not seen:
        return [call("cluster_status", cluster=c) for c in PRODUCTION]
    busiest = max(seen.values(), key=lambda s: s["cpu_pct"])
    return f"{busiest['cluster']} is busier, at {busiest['cpu_pct']}% CPU."


def _critical(match: re.Match[str], request: dict[str, Any]) -> Any:
    seen = [o.json() for o in results_of(request, "cluster_status")]
    if not seen:
        return [call("cluster_status", cluster=c) for c in PRODUCTION]
    critical = [
        f"{s['cluster']}: {a['message']}"
        for s in seen
        for a in s["alerts"]
        if a["severity"] == "critical"
    ]
    return "Critical alerts: " + ("; ".join(critical) if critical else "none") + "."


def _forecast(match: re.Match[str], request: dict[str, Any]) -> Any:
    status = results_of(request, "cluster_status")
    if not status:
        return call("cluster_status", cluster=match.group(1).lower())
    return f"It is at {status[-1].json()['cpu_pct']}% CPU now; I have no forecast data."


SMOKE_TEST = """\
for number in range(1, 1201):
    print(f"record {number:04d}: parsed ok")
raise ValueError("record 1201: timestamp '2026-13-01' is not a valid date")
"""


def _smoke_test(match: re.Match[str], request: dict[str, Any]) -> Any:
    """A long run that ends in an exception: what the model gets back is cut, error kept."""
    runs = results_of(request, "python_sandbox")
    if not runs:
        return call("python_sandbox", code=SMOKE_TEST)
    text = runs[-1].content
    error = re.search(r"the program raised (\w+: [^\n{]*?) \{", text)
    cut = re.search(r"…\[([\d,]+) of ([\d,]+) bytes cut\]…", text)
    parts = [f"The parser failed: {error.group(1) if error else 'no error shown'}."]
    if cut:
        parts.append(f"Its output was cut ({cut.group(1)} of {cut.group(2)} bytes not shown).")
    return " ".join(parts)


RULES = [
    (r"log parser smoke test", _smoke_test),
    (r"how many (?:cpu )?cores are busy in ([\w-]+)", _busy_cores),
    (r"headroom does ([\w-]+) have before (?:the )?(\d+)%", _headroom),
    (r"p(\d+) latency of (?:the )?(\w+)", _percentile),
    (r"how many nodes should ([\w-]+) have to run at (\d+)%", _capacity),
    (r"which production cluster is busier", _compare),
    (r"critical alerts", _critical),
    (r"cpu be tomorrow in ([\w-]+)", _forecast),
    (r"status of ([\w-]+)", _status),
]


def respond(request: dict[str, Any]) -> Any:
    return route(request, RULES, "I can only answer questions about our clusters.")
