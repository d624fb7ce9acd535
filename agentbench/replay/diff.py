"""Align two trajectories step by step and name the first place where behaviour diverged.

Steps are aligned by signature (difflib over the two sequences), so an inserted tool call
shows as one `extra_step` instead of shifting every later step. Aligned steps whose details
differ are classified: `tool_args_changed`, `tool_result_changed`, `handoff_changed`,
`stop_reason_changed`, `output_changed`, `response_changed` (two live runs whose model answered
differently), `context_changed`, `memory_changed`; unaligned steps are `missing_step` (in the
original only) or `extra_step` (in the new run only); a recorded call the current code
rejects is `tool_args_changed`. Request drift joins as `request_drift` at its model call: found
during replay, or between two stored runs (`request_divergences`). Every list of divergences
is ordered by `by_cause` (cause before consequence), so its first entry is the root cause.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any

from agentbench.replay.drift import Change, around_difference, request_diff
from agentbench.replay.drifted_calls import DriftAt
from agentbench.replay.masked import fits
from agentbench.replay.trajectory import Step, trajectory
from agentbench.trace import _json

DIVERGENCE_CLASSES = (
    "request_drift",
    "tool_args_changed",
    "tool_result_changed",
    "extra_step",
    "missing_step",
    "handoff_changed",
    "stop_reason_changed",
    "output_changed",
    "response_changed",
    "context_changed",
    "memory_changed",
)


@dataclass
class Divergence:
    """One difference between the original and the new trajectory."""

    cls: str
    position: int  # index in the new trajectory (where it would be, for a missing step)
    agent: str
    step: int
    label: str  # one line
    old: Any = None
    new: Any = None
    changes: list[Change] = field(default_factory=list)

    def describe(self, width: int = 76) -> str:
        head = f"step {self.step} ({self.agent}) {self.cls}: {self.label}"
        if self.changes:
            lines = [c.describe(width) for c in self.changes[:6]]
            if len(self.changes) > 6:
                lines.append(f"… and {len(self.changes) - 6} more changes")
            return head + "\n" + "\n".join(f"    {line}" for line in lines)
        if self.cls in ("extra_step", "missing_step"):
            return head
        if isinstance(self.old, dict | list) and isinstance(self.new, dict | list):
            fields = value_changes(self.old, self.new)
            if fields:  # both sides structured: name the fields, not two cut-off dumps
                lines = [c.describe(width) for c in fields[:6]]
                if len(fields) > 6:
                    lines.append(f"… and {len(fields) - 6} more changes")
                return head + "\n" + "\n".join(f"    {line}" for line in lines)
        # Both sides cut around where they first differ, so the change itself shows.
        old, new = around_difference(_dump(self.old), _dump(self.new), width)
        return f"{head}\n    {old[1:-1]} → {new[1:-1]}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "class": self.cls,
            "position": self.position,
            "agent": self.agent,
            "step": self.step,
            "label": self.label,
            "old": self.old,
            "new": self.new,
            "changes": [c.as_dict() for c in self.changes],
        }


def _dump(value: Any) -> str:
    return _json.dumps(value)


def _alike(old: Step, new: Step) -> bool:
    """Equal, or differing only where the recording is masked, or only as the store repairs
    text (a lone surrogate, half an emoji, is U+FFFD in a stored run)."""
    return fits(old.detail, new.detail) or fits(
        _json.storable(old.detail, counted=False), _json.storable(new.detail, counted=False)
    )


def _classify(old: Step, new: Step, position: int) -> Divergence | None:
    if _alike(old, new):
        return None

    def made(cls: str, key: str | None = None) -> Divergence:
        before = old.detail.get(key) if key else old.detail
        after = new.detail.get(key) if key else new.detail
        return Divergence(cls, position, new.agent, new.step, new.label(), before, after)

    if new.kind == "tool_call":
        if old.detail["arguments"] != new.detail["arguments"]:
            return made("tool_args_changed", "arguments")
        return Divergence(
            "tool_result_changed",
            position,
            new.agent,
            new.step,
            new.label(),
            {k: old.detail.get(k) for k in _result_keys(old, new)},
            {k: new.detail.get(k) for k in _result_keys(old, new)},
        )
    if new.kind == "tool_rejected":
        return made("tool_args_changed")
    if new.kind == "handoff":
        return made("handoff_changed")
    if new.kind == "run_end":
        if old.detail["stop_reason"] != new.detail["stop_reason"]:
            return made("stop_reason_changed", "stop_reason")
        return made("output_changed", "output")
    if new.kind == "context":
        return made("context_changed", "new")
    if new.kind == "memory":
        return made("memory_changed")
    if new.kind == "model_call":
        return made("response_changed")
    return None


def _result_keys(old: Step, new: Step) -> list[str]:
    """What a tool call's result is: its kind, its value, a failure's data when it had any, and
    the path a fallback tool took to it."""
    keys = ("result_kind", "result", "data", "fallback")
    return [k for k in keys if k in old.detail or k in new.detail]


def align(original: list[Step], new: list[Step]) -> list[Divergence]:
    """Every difference between two trajectories, in the order of the new one; at one
    position, cause before consequence (see `by_cause`)."""
    found: list[Divergence] = []
    for tag, i1, i2, j1, j2 in _opcodes(original, new):
        if tag == "equal":
            for offset in range(i2 - i1):
                divergence = _classify(original[i1 + offset], new[j1 + offset], j1 + offset)
                if divergence is not None:
                    found.append(divergence)
        else:
            found.extend(_unaligned(original, new, range(i1, i2), range(j1, j2)))
    return by_cause(found)


def _opcodes(original: list[Step], new: list[Step]) -> list[Opcode]:
    """difflib's opcodes, after the steps both runs begin with alike. A run that repeats a
    step (the same search, call after call) matches many ways; difflib prefers the longest
    block, which may hold the run's end and leave its beginning "changed". Runs diverge from a
    common start, so the shared beginning is kept aligned and only the rest is matched."""
    same = 0
    for old_step, new_step in zip(original, new, strict=False):
        if old_step.signature != new_step.signature:
            break
        same += 1
    old_rest = [s.signature for s in original[same:]]
    new_rest = [s.signature for s in new[same:]]
    opcodes = [("equal", 0, same, 0, same)] if same else []
    for tag, i1, i2, j1, j2 in _fewest_unmatched(old_rest, new_rest):
        opcodes.append((tag, i1 + same, i2 + same, j1 + same, j2 + same))
    return opcodes


Opcode = tuple[str, int, int, int, int]


def _fewest_unmatched(old: list[Any], new: list[Any]) -> list[Opcode]:
    """difflib matched from the front and from the back, whichever leaves fewer steps
    unmatched. difflib takes the longest block first, and among equally long ones the
    earliest: a step that moved (memory summarizing one step later) can pull a block out of
    place and leave four steps "missing" and "extra" where two say what happened."""
    forward = difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes()
    n, m = len(old), len(new)
    backward = [
        (tag, n - i2, n - i1, m - j2, m - j1)
        for tag, i1, i2, j1, j2 in reversed(
            difflib.SequenceMatcher(a=old[::-1], b=new[::-1], autojunk=False).get_opcodes()
        )
    ]
    return min(forward, backward, key=_steps_unmatched)  # a tie keeps the forward alignment


def _steps_unmatched(opcodes: list[Opcode]) -> int:
    return sum(i2 - i1 + j2 - j1 for tag, i1, i2, j1, j2 in opcodes if tag != "equal")


def _unaligned(
    original: list[Step], new: list[Step], old_range: range, new_range: range
) -> list[Divergence]:
    """A block the alignment could not match: steps changed in place, missing or extra."""
    pairs = _rejected_pairs(original, new, old_range, new_range)
    found = [_rejected(original[i], new[j], j) for i, j in pairs]
    old_left = [i for i in old_range if i not in {i for i, _ in pairs}]
    new_left = [j for j in new_range if j not in {j for _, j in pairs}]
    paired = min(len(old_left), len(new_left))
    for i, j in zip(old_left[:paired], new_left[:paired], strict=True):
        old, now = original[i], new[j]
        if old.kind == now.kind == "handoff" or old.kind == now.kind == "run_end":
            found.append(
                Divergence(
                    "handoff_changed" if now.kind == "handoff" else "stop_reason_changed",
                    j,
                    now.agent,
                    now.step,
                    now.label(),
                    {"agent": old.agent, **old.detail},
                    {"agent": now.agent, **now.detail},
                )
            )
        else:
            found.append(_unmatched("missing_step", old, j))
            found.append(_unmatched("extra_step", now, j))
    matched = sorted([*pairs, *zip(old_left[:paired], new_left[:paired], strict=True)])
    for i in old_left[paired:]:
        # Where it would be: before the new step matched to the next old step, else at the end.
        at = next((j for old_i, j in matched if old_i > i), new_range.stop)
        found.append(_unmatched("missing_step", original[i], at))
    for j in new_left[paired:]:
        found.append(_unmatched("extra_step", new[j], j))
    return sorted(found, key=lambda d: d.position)


def _rejected_pairs(
    original: list[Step], new: list[Step], old_range: range, new_range: range
) -> list[tuple[int, int]]:
    """A recorded call the current code rejects (a renamed argument, a changed schema) is one
    change of arguments, not a missing call plus an extra rejection: pair each new
    `tool_rejected` with the first unpaired old `tool_call` of the same agent and tool."""
    pairs: list[tuple[int, int]] = []
    used: set[int] = set()
    for j in new_range:
        now = new[j]
        if now.kind != "tool_rejected":
            continue
        i = next(
            (
                i
                for i in old_range
                if i not in used
                and original[i].kind == "tool_call"
                and original[i].agent == now.agent
                and original[i].signature[2] == now.signature[2]
            ),
            None,
        )
        if i is not None:
            used.add(i)
            pairs.append((i, j))
    return pairs


def _rejected(old: Step, now: Step, position: int) -> Divergence:
    return Divergence(
        "tool_args_changed",
        position,
        now.agent,
        now.step,
        f"tool call {now.signature[2]} (now rejected)",
        old.detail.get("arguments"),
        {"rejected": now.detail.get("reason"), "arguments": now.detail.get("arguments")},
    )


# Cause before consequence, for differences at one position and step of one agent: what
# the run did instead (an extra step) and what it no longer did (a missing step, such as a
# warning the next request would have carried), then what the model was shown (context,
# memory), then the request it was sent, then everything that request led to (including
# the steps missing from a model call that was never answered: `_after_its_model_call`).
CAUSE_ORDER = (
    "extra_step",
    "missing_step",
    "context_changed",
    "memory_changed",
    "request_drift",
    # what the model answered to the request, what the run then did, how it ended
    "response_changed",
    "tool_args_changed",
    "tool_result_changed",
    "handoff_changed",
    "output_changed",
    "stop_reason_changed",
)
_RANK = {cls: rank for rank, cls in enumerate(CAUSE_ORDER)}


def cause_rank(divergence: Divergence) -> int:
    """Where a divergence's class stands in `CAUSE_ORDER` (every other class after it)."""
    return _RANK.get(divergence.cls, len(CAUSE_ORDER))


def by_cause(found: list[Divergence]) -> list[Divergence]:
    """Divergences in the one order every report uses, cause before consequence: by
    position in the new trajectory; where several share a position (an old and a new step
    paired in a replaced block, missing steps before a changed one, a drifted request at
    its model call), the earlier step of the run first, then by `CAUSE_ORDER`. Step numbers
    only order steps of one agent's run, so a position shared by several agents is ordered
    by class alone. The first divergence is then the root cause and the rest its downstream
    effects (or later, independent changes)."""
    found = sorted(found, key=lambda d: d.position)
    ordered: list[Divergence] = []
    index = 0
    while index < len(found):
        end = index
        while end < len(found) and found[end].position == found[index].position:
            end += 1
        group = found[index:end]
        if len({d.agent for d in group}) == 1:
            after_call = _after_its_model_call(group)
            group.sort(key=lambda d: (d.step, id(d) in after_call, cause_rank(d)))
        else:
            group.sort(key=cause_rank)
        ordered.extend(group)
        index = end
    return ordered


def _after_its_model_call(group: list[Divergence]) -> set[int]:
    """The missing steps (by id) that came, in the recording, at or after a missing model
    call of their step: what that call would have answered, so downstream of its drifted
    request (strict replay stops at it). A step missing before the call (a warning, a
    memory decision) is the cause of the drift and stays before it. Missing steps keep the
    recording's order within a position, which is what this reads."""
    found: set[int] = set()
    called: set[int] = set()
    for divergence in group:
        if divergence.cls != "missing_step":
            continue
        if isinstance(divergence.old, dict) and divergence.old.get("signature", [None])[0] == (
            "model_call"
        ):
            called.add(divergence.step)
        if divergence.step in called:
            found.add(id(divergence))
    return found


def _unmatched(cls: str, step: Step, position: int) -> Divergence:
    value = {"signature": list(step.signature), **step.detail}
    return Divergence(
        cls,
        position,
        step.agent,
        step.step,
        step.label(),
        value if cls == "missing_step" else None,
        value if cls == "extra_step" else None,
    )


@dataclass(frozen=True)
class CallRequest:
    """The request one model call sent, with the agent, purpose and step it belongs to."""

    agent: str
    purpose: str
    step: int
    request: dict[str, Any]


def request_divergences(
    before: list[CallRequest], after: list[CallRequest], new: list[Step]
) -> list[Divergence]:
    """Two sessions' requests, call by call: the n-th call of each agent (and purpose) in one
    with the n-th in the other. A changed prompt or tool schema changes no step the model's
    answers decide, so without this two runs would look the same. Each request that differs
    (volatile fields aside) is a `request_drift` at its model call in `new`."""
    earlier: dict[tuple[str, str], list[CallRequest]] = {}
    for call in before:
        earlier.setdefault((call.agent, call.purpose), []).append(call)
    seen: dict[tuple[str, str], int] = {}
    found = []
    for number, call in enumerate(after, 1):
        key = (call.agent, call.purpose)
        nth = seen[key] = seen.get(key, 0) + 1
        calls = earlier.get(key, [])
        if nth > len(calls):
            continue  # a call only one side made is already an extra (or missing) step
        changes = request_diff(calls[nth - 1].request, call.request)
        if changes:
            position = _nth_model_call(new, ("model_call", *key), nth)
            label = f"model call #{number}"
            found.append(
                Divergence("request_drift", position, call.agent, call.step, label, changes=changes)
            )
    return found


def _nth_model_call(steps: list[Step], signature: tuple[str, ...], nth: int) -> int:
    positions = [i for i, s in enumerate(steps) if s.signature == signature]
    return positions[nth - 1] if nth <= len(positions) else len(steps)


def with_request_drift(divergences: list[Divergence], drifts: list[Divergence]) -> list[Divergence]:
    """Both lists in one, cause before consequence (`by_cause`): a request drift before
    what its model call answered, but after a step missing before that call."""
    return by_cause([*drifts, *divergences])


def _request_positions(events: list[Any]) -> list[int]:
    """Where each model request of the session was sent, as a position in its trajectory:
    the step that came next. Counted from the events, not from model-call steps, so a
    request that got no answer (strict replay stops at a drifted one) still has its place
    and the calls after it keep theirs, in every turn and run."""
    positions, steps = [], 0
    for event in events:
        if event.kind == "model_request":
            positions.append(steps)
        steps += len(trajectory([event]))
    return positions


def drift_divergences(drifts: list[DriftAt], events: list[Any]) -> list[Divergence]:
    """Each drifted request of a replayed session (its `events`, every turn) as a
    `request_drift` at the model call that sent it, ready to join `align`'s divergences in
    `by_cause`: the replayer and the eval harness place drift the same way."""
    positions = _request_positions(events)
    total = len(trajectory(events))
    return [
        Divergence(
            "request_drift",
            positions[drift.call - 1] if drift.call <= len(positions) else total,
            drift.agent or "?",
            drift.step or 0,
            f"model call #{drift.call}",
            changes=drift.drift.changes,
        )
        for drift in drifts
    ]


def value_changes(old: Any, new: Any, path: str = "") -> list[Change]:
    """Where two JSON values differ, by path (`result.alerts[0].message`)."""
    if isinstance(old, dict) and isinstance(new, dict):
        found: list[Change] = []
        for key in [*old, *(k for k in new if k not in old)]:
            where = f"{path}.{key}" if path else str(key)
            if key not in old:
                found.append(Change(where, "added", new=new[key]))
            elif key not in new:
                found.append(Change(where, "removed", old=old[key]))
            else:
                found.extend(value_changes(old[key], new[key], where))
        return found
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [
            c
            for i, (a, b) in enumerate(zip(old, new, strict=True))
            for c in value_changes(a, b, f"{path}[{i}]")
        ]
    if old != new or type(old) is not type(new):
        return [Change(path or "(value)", "changed", old, new)]
    return []
