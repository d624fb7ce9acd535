"""Record a session into a cassette, with what replay needs to compare against it later.

Besides the model interactions, a recorded cassette keeps (under `metadata.agentbench`) the
session's input and context, its runs, stop reason and output, the trajectory of steps, and
every tool result — so a cassette alone is enough to replay, to use `recorded` tool policies,
and to report where a new version diverged. A session of several user turns (metadata `turns`
> 1, `input` the list of turns) continues each turn from the previous one's conversation and
context; `continue_conversation` is that rule, shared by the eval harness and replay.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agentbench.replay.cassette import Cassette, CassetteError
from agentbench.replay.models import RecordingModel
from agentbench.replay.trajectory import canonical, plain, trajectory
from agentbench.runtime.agent import Agent
from agentbench.runtime.context import Context
from agentbench.runtime.events import Hook
from agentbench.runtime.models import ChatModel
from agentbench.runtime.orchestration import dialogue
from agentbench.runtime.run_state import RunResult
from agentbench.runtime.runner import Runner

Turn = str | list[dict[str, Any]]  # one user turn: text, or chat messages


def continue_conversation(previous: RunResult | None, turn: Turn) -> Turn:
    """The input of the next user turn: the dialogue so far (the previous turn's messages
    without tool exchanges, its final answer included), then the new turn. The first turn
    starts from itself. The context continues separately, as `previous.context`."""
    if previous is None:
        return turn
    messages = dialogue(previous.messages)
    if previous.output is not None and (not messages or messages[-1]["role"] != "assistant"):
        messages.append({"role": "assistant", "content": str(previous.output)})
    extra = [{"role": "user", "content": turn}] if isinstance(turn, str) else list(turn)
    return [*messages, *extra]


def recorded_turns(info: dict[str, Any], where: str = "the cassette") -> list[Turn]:
    """The user turns of a recorded session: its `input` as one turn (text, or chat
    messages), or, when `input` is a list of turns (texts or message lists), each of them.
    The shape decides, not only the `turns` count: a cassette written without that count
    (by hand, or by an older agentbench) would otherwise send its list of texts to the
    runner as if it were one turn's messages. A shape that fits neither, or disagrees with
    `turns`, is refused, naming `where`."""
    value = info.get("input")
    field = f"{where}: metadata.agentbench.input"
    if isinstance(value, list) and value and all(isinstance(v, str | list) for v in value):
        turns = [
            _messages(v, f"{field}[{i}]") if isinstance(v, list) else v for i, v in enumerate(value)
        ]
    elif isinstance(value, list):
        turns = [_messages(value, field)]
    else:
        turns = [value if isinstance(value, str) else str(value)]
    count = info.get("turns")
    if count is not None and (not isinstance(count, int) or count != len(turns)):
        raise CassetteError(
            f"{where}: metadata.agentbench.turns is {count!r} but input holds {len(turns)} "
            "user turn(s) (a list of texts or message lists is one turn each; a list of chat "
            "messages is one turn)"
        )
    return turns


def _messages(value: list[Any], field: str) -> list[dict[str, Any]]:
    """One turn given as chat messages: each a mapping with a role."""
    for index, message in enumerate(value):
        if not (isinstance(message, dict) and isinstance(message.get("role"), str)):
            raise CassetteError(
                f"{field}[{index}]: expected a chat message (a mapping with a role), got "
                f"{type(message).__name__} {str(message)[:60]!r}"
            )
    return value


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


def conversation_metadata(
    turns: Sequence[RunResult],
    *,
    inputs: Sequence[Turn],
    context: Context | dict[str, Any] | None = None,
    agent_ref: str | None = None,
) -> dict[str, Any]:
    """What a cassette records about a session of one or more user turns (one RunResult
    each): the first turn's runs, and the trajectory and tool results of every turn, so replay
    and `recorded` tools see all of them."""
    first = inputs[0] if len(inputs) == 1 else list(inputs)
    metadata = session_metadata(turns[0], input=first, context=context, agent_ref=agent_ref)
    every_turn = [session_metadata(t, input=None) for t in turns]
    metadata["trajectory"] = [s for m in every_turn for s in m["trajectory"]]
    metadata["tool_results"] = [r for m in every_turn for r in m["tool_results"]]
    metadata["turns"] = len(inputs)
    metadata["output"] = every_turn[-1]["output"]
    metadata["stop_reason"] = every_turn[-1]["stop_reason"]
    return metadata


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
