"""A support desk served over HTTP, and a client that talks to it with the openai SDK.

    agentbench serve examples/served_desk.py:desk --port 8000      # terminal 1
    python examples/served_desk.py http://127.0.0.1:8000/v1        # terminal 2

The desk is the customer-service suite's agent (a router, triage and a refund specialist,
`golden/customer_service/agent.py`) on the suite's reference policy — a deterministic stand-in
for a model, so this runs offline. To serve it on a real model instead:

    agentbench serve golden.customer_service.agent:desk --model gpt-4o-mini

The client sends three conversations (the last one streamed) and prints each answer with
the run id the server recorded it under: `agentbench traces list`, `agentbench replay RUN_ID`
and `agentbench promote RUN_ID --suite golden/customer_service` take it from there.
"""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentbench import Router  # noqa: E402
from agentbench.runtime.models import FunctionModel  # noqa: E402
from golden.customer_service.agent import refunds, triage  # noqa: E402
from golden.customer_service.reference import respond  # noqa: E402

# The suite's desk, on the reference policy (the suite's own `desk` has no model: its runs
# replay cassettes or take the model from the command line).
desk = Router(
    name="desk", agents=[triage, refunds], model=FunctionModel(respond, name="reference-cs")
)

QUESTIONS = [
    "Where is my order E05?",
    "I want a refund for order A17",
    "What are your opening hours?",
]


def ask(base_url: str) -> None:
    import openai

    # A server started with keys (--keys FILE) wants one of them; one without keys, none.
    client = openai.OpenAI(base_url=base_url, api_key=os.environ.get("AGENTBENCH_SERVE_KEY", "-"))
    conversation = f"example-{uuid.uuid4().hex[:8]}"
    for number, question in enumerate(QUESTIONS, start=1):
        messages = [{"role": "user", "content": question}]
        headers = {"X-Conversation-Id": conversation}
        if number < len(QUESTIONS):
            raw = client.chat.completions.with_raw_response.create(
                model="desk", messages=messages, extra_headers=headers
            )
            answer = raw.parse().choices[0].message.content
            run_id = raw.headers["x-agentbench-run-id"]
        else:
            with client.chat.completions.with_streaming_response.create(
                model="desk", messages=messages, stream=True, extra_headers=headers
            ) as raw:
                run_id = raw.headers["x-agentbench-run-id"]
                answer = "".join(
                    chunk.choices[0].delta.content or "" for chunk in raw.parse() if chunk.choices
                )
        print(f"{question}\n  → {answer}\n  run {run_id}")


if __name__ == "__main__":
    ask(sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8000/v1")
