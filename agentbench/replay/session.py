"""Record a session into a cassette, with what replay needs to compare against it later.

Besides the model interactions, a recorded cassette keeps (under `metadata.agentbench`) the
session's input and context, its runs, stop reason and output, the trajectory of steps, and
every tool result — so a cassette alone is enough to replay, to use `recorded` tool policies,
and to report where a new version diverged.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agentbench.replay.cassette import Cassette
from agentbench.replay.models import RecordingModel
from agentbench.replay.trajectory import canonical, plain, trajectory
from agentbench.runtime.agent import Agent
from agentbench.runtime.context import Context
from agentbench.runtime.events import Hook
from agentbench.runtime.models import ChatModel
from agentbench.runtime.run_state import RunResult
from agentbench.runtime.runner import Runner


def session_metadata(
    result: RunResult,
    *,
    input: Any,
    context: Context | dict[str, Any] | None = None,
    agent_ref: str | None = None,
) -> dict[str, Any]:
    """What a cassette records about the session besides the model calls."""
    events = result.all_events
    runs = result.runs or [result]
    return {
        "agent": agent_ref,
        "recorded_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "input": canonical(input),
        "context": canonical(Context.of(context).as_dict()),
        "runs": [
            {
                "run_id": run.run_id,
                "agent": run.agent,
                "parent_run_id": run.parent_run_id,
                "stop_reason": str(run.stop_reason),
            }
            for run in runs
        ],
        "stop_reason": str(result.stop_reason),
        "output": canonical(result.output),
        "trajectory": [step.as_dict() for step in trajectory(events)],
        "tool_results": tool_results(events),
    }


def tool_results(events: list[Any]) -> list[dict[str, Any]]:
    """Each tool call's result, and the context changes it made, for the `recorded` policy.

    A recorded tool does not run during replay, so whatever it wrote to the context must be
    written again from the recording: the changes right after a ToolFinished are its own.
    """
    found: list[dict[str, Any]] = []
    owner: dict[str, Any] | None = None  # the result the next context changes belong to
    for event in events:
        if event.kind == "tool_finished":
            owner = {
                "tool": event.tool,
                "arguments": plain(event.arguments),
                "result": {
                    "kind": str(event.result.kind),
                    "data": plain(event.result.data),
                    "error": event.result.error,
                    "truncated": event.result.truncated,
                    "stop": event.result.stop,
                },
                "context": [],
            }
            found.append(owner)
        elif event.kind == "context_changed" and owner is not None:
            owner["context"].append(
                {
                    "scope": str(event.scope),
                    "key": event.key,
                    "op": str(event.op),
                    "new": plain(event.new),
                }
            )
        elif event.kind != "context_changed":
            owner = None
    return found


async def record_session(
    agent: Agent,
    input: str | list[dict[str, Any]],
    *,
    model: ChatModel,
    path: str | Path,
    context: Context | dict[str, Any] | None = None,
    agent_ref: str | None = None,
    hooks: Sequence[Hook] = (),
) -> tuple[RunResult, Cassette]:
    """Run `agent` live through `model`, and save every model call and tool result."""
    recorder = RecordingModel(model)
    result = await Runner.run(agent, input, model=recorder, context=context, hooks=hooks)
    cassette = recorder.cassette
    cassette.update_info(
        **session_metadata(result, input=input, context=context, agent_ref=agent_ref)
    )
    cassette.save(path)
    return result, cassette
