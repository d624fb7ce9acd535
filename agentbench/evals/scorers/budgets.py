"""Budget scorers: model calls (`max_steps`), tokens, cost and latency of a whole case.

Over budget, the value is budget ÷ actual (how far over, as partial credit), so a report can
tell "a little over" from "ten times over". A latency budget is judged only where the model was
called live: in a replayed case a model call takes microseconds, so the case's time is this
machine's (how loaded it is), and a busy CI runner must not fail a case the code did not
change — the same rule the comparison applies to latency between evals.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any, ClassVar

from pydantic import Field, model_validator

from agentbench.evals.scorers.base import Score, ScoreContext
from agentbench.evals.scorers.registry import ScorerParams, builtin


def _within(
    name: str, actual: float, budget: float, used: str, limit: str, details: dict[str, Any]
) -> Score:
    """`used` and `limit` as shown in the reason: "4 model calls", "3"."""
    if actual <= budget:
        return Score(name, 1.0, True, f"{used} (max {limit})", details)
    return Score(name, budget / actual, False, f"{used}; the budget is {limit}", details)


@builtin
class MaxSteps:
    """At most so many model calls over every run of the case (and per run); at least `min`."""

    name = "max_steps"

    class Params(ScorerParams):
        shorthand: ClassVar[str | None] = "max"
        max: int = Field(ge=0, description="Most model calls allowed in the whole case.")
        per_run: int | None = Field(
            None, ge=0, description="Most model calls allowed in any one run (agent)."
        )
        min: int | None = Field(
            None,
            ge=0,
            description="Fewest model calls expected in the whole case (min = max: exactly).",
        )

        @model_validator(mode="after")
        def _ordered(self) -> MaxSteps.Params:
            if self.min is not None and self.min > self.max:
                raise ValueError(f"min ({self.min}) is more than max ({self.max})")
            return self

    def __init__(self, params: Params) -> None:
        self.params = params

    async def score(self, ctx: ScoreContext) -> Score:
        per_run: Counter[str] = Counter()
        agent_of: dict[str, str] = {}
        for event in ctx.events:
            if event.kind == "model_response" and event.purpose == "agent":
                per_run[event.run_id] += 1
                agent_of[event.run_id] = event.agent
        total = sum(per_run.values())
        details = {"model_calls": total, "per_run": dict(per_run)}
        limit = self.params.per_run
        if limit is not None and per_run:
            run_id, most = per_run.most_common(1)[0]
            if most > limit:
                return Score(
                    self.name,
                    limit / most,
                    False,
                    f"agent {agent_of[run_id]} made {most} model calls in one run; "
                    f"at most {limit} allowed per run",
                    details,
                )
        fewest = self.params.min
        if fewest is not None and total < fewest:
            return Score(
                self.name,
                total / fewest,
                False,
                f"{total} model calls; at least {fewest} expected",
                details,
            )
        return _within(
            self.name, total, self.params.max, f"{total} model calls", str(self.params.max), details
        )


@builtin
class TokenBudget:
    """Total tokens (and optionally input or output tokens) stay within a budget."""

    name = "token_budget"

    class Params(ScorerParams):
        shorthand: ClassVar[str | None] = "max_tokens"
        max_tokens: int | None = Field(None, ge=0, description="Most input + output tokens.")
        max_input_tokens: int | None = Field(None, ge=0, description="Most input tokens.")
        max_output_tokens: int | None = Field(None, ge=0, description="Most output tokens.")

        @model_validator(mode="after")
        def _some_limit(self) -> TokenBudget.Params:
            if (self.max_tokens, self.max_input_tokens, self.max_output_tokens) == (None,) * 3:
                raise ValueError("give max_tokens, max_input_tokens or max_output_tokens")
            return self

    def __init__(self, params: Params) -> None:
        self.params = params

    async def score(self, ctx: ScoreContext) -> Score:
        usage = ctx.usage
        checks = [
            ("tokens", usage.total_tokens, self.params.max_tokens),
            ("input tokens", usage.input_tokens, self.params.max_input_tokens),
            ("output tokens", usage.output_tokens, self.params.max_output_tokens),
        ]
        details = {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens}
        over = [
            (what, used, limit)
            for what, used, limit in checks
            if limit is not None and used > limit
        ]
        if over:
            what, used, limit = over[0]
            return Score(
                self.name,
                min(limit / used for _, used, limit in over),
                False,
                f"{used:,} {what} used; the budget is {limit:,}",
                details,
            )
        shown = ", ".join(
            f"{used:,} {what} (max {limit:,})" for what, used, limit in checks if limit is not None
        )
        return Score(self.name, 1.0, True, f"{shown}: within the budget", details)


@builtin
class CostBudget:
    """The case cost at most so many US dollars (needs the model's pricing)."""

    name = "cost_budget"

    class Params(ScorerParams):
        shorthand: ClassVar[str | None] = "max_usd"
        max_usd: float = Field(ge=0, description="Most US dollars the case may cost.")

    def __init__(self, params: Params) -> None:
        self.params = params

    async def score(self, ctx: ScoreContext) -> Score:
        if ctx.cost_usd is None:
            return Score.failed_to_score(
                self.name,
                "the cost is unknown: the suite gives no pricing for the model "
                "(set model.pricing: {input_per_mtok, output_per_mtok} in suite.yaml)",
            )
        cost, limit = ctx.cost_usd, self.params.max_usd
        return _within(
            self.name,
            cost,
            limit,
            f"the case cost ${cost:.4f}",
            f"${limit:.4f}",
            {"cost_usd": cost},
        )


def percentile(values: list[float], p: float) -> float:
    """The nearest-rank percentile `p` (0 < p ≤ 100) of `values`."""
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


@builtin
class LatencyBudget:
    """The case's wall time, and optionally each model call's latency, stay within budgets."""

    name = "latency_budget"

    class Params(ScorerParams):
        shorthand: ClassVar[str | None] = "max_ms"
        max_ms: float | None = Field(None, gt=0, description="Most milliseconds for the case.")
        per_call_ms: float | None = Field(
            None, gt=0, description="Most milliseconds for a model call (at `percentile`)."
        )
        percentile: float = Field(
            100,
            gt=0,
            le=100,
            description="Which percentile of model-call latency must meet "
            "per_call_ms (100: every call; 95: p95).",
        )

        @model_validator(mode="after")
        def _some_limit(self) -> LatencyBudget.Params:
            if self.max_ms is None and self.per_call_ms is None:
                raise ValueError("give max_ms (the case) or per_call_ms (each model call)")
            return self

    def __init__(self, params: Params) -> None:
        self.params = params

    async def score(self, ctx: ScoreContext) -> Score:
        p = self.params
        latencies = [e.latency_ms for e in ctx.events if e.kind == "model_response"]
        details: dict[str, Any] = {"duration_ms": ctx.duration_ms, "model_calls": len(latencies)}
        if ctx.replayed:
            details["judged"] = False
            return Score(
                self.name,
                1.0,
                True,
                f"not judged: the model calls were replayed, so the case's "
                f"{ctx.duration_ms:,.0f} ms measure this machine, not the agent; latency "
                "budgets are judged in --live runs",
                details,
            )
        values: list[tuple[str, float, float]] = []
        if p.max_ms is not None:
            values.append((f"the case took {ctx.duration_ms:,.0f} ms", ctx.duration_ms, p.max_ms))
        if p.per_call_ms is not None and latencies:
            at = percentile(latencies, p.percentile)
            which = "slowest" if p.percentile == 100 else f"p{p.percentile:g}"
            details[f"{which}_call_ms"] = at
            values.append((f"{which} model call took {at:,.0f} ms", at, p.per_call_ms))
        over = [(what, actual, limit) for what, actual, limit in values if actual > limit]
        if over:
            text = "; ".join(f"{what}, over the {limit:,.0f} ms budget" for what, _, limit in over)
            return Score(
                self.name, min(limit / actual for _, actual, limit in over), False, text, details
            )
        text = "; ".join(f"{what} (max {limit:,.0f} ms)" for what, _, limit in values)
        return Score(self.name, 1.0, True, text or "no model calls to time", details)
