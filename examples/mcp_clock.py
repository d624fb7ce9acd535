"""An agent with an MCP server's tools, recorded live, and a model that falls back.

    python examples/mcp_clock.py --record clock.yaml --db clock.duckdb ["QUESTION"]

The agent is the golden world clock (golden/mcp_time/agent.py): the time tools of a real MCP
server, `mcp-server-time` (started over stdio for the run: `pip install 'agentbench[mcp]'
mcp-server-time`), beside a Python tool. Its model is a `FallbackModel`: a primary that is
overloaded (a bundled OpenAI-compatible server answering HTTP 503) and a backup answering with
the suite's reference policy, both over HTTP through the real openai SDK. With `--live` the
primary is OPENAI_MODEL and the backup `--backup-model` on the same OPENAI_BASE_URL.

The session is saved as a cassette (`--record`) and the run stored as a trace (`--db`), so

    agentbench traces show RUN_ID --db clock.duckdb
    agentbench replay clock.yaml --tool time_convert_time=recorded

show which model answered, and replay the run with the MCP server nowhere in sight.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentbench import OpenAIModel, RetryPolicy, TraceStore  # noqa: E402
from agentbench.replay.session import record_session  # noqa: E402
from agentbench.runtime.fallback import FallbackModel  # noqa: E402
from agentbench.testing import OpenAICompatibleServer  # noqa: E402
from agentbench.testing.server import HTTPFault  # noqa: E402
from golden.mcp_time import reference  # noqa: E402
from golden.mcp_time.agent import clock_agent  # noqa: E402

QUESTION = "When it is 16:00 for Priya, what time is it for Lars?"
QUICK = RetryPolicy(max_attempts=2, initial_backoff_s=0.05)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("question", nargs="?", default=QUESTION)
    parser.add_argument("--record", type=Path, required=True, help="cassette file to write")
    parser.add_argument("--db", type=Path, required=True, help="trace store to record into")
    parser.add_argument("--live", action="store_true", help="OPENAI_MODEL, then --backup-model")
    parser.add_argument("--backup-model", default=None)
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        if args.live:
            primary = OpenAIModel()
            backup = OpenAIModel(args.backup_model or primary.name)
        else:
            overloaded = stack.enter_context(
                OpenAICompatibleServer(responder=lambda _: HTTPFault(503, "overloaded"))
            )
            healthy = stack.enter_context(OpenAICompatibleServer(responder=reference.respond))
            primary = OpenAIModel("primary", base_url=overloaded.base_url, retry=QUICK)
            backup = OpenAIModel("reference-mcp-time", base_url=healthy.base_url)
        model = FallbackModel([primary, backup])
        store = TraceStore(args.db)
        result, _ = await record_session(
            clock_agent,
            args.question,
            model=model,
            path=args.record,
            hooks=[store.run_hook()],
            agent_ref="golden.mcp_time.agent:clock_agent",
        )
        store.close()
        await model.aclose()
    for event in result.events:
        if event.kind == "model_response" and event.fallback:
            failed = event.fallback["failed"][0]
            why = f"HTTP {failed['status_code']}" if "status_code" in failed else failed["error"]
            print(
                f"step {event.step}: {failed['model']} failed ({why}, {failed['attempts']} "
                f"attempts); answered by {event.fallback['answered_by']}"
            )
        elif event.kind == "tool_finished":
            print(f"step {event.step}: {event.tool}({event.arguments}) → {event.result.kind}")
    print(f"run {result.run_id}: {result.stop_reason}: {result.output}")
    print(f"cassette: {args.record}")


if __name__ == "__main__":
    os.environ.setdefault("OPENAI_API_KEY", "unused")
    asyncio.run(main())
