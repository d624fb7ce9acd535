"""Memory: keep a long run's conversation within limits without losing what matters.

The seed's three classes decide what goes first. *Pinned* content is never dropped: the system
prompt, the original user request, messages marked pinned (and facts pinned through the run
context, which live in the instructions). *Process* content — tool exchanges and earlier
summaries — is compressed to its conclusions and key data. *Noise* — retries superseded by a
later success, duplicate observations — is dropped, keeping the failure reason of failed
attempts. Only when that is not enough are the oldest remaining units dropped. The most recent
units are compressed last. Every change is reported as a `MemoryDecision`, so a trace shows
exactly what the model did not see; and whole units are kept or removed, so the conversation
stays valid for the API (`conversation.problems`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from agentbench.runtime.conversation import (
    SUMMARY_MARKER,
    Unit,
    is_summary,
    join_units,
    split_units,
)
from agentbench.runtime.summarizers import CallModel, RuleSummarizer, Summarizer
from agentbench.runtime.tokens import estimate_message_tokens, estimate_tokens
from agentbench.runtime.tools import observation_of, truncate_text

FAILED_KINDS = frozenset({"system_error", "rejected"})


@dataclass
class MemoryPolicy:
    """Per-agent limits on what is sent to the model, and how to get under them."""

    max_messages: int | None = None
    max_tokens: int | None = None
    keep_recent: int = 4  # units (a tool exchange is one unit) compressed only as a last resort
    tool_result_chars: int = 2_000
    summary_line_tokens: int = 40  # per result head in a rule summary (tokens, so CJK-sane)
    summarizer: Summarizer = field(default_factory=RuleSummarizer)
    estimator: Callable[[dict[str, Any]], int] = estimate_message_tokens


@dataclass
class Decision:
    action: str  # "dropped" | "summarized" | "truncated"
    reason: str
    messages: int
    tokens_before: int
    tokens_after: int
    summary: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)


class Memory:
    """One run's memory: what is pinned, how calls ended, and the token bookkeeping."""

    def __init__(self, policy: MemoryPolicy) -> None:
        self.policy = policy
        # Pinned message dicts by id(), each kept with its id so no new dict can inherit it.
        self.pinned: dict[int, dict[str, Any]] = {}
        self.outcomes: dict[str, str] = {}  # tool_call_id -> result kind or "rejected"
        # Tool messages already truncated or short enough, by id. The message is kept with its
        # id: a dict compaction let go of could otherwise hand its id to a new, uncut message.
        self._checked: dict[int, dict[str, Any]] = {}
        self._reported_tokens: int | None = None  # prompt tokens the model last reported
        self._reported_at: int = 0  # how many messages that report covered
        # The list `prepare` last returned and its length then: the run sends it and only
        # appends to it, and every request of the run shares it (`MessageView`).
        self._sent: tuple[list[dict[str, Any]], int] | None = None

    def pin(self, message: dict[str, Any]) -> None:
        self.pinned[id(message)] = message

    def note_outcome(self, call_id: str, kind: str) -> None:
        self.outcomes[call_id] = kind

    def observe_usage(self, messages_sent: int, prompt_tokens: int) -> None:
        """The model reported `prompt_tokens` for a request holding `messages_sent` messages."""
        if prompt_tokens > 0:
            self._reported_tokens, self._reported_at = prompt_tokens, messages_sent

    # -- measuring -----------------------------------------------------------------------
    def estimate(self, messages: list[dict[str, Any]], system_tokens: int) -> int:
        """Tokens of the next request: the last reported usage plus estimates of new messages."""
        estimator = self.policy.estimator
        if self._reported_tokens is not None and self._reported_at <= len(messages):
            return self._reported_tokens + sum(estimator(m) for m in messages[self._reported_at :])
        return system_tokens + sum(estimator(m) for m in messages)

    def _over(self, messages: list[dict[str, Any]], tokens: int) -> bool:
        policy = self.policy
        return (policy.max_messages is not None and len(messages) > policy.max_messages) or (
            policy.max_tokens is not None and tokens > policy.max_tokens
        )

    def _fresh_estimate(self, messages: list[dict[str, Any]], system_tokens: int) -> int:
        return system_tokens + sum(self.policy.estimator(m) for m in messages)

    # -- the policy ----------------------------------------------------------------------
    async def prepare(
        self, messages: list[dict[str, Any]], system_tokens: int, call_model: CallModel
    ) -> tuple[list[dict[str, Any]], list[Decision]]:
        """Return the conversation to send (maybe compacted) and what was changed.

        The same list comes back when nothing is compacted. A list this returned before may
        have messages appended since then cut in place (no request holds those yet); any
        other list is never changed.
        """
        decisions: list[Decision] = []
        messages = self._truncate_tool_results(messages, system_tokens, decisions)
        tokens = self.estimate(messages, system_tokens)
        if not self._over(messages, tokens):
            self._sent = (messages, len(messages))
            return messages, decisions
        # The model's last report no longer describes this conversation.
        self._reported_tokens = None
        units = split_units(messages)
        for protect in range(max(self.policy.keep_recent, 1), 0, -1):
            units = self._drop_noise(units, protect, system_tokens, decisions)
            if not self._over(
                join_units(units), self._fresh_estimate(join_units(units), system_tokens)
            ):
                break
            units = await self._summarize(units, protect, system_tokens, decisions, call_model)
            if not self._over(
                join_units(units), self._fresh_estimate(join_units(units), system_tokens)
            ):
                break
            units = self._drop_oldest(units, protect, system_tokens, decisions)
            if not self._over(
                join_units(units), self._fresh_estimate(join_units(units), system_tokens)
            ):
                break
        compacted = join_units(units)
        self._sent = (compacted, len(compacted))
        return compacted, decisions

    def _is_pinned(self, unit: Unit, index: int, first_user: int | None) -> bool:
        return index == first_user or any(id(m) in self.pinned for m in unit.messages)

    def _movable(self, units: list[Unit], protect: int) -> list[int]:
        """Indices of units that may be compressed: not pinned, not among the recent ones."""
        first_user = next((i for i, u in enumerate(units) if u.kind == "user"), None)
        cutoff = max(len(units) - protect, 0)
        return [i for i in range(cutoff) if not self._is_pinned(units[i], i, first_user)]

    def _truncate_tool_results(
        self, messages: list[dict[str, Any]], system_tokens: int, decisions: list[Decision]
    ) -> list[dict[str, Any]]:
        limit = self.policy.tool_result_chars
        # What the list returned last time held was checked then; the rest is new. New
        # messages of that list were never sent, so a cut one replaces its original in
        # place: every request of the run keeps sharing one list. Any other list is copied
        # before its first cut (the caller's list is left as it was).
        sent = self._sent
        own = sent is not None and sent[0] is messages and len(messages) >= sent[1]
        start = sent[1] if own and sent is not None else 0
        out: list[dict[str, Any]] | None = messages if own else None
        cut: list[str] = []
        before = None
        for index in range(start, len(messages)):
            message = messages[index]
            if message.get("role") != "tool" or id(message) in self._checked:
                continue
            content = message.get("content")
            text, truncated = (
                truncate_text(content, limit) if isinstance(content, str) else ("", False)
            )
            if truncated:
                before = (
                    before if before is not None else self._fresh_estimate(messages, system_tokens)
                )
                # A new dict: whoever holds the original (the caller, a trace) keeps it whole.
                message = {**message, "content": text}
                if out is None:
                    out = list(messages)
                out[index] = message
                cut.append(message["tool_call_id"])
            self._checked[id(message)] = message
        out = messages if out is None else out
        if cut:
            decisions.append(
                Decision(
                    "truncated",
                    f"tool results longer than {limit:,} chars",
                    len(cut),
                    before or 0,
                    self._fresh_estimate(out, system_tokens),
                    detail={"tool_call_ids": cut},
                )
            )
        return out

    def _call_keys(self, unit: Unit) -> list[tuple[str, str, str]]:
        """(tool, canonical arguments, observation) per call; repeat warnings do not count."""
        results = {m["tool_call_id"]: str(m.get("content")) for m in unit.messages[1:]}
        return [
            (
                c["function"]["name"],
                _canonical(c["function"]["arguments"]),
                observation_of(results.get(c["id"], "")),
            )
            for c in unit.messages[0]["tool_calls"]
        ]

    def _noise_reason(self, units: list[Unit], index: int) -> str | None:
        """Why a tool exchange is noise: superseded by a later success, or seen again later."""
        unit = units[index]
        if unit.kind != "tool_group":
            return None
        calls = unit.messages[0]["tool_calls"]
        later = [u for u in units[index + 1 :] if u.kind == "tool_group"]
        if all(self.outcomes.get(c["id"]) in FAILED_KINDS for c in calls):
            names = {c["function"]["name"] for c in calls}
            if any(
                c["function"]["name"] in names and self.outcomes.get(c["id"]) == "ok"
                for u in later
                for c in u.messages[0]["tool_calls"]
            ):
                return "superseded retry"
        if unit.messages[0].get("content"):
            return None  # the model's own reasoning rides along: not a pure duplicate
        seen_later = {key for u in later for key in self._call_keys(u)}
        if all(key in seen_later for key in self._call_keys(unit)):
            return "duplicate observation"  # the newer copy is kept
        return None

    def _drop_noise(
        self, units: list[Unit], protect: int, system_tokens: int, decisions: list[Decision]
    ) -> list[Unit]:
        movable = set(self._movable(units, protect))
        kept: list[Unit] = []
        notes: list[str] = []
        dropped: dict[str, int] = {}
        before = self._fresh_estimate(join_units(units), system_tokens)
        for index, unit in enumerate(units):
            reason = self._noise_reason(units, index) if index in movable else None
            if reason is None:
                kept.append(unit)
                continue
            dropped[reason] = dropped.get(reason, 0) + len(unit.messages)
            if reason == "superseded retry":
                # Keep why the attempt failed: it may matter to what the model tries next.
                notes.extend(
                    f"{line} (failed attempt, later retried)" for line in self._lines(unit)
                )
                if not kept or kept[-1].kind != "summary":
                    kept.append(Unit("summary", [_summary_message([])]))
                kept[-1] = _extend_summary(kept[-1], notes)
                notes = []
        after = self._fresh_estimate(join_units(kept), system_tokens)
        for reason, count in dropped.items():
            decisions.append(Decision("dropped", reason, count, before, after))
        return kept

    async def _summarize(
        self,
        units: list[Unit],
        protect: int,
        system_tokens: int,
        decisions: list[Decision],
        call_model: CallModel,
    ) -> list[Unit]:
        movable = set(self._movable(units, protect))
        process = {i for i in movable if units[i].kind in ("tool_group", "summary")}
        out: list[Unit] = []
        block: list[Unit] = []
        before = self._fresh_estimate(join_units(units), system_tokens)
        summaries: list[tuple[int, str, dict[str, Any]]] = []

        async def flush() -> None:
            if len(block) == 1 and block[0].kind == "summary":
                out.append(block[0])  # already as short as the rules make it
            elif block:
                lines = [line for unit in block for line in self._lines(unit)]
                text, detail = await self._write_summary(lines, call_model)
                out.append(Unit("summary", [_summary_message([], text)]))
                summaries.append((sum(len(u.messages) for u in block), text, detail))
            block.clear()

        for index, unit in enumerate(units):
            if index in process:
                block.append(unit)
                continue
            await flush()
            out.append(unit)
        await flush()
        after = self._fresh_estimate(join_units(out), system_tokens)
        for count, text, detail in summaries:
            decisions.append(
                Decision(
                    "summarized",
                    "process content over the limit",
                    count,
                    before,
                    after,
                    text,
                    detail,
                )
            )
        return out

    async def _write_summary(
        self, lines: list[str], call_model: CallModel
    ) -> tuple[str, dict[str, Any]]:
        try:
            return await self.policy.summarizer.summarize(lines, call_model), {}
        except Exception as exc:  # a failing summarizer must not lose the facts
            text = await RuleSummarizer().summarize(lines, call_model)
            return text, {"summarizer_error": f"{type(exc).__name__}: {exc}"}

    def _drop_oldest(
        self, units: list[Unit], protect: int, system_tokens: int, decisions: list[Decision]
    ) -> list[Unit]:
        before = self._fresh_estimate(join_units(units), system_tokens)
        movable = self._movable(units, protect)
        drop: set[int] = set()
        for index in movable:
            remaining = [u for i, u in enumerate(units) if i not in drop]
            if not self._over(
                join_units(remaining), self._fresh_estimate(join_units(remaining), system_tokens)
            ):
                break
            drop.add(index)
        if not drop:
            return units
        kept = [u for i, u in enumerate(units) if i not in drop]
        decisions.append(
            Decision(
                "dropped",
                "oldest content over the limit",
                sum(len(units[i].messages) for i in drop),
                before,
                self._fresh_estimate(join_units(kept), system_tokens),
                detail={
                    "roles": [units[i].messages[0].get("role") for i in sorted(drop)],
                    "units": sorted(drop),  # which: the oldest, or (a bug) the newest
                },
            )
        )
        return kept

    def _lines(self, unit: Unit) -> list[str]:
        """The rule-based facts of one unit: each call, its outcome and the head of its result."""
        width = self.policy.summary_line_tokens
        if unit.kind == "summary":
            content = unit.messages[0].get("content", "")
            return [
                ln[2:] if ln.startswith("- ") else ln
                for ln in content.splitlines()[1:]
                if ln.strip()
            ]
        if unit.kind != "tool_group":
            return [
                f"{unit.messages[0].get('role')}: {_head(unit.messages[0].get('content'), width)}"
            ]
        head = unit.messages[0]
        lines = [f"note: {_head(head['content'], width)}"] if head.get("content") else []
        results = {m["tool_call_id"]: m.get("content") for m in unit.messages[1:]}
        for call in head["tool_calls"]:
            fn = call["function"]
            kind = self.outcomes.get(call["id"], "ok")
            result = str(results.get(call["id"]) or "").removeprefix(f"[{kind}] ")
            lines.append(f"{fn['name']}({fn['arguments']}) → {kind}: {_head(result, width)}")
        return lines


def _canonical(arguments: str) -> str:
    try:
        return orjson.dumps(orjson.loads(arguments), option=orjson.OPT_SORT_KEYS).decode()
    except orjson.JSONDecodeError:
        return arguments


def _head(content: Any, max_tokens: int) -> str:
    """The start of `content`, at most about `max_tokens` tokens, whitespace collapsed."""
    text = content if isinstance(content, str) else orjson.dumps(content).decode()
    text = " ".join(text.split())
    if estimate_tokens(text) <= max_tokens:
        return text
    cut = len(text)
    while cut > 1 and estimate_tokens(text[:cut]) > max_tokens:
        cut = int(cut * 0.8)
    return text[:cut] + "…"


def _summary_message(lines: list[str], text: str | None = None) -> dict[str, Any]:
    body = text if text is not None else "\n".join(f"- {line}" for line in lines)
    return {"role": "assistant", "content": f"{SUMMARY_MARKER}\n{body}".rstrip()}


def _extend_summary(unit: Unit, lines: list[str]) -> Unit:
    existing = unit.messages[0]["content"]
    extra = "\n".join(f"- {line}" for line in lines)
    return Unit("summary", [{"role": "assistant", "content": f"{existing}\n{extra}".rstrip()}])


__all__ = ["Decision", "Memory", "MemoryPolicy", "is_summary"]
