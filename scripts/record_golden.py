"""Record the shipped golden suites' cassettes through the real record path.

    python scripts/record_golden.py [golden/ …] [--filter ID]

Each suite has a reference policy (`golden/<suite>/reference.py`): a deterministic stand-in for
a capable model that reads the request — the user's question, the tool results so far — and
answers with the next tool call or the final text. This script serves those policies from an
OpenAI-compatible server on 127.0.0.1 (agentbench.testing.OpenAICompatibleServer, chosen by the
request's model name; it answers Anthropic's Messages API too, through ANTHROPIC_BASE_URL) and
runs `agentbench run --live --record-mode all` against it, so every cassette is written by the
same code path that records a real provider: the openai SDK, HTTP, the recording model and the
cassette writer; a served suite (`serve:`) records through its agent's own client chain, so
golden/resilience's FallbackModel really falls back when its reference policy answers the
primary with a 503. That path also records, in each cassette's metadata, the suite's `agent`
reference and `suite_dir` (the suite folder relative to the cassette), so `agentbench replay
replays/<suite>/<case>.yaml` needs no --agent. To record against your own endpoint instead, run
`agentbench run golden/ --live --record-mode all --model NAME` with OPENAI_BASE_URL and
OPENAI_API_KEY set."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentbench.cli import main  # noqa: E402
from agentbench.testing import OpenAICompatibleServer  # noqa: E402

POLICIES = {
    "reference-sre": "golden.sre.reference",
    "reference-sql": "golden.sql_analyst.reference",
    "reference-cs": "golden.customer_service.reference",
    "reference-brakes": "golden.brakes.reference",
    "reference-memory": "golden.memory.reference",
    "reference-mechanisms": "golden.mechanisms.reference",
    "reference-mcp-time": "golden.mcp_time.reference",
    "reference-mcp-live": "golden.mcp_live.reference",
    "reference-memory-defaults": "golden.memory_defaults.reference",
    "reference-negative-controls": "golden.negative_controls.reference",
    "reference-resilience": "golden.resilience.reference",
    "reference-resilience-backup": "golden.resilience.reference",
    "reference-bank": "golden.pydantic_ai_agent.reference",
    "reference-helpdesk": "golden.openai_agents.reference",
    "reference-parts-agents": "golden.openai_agents_mcp.reference",
    "reference-parts-pydantic": "golden.pydantic_ai_mcp.reference",
    "reference-openai-sdk": "golden.openai_sdk.reference",
    "reference-langgraph": "golden.langgraph_agent.reference",
    "reference-typescript": "golden.typescript_agent.reference",
    "reference-anthropic": "golden.anthropic_agent.reference",
}


def respond(request: dict[str, Any]) -> Any:
    module = POLICIES.get(request.get("model", ""))
    if module is None:
        return f"no reference policy for model {request.get('model')!r}"
    return importlib.import_module(module).respond(request)


def _holds_suites(path: Path) -> bool:
    if path.is_file():
        return path.name == "suite.yaml"
    return path.is_dir() and next(path.rglob("suite.yaml"), None) is not None


def record(arguments: list[str]) -> int:
    # Everything goes to `agentbench run` as written, so an option's value (`--filter ID`)
    # stays with its option; only when no suite path is named are all the golden suites run.
    named = any(_holds_suites(Path(a)) for a in arguments if not a.startswith("-"))
    paths = [] if named else [str(ROOT / "golden")]
    with OpenAICompatibleServer(responder=respond) as server:
        os.environ["OPENAI_BASE_URL"] = server.base_url
        os.environ["OPENAI_API_KEY"] = "reference-policy"
        # Anthropic's Messages API is answered by the same server, from the same policies.
        os.environ["ANTHROPIC_BASE_URL"] = server.anthropic_base_url
        os.environ["ANTHROPIC_API_KEY"] = "reference-policy"
        return main(
            ["run", *paths, *arguments, "--live", "--record-mode", "all", "--concurrency", "1"]
        )


if __name__ == "__main__":
    sys.exit(record(sys.argv[1:]))
