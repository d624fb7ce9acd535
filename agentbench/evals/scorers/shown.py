"""Scorers of what the model was shown: `model_shown` and `model_not_shown`.

They read the requests the runtime built for the model in this run (system instructions, the
conversation as memory left it, tool results as cut), not the recorded answers. Under replay
that is the evidence a recorded answer cannot mask: a pinned fact that left the prompt, a
dropped turn that came back, a truncation marker that changed. Model calls are counted as
drift counts them: the agent's own calls (summarizer calls made by memory are left out), every
run and every turn of the case in order, from 1; -1 is the last call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import orjson
from pydantic import Field, field_validator

from agentbench.evals.scorers.base import Score, ScoreContext
from agentbench.evals.scorers.picking import check_position, ordinal, pick
from agentbench.evals.scorers.registry import ScorerParams, builtin
from agentbench.evals.scorers.text import clip, quoted

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True)
class ModelCallSeen:
    """One request the agent sent to the model: its number in the case, agent, messages."""

    number: int
    agent: str
    messages: list[dict[str, Any]]

    def text(self, role: Role | None) -> str:
        """The messages of `role` (all when None) as the model read them, one per paragraph."""
        return "\n\n".join(
            message_text(m) for m in self.messages if role is None or m.get("role") == role
        )


def model_calls(events: list[Any]) -> list[ModelCallSeen]:
    """Every agent model request of the case, numbered from 1."""
    requests = [
        e for e in events if getattr(e, "kind", None) == "model_request" and e.purpose == "agent"
    ]
    return [
        ModelCallSeen(number, e.agent, list(e.request.get("messages") or ()))
        for number, e in enumerate(requests, start=1)
    ]


def message_text(message: dict[str, Any]) -> str:
    """A message's text: its content (text parts of a multi-part one) and the tool calls it
    asked for, written `name(arguments)`."""
    content = message.get("content")
    if isinstance(content, list):
        parts = [str(p.get("text", "")) for p in content if isinstance(p, dict)]
        text = "\n".join(parts)
    elif content is None:
        text = ""
    else:
        text = str(content)
    calls = [
        f"{c['function']['name']}({c['function'].get('arguments') or ''})"
        for c in message.get("tool_calls") or ()
        if isinstance(c, dict) and isinstance(c.get("function"), dict)
    ]
    return "\n".join(filter(None, [text, *calls]))


class _ShownParams(ScorerParams):
    shorthand: ClassVar[str | None] = "value"
    value: str | list[str] = Field(description="The text, or list of texts, to look for.")
    call: int | None = Field(
        None,
        description="Which model call of the case: 1 the first, -1 the last (every run and turn "
        "counted in order, as drift numbers them; with agent, that agent's calls). "
        "Default: any call.",
    )
    role: Role | None = Field(
        None, description="Look only in messages of this role (system: the instructions)."
    )
    agent: str | None = Field(None, description="Only model calls made by this agent count.")
    ignore_case: bool = Field(False, description="Search without regard to case.")

    @field_validator("call")
    @classmethod
    def _position(cls, value: int | None) -> int | None:
        return check_position(value)


class _Shown:
    """The selected model calls of one case, and where each text occurs in them."""

    def __init__(self, params: _ShownParams, ctx: ScoreContext) -> None:
        self.params = params
        every = model_calls(ctx.events)
        self.by_agent = [c for c in every if params.agent in (None, c.agent)]
        self.total = len(every)
        self.chosen = pick(self.by_agent, params.call)
        self.wanted = [params.value] if isinstance(params.value, str) else list(params.value)

    def where(self) -> str:
        p = self.params
        role = f"{p.role} messages of " if p.role else ""
        by = f" by agent {p.agent}" if p.agent else ""
        which = "any model call" if p.call is None else f"the {ordinal(p.call)} model call"
        return f"{role}{which}{by}"

    def missing_call(self, name: str) -> Score | None:
        """A failing score when the chosen call does not exist."""
        if self.chosen is not None:
            return None
        made = len(self.by_agent)
        count = f"{made} model call(s)"
        if self.params.agent:
            count += f" by agent {self.params.agent} ({self.total} in all)"
        return Score(
            name,
            0.0,
            False,
            f"expected {self.where()}; the case made {count}",
            {"model_calls": made},
        )

    def calls_showing(self, text: str) -> list[int]:
        """Numbers of the chosen calls whose messages hold `text`."""
        role = self.params.role
        if self.params.ignore_case:
            return [c.number for c in self.chosen or () if text.lower() in c.text(role).lower()]
        return [c.number for c in self.chosen or () if text in c.text(role)]

    def excerpt(self) -> str:
        """The chosen call's (or the last call's) text, cut, for a failing reason."""
        calls = self.chosen or []
        if not calls:
            return ""
        return clip(orjson.dumps(calls[-1].text(self.params.role)).decode(), 300)


@builtin
class ModelShown:
    """The model was shown a text: in a given model call or any, optionally in one role."""

    name = "model_shown"

    class Params(_ShownParams):
        pass

    def __init__(self, params: Params) -> None:
        self.params = params

    async def score(self, ctx: ScoreContext) -> Score:
        shown = _Shown(self.params, ctx)
        if (missing := shown.missing_call(self.name)) is not None:
            return missing
        found = {text: shown.calls_showing(text) for text in shown.wanted}
        absent = [text for text, calls in found.items() if not calls]
        details = {"found_in_calls": found, "missing": absent}
        if not absent:
            listed = _with_calls(found)
            return Score(self.name, 1.0, True, f"{shown.where()} showed {listed}", details)
        value = 1 - len(absent) / len(shown.wanted)
        listed = ", ".join(quoted(t, 60) for t in absent)
        reason = f"{shown.where()} did not show {listed}"
        if shown.params.call is not None:
            reason += f"; it showed: {shown.excerpt()}"
        return Score(self.name, value, False, reason, details)


@builtin
class ModelNotShown:
    """The model was never shown a text: in a given model call or any, optionally one role."""

    name = "model_not_shown"

    class Params(_ShownParams):
        pass

    def __init__(self, params: Params) -> None:
        self.params = params

    async def score(self, ctx: ScoreContext) -> Score:
        shown = _Shown(self.params, ctx)
        if (missing := shown.missing_call(self.name)) is not None:
            return missing
        found = {text: calls for text in shown.wanted if (calls := shown.calls_showing(text))}
        details = {"found_in_calls": found}
        if not found:
            listed = ", ".join(quoted(t, 60) for t in shown.wanted)
            return Score(self.name, 1.0, True, f"{shown.where()} did not show {listed}", details)
        listed = _with_calls(found)
        return Score(
            self.name,
            1 - len(found) / len(shown.wanted),
            False,
            f"expected {shown.where()} not to show it; it showed {listed}",
            details,
        )


def _with_calls(found: dict[str, list[int]]) -> str:
    """`"Lisbon" (call 2, 3)` for each text, with the first calls that showed it."""
    return ", ".join(
        f"{quoted(text, 60)} (call {', '.join(map(str, calls[:5]))})"
        for text, calls in found.items()
    )
