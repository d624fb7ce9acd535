"""The `fallback` scorer: which backend answered a call, and why the ones before it did not.

A `FallbackModel` records its path in each response it annotates (`ModelResponse.fallback`:
`answered_by`, and each failed model with its error, status and attempts); a `fallback(...)`
tool records it in its result's `error` (`fell back to mirror after primary: ConnectionError:
…`), which the model never sees. This scorer reads either: by default the model calls of the
case, with `tool:` the calls of that fallback tool. A call no fallback touched was answered by
its first backend: the model it asked, or, for a tool, its first backend (named `""` here,
since the event does not say which).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import Field, field_validator

from agentbench.evals.scorers.base import Score, ScoreContext
from agentbench.evals.scorers.picking import check_position, ordinal, pick
from agentbench.evals.scorers.registry import ScorerParams, builtin
from agentbench.evals.scorers.text import quoted

_TOOL_PATH = "fell back to "


@dataclass(frozen=True)
class FallbackPath:
    """One call's way to its answer."""

    answered_by: str
    failed: list[str]  # backends (models) that failed first, in order
    reasons: str  # their errors, as text

    def describe(self) -> str:
        if not self.failed:
            return f"answered by {self.answered_by or 'its first backend'} (no fallback)"
        return f"answered by {self.answered_by} after {', '.join(self.failed)} failed"


def model_path(event: Any, request_model: str | None) -> FallbackPath:
    """The path of a model call from its response event (and the model it asked)."""
    record = event.fallback
    if record is None:
        return FallbackPath(str(request_model or event.response.model or ""), [], "")
    failures = [f for f in record.get("failed") or () if isinstance(f, dict)]
    reasons = "; ".join(
        f"{f.get('model')}: {f.get('error')}, HTTP {f.get('status_code')}, "
        f"{f.get('attempts')} attempts: {f.get('message')}"
        for f in failures
    )
    failed = [str(f.get("model")) for f in failures]
    return FallbackPath(str(record.get("answered_by")), failed, reasons)


def tool_path(event: Any) -> FallbackPath:
    """The path of a fallback tool's call from its result (`FallbackTool` writes it)."""
    error = event.result.error or ""
    if event.result.kind != "ok":  # "<the failure> (fell back to … after …)"
        at = error.find(f" ({_TOOL_PATH}")
        error = error[at + 2 : -1] if at >= 0 else ""
    path = error
    if not path.startswith(_TOOL_PATH):
        return FallbackPath("", [], "")
    answered_by, _, rest = path.removeprefix(_TOOL_PATH).partition(" after ")
    failed = [part.partition(": ")[0] for part in rest.split("; ") if ": " in part]
    return FallbackPath(answered_by, failed, rest)


@builtin
class FellBack:
    """A call was answered by the named backend (model or tool), after the named ones failed."""

    name = "fallback"

    class Params(ScorerParams):
        shorthand: ClassVar[str | None] = "answered_by"

        answered_by: str = Field(
            description="The model (or, with tool, the backend tool) that answered."
        )
        failed: list[str] | None = Field(
            None,
            description="The models (or backend tools) that failed before it, in order; [] for "
            "none. Default: not checked.",
        )
        because: str | list[str] | None = Field(
            None,
            description="Text, or texts, their failures must mention (e.g. 'HTTP 503', "
            "'ConnectionError').",
        )
        tool: str | None = Field(
            None, description="A fallback(...) tool's name; default: the case's model calls."
        )
        call: int | None = Field(
            None,
            description="Which call: 1 the first, -1 the last. Default: any call (the "
            "expectation holds if one call's path satisfies all of it).",
        )
        agent: str | None = Field(None, description="Only calls made by this agent count.")

        @field_validator("call")
        @classmethod
        def _position(cls, value: int | None) -> int | None:
            return check_position(value)

    def __init__(self, params: Params) -> None:
        self.params = params

    def _paths(self, ctx: ScoreContext) -> list[FallbackPath]:
        p = self.params
        paths: list[FallbackPath] = []
        asked: str | None = None
        for event in ctx.events:
            kind = getattr(event, "kind", None)
            if p.agent not in (None, getattr(event, "agent", None)):
                continue
            if p.tool is not None:
                if kind == "tool_finished" and event.tool == p.tool:
                    paths.append(tool_path(event))
            elif kind == "model_request" and event.purpose == "agent":
                asked = event.request.get("model")
            elif kind == "model_response" and event.purpose == "agent":
                paths.append(model_path(event, asked))
        return paths

    def _problems(self, path: FallbackPath) -> list[str]:
        p = self.params
        problems = []
        if path.answered_by != p.answered_by:
            problems.append(f"{path.describe()}, not by {p.answered_by}")
        if p.failed is not None and path.failed != p.failed:
            expected = ", ".join(p.failed) or "none"
            problems.append(f"{', '.join(path.failed) or 'none'} failed first, not {expected}")
        texts = [p.because] if isinstance(p.because, str) else list(p.because or ())
        missing = [t for t in texts if t not in path.reasons]
        if missing:
            named = ", ".join(quoted(t, 60) for t in missing)
            problems.append(f"the failures do not mention {named}")
        return problems

    async def score(self, ctx: ScoreContext) -> Score:
        p = self.params
        what = f"calls of {p.tool}" if p.tool else "model calls"
        paths = self._paths(ctx)
        chosen = pick(paths, p.call)
        where = "any of the " + what if p.call is None else f"the {ordinal(p.call)} of the {what}"
        if not chosen:
            return Score(self.name, 0.0, False, f"expected {where}; there were {len(paths)}", {})
        verdicts = [(path, self._problems(path)) for path in chosen]
        details = {"calls": len(paths)}
        passing = [path for path, problems in verdicts if not problems]
        if passing:
            return Score(self.name, 1.0, True, f"{where}: {passing[0].describe()}", details)
        problems = verdicts[-1][1]
        return Score(self.name, 0.0, False, f"{where}: {'; '.join(problems)}", details)
