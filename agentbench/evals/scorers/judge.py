"""The `llm_judge` scorer: a model grades the final output against a rubric.

It builds one chat-completions request (deterministic for the same case, so a recorded judge
call replays) asking for a JSON verdict `{"score": 0..1, "reason": "..."}`, sends it through
`ctx.judge`, and parses the answer tolerantly (code fences, prose around the JSON, a score
written as text, out of 10 or as a percentage — each reading is noted in the reason). It
records nothing itself: the harness hands in a `RecordingModel` or `ReplayModel` as the judge,
so every judge call lands in a cassette and re-scoring replays it.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from pydantic import Field

from agentbench.evals.scorers.base import Score, ScoreContext
from agentbench.evals.scorers.output_data import parse_json_output
from agentbench.evals.scorers.registry import ScorerParams, builtin
from agentbench.evals.scorers.text import brief, clip, output_text

SYSTEM_PROMPT = (
    "You grade the answer of an AI assistant against a rubric. Judge only what the rubric "
    "asks. Reply with one JSON object and nothing else: "
    '{"score": <a number from 0 to 1>, "reason": "<one or two sentences>"}.'
)
_SCORE_IN_TEXT = re.compile(r"score\W{0,4}(\d+(?:\.\d+)?|\.\d+)", re.IGNORECASE)


@builtin
class LLMJudge:
    """A judge model scores the final output against a rubric (0 to 1)."""

    name = "llm_judge"

    class Params(ScorerParams):
        shorthand: ClassVar[str | None] = "rubric"
        rubric: str = Field(description="What a good answer does, in plain words.")
        pass_threshold: float = Field(
            0.7, ge=0, le=1, description="The judge's score at or above which the case passes."
        )
        model: str | None = Field(
            None, description="Model name sent in the request (default: the judge model's own)."
        )
        include_tools: bool = Field(
            True, description="Show the judge the tool calls and their results."
        )

    def __init__(self, params: Params) -> None:
        self.params = params

    def request(self, ctx: ScoreContext, model_name: str) -> dict[str, Any]:
        """The chat-completions request body sent to the judge."""
        parts = [f"Rubric:\n{self.params.rubric.strip()}", f"Input:\n{render_input(ctx.input)}"]
        if self.params.include_tools:
            parts.append(f"Tool calls:\n{render_tools(ctx)}")
        parts.append(f"Final answer:\n{output_text(ctx.output) or '(no answer)'}")
        return {
            "model": self.params.model or model_name,
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": "\n\n".join(parts)},
            ],
            "temperature": 0,
        }

    async def score(self, ctx: ScoreContext) -> Score:
        judge = ctx.judge
        if judge is None:
            return Score.failed_to_score(
                self.name,
                "no judge model is configured: set judge: MODEL in suite.yaml or give the "
                "harness a judge model",
            )
        body = self.request(ctx, judge.name)
        try:
            response = await judge.complete(body)
        except Exception as exc:
            return Score.failed_to_score(
                self.name, f"the judge model {body['model']} failed: {type(exc).__name__}: {exc}"
            )
        text = response.text or ""
        verdict = parse_verdict(text)
        details = {"model": body["model"], "answer": clip(text, 2000)}
        if verdict is None:
            return Score.failed_to_score(
                self.name,
                f"the judge's answer has no score (expected JSON like "
                f'{{"score": 0.8, "reason": "..."}}): {brief(clip(text, 200))}',
                **details,
            )
        score, reason, note = verdict
        threshold = self.params.pass_threshold
        passed = score >= threshold
        comparison = "≥" if passed else "<"
        noted = f" ({note})" if note else ""
        return Score(
            self.name,
            score,
            passed,
            f"judge score {score:.2f} {comparison} {threshold:g}{noted}: "
            f"{reason or 'no reason given'}",
            {**details, "judge_score": score, "judge_reason": reason},
        )


def parse_verdict(text: str) -> tuple[float, str, str] | None:
    """(score in 0..1, reason, note on how it was read) from a judge's answer, or None."""
    note = ""
    try:
        data, how = parse_json_output(text)
        note = how or ""
    except ValueError:
        data = None
    raw: Any = None
    reason = ""
    if isinstance(data, int | float) and not isinstance(data, bool):
        raw = data
    elif isinstance(data, dict):
        raw = data.get("score", data.get("rating"))
        if raw is None and isinstance(data.get("passed", data.get("pass")), bool):
            raw = 1.0 if data.get("passed", data.get("pass")) else 0.0
        reason = str(data.get("reason") or data.get("explanation") or "")
    if raw is None:
        found = _SCORE_IN_TEXT.search(text)
        if found is None:
            return None
        raw, note, reason = found.group(1), "score read from prose", reason or clip(text, 300)
    try:
        score = float(raw)
    except (TypeError, ValueError):
        return None
    score, scale = _to_unit(score)
    return score, reason.strip(), "; ".join(n for n in (note, scale) if n)


def _to_unit(score: float) -> tuple[float, str]:
    if 0.0 <= score <= 1.0:
        return score, ""
    if 1.0 < score <= 10.0:
        return score / 10.0, f"read {score:g} as out of 10"
    if 10.0 < score <= 100.0:
        return score / 100.0, f"read {score:g} as a percentage"
    return min(max(score, 0.0), 1.0), f"clamped {score:g} to 0..1"


def render_input(value: Any) -> str:
    """The case input as the judge reads it: text, chat messages, or several user turns."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(m, dict) and "role" in m for m in value):
        return "\n".join(f"{m['role']}: {output_text(m.get('content'))}" for m in value)
    if isinstance(value, list):
        return "\n".join(f"Turn {n}: {render_input(turn)}" for n, turn in enumerate(value, 1))
    return output_text(value)


def render_tools(ctx: ScoreContext) -> str:
    lines = [
        f"{n}. {s.agent} called {s.signature[2]} {brief(s.detail['arguments'], 300)} → "
        f"{s.detail['result_kind']}: {brief(s.detail['result'], 300)}"
        for n, s in enumerate((s for s in ctx.steps if s.kind == "tool_call"), 1)
    ]
    return "\n".join(lines) or "(none)"
