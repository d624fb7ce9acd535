"""Scorers: small checks that turn one scored case into `Score`s with readable reasons.

Built-in types (by name): output_equals, output_contains, output_not_contains, output_regex,
output_json_schema, output_number, tool_called, tool_not_called, tool_result, model_shown,
model_not_shown, trajectory, stop_reason, max_steps, token_budget, cost_budget, latency_budget,
fallback, llm_judge, custom. Build one with
`build_scorer(name, params)`; write your own with `@scorer`.
"""

from agentbench.evals.errors import ScorerConfigError
from agentbench.evals.scorers import (  # noqa: F401 - importing registers the built-in types
    budgets,
    fallbacks,
    judge,
    outcome,
    output_data,
    output_text,
    shown,
    tool_results,
    tool_use,
    trajectory_match,
)
from agentbench.evals.scorers.base import Score, ScoreContext, Scorer, runs_of, score_all
from agentbench.evals.scorers.custom import FunctionScorer, scorer
from agentbench.evals.scorers.registry import (
    SCORERS,
    ScorerParams,
    ScorerType,
    build_scorer,
    register_type,
    scorer_type,
)
from agentbench.evals.scorers.schema import expectation_defs
from agentbench.evals.scorers.trajectory_match import ExpectedStep

__all__ = [
    "SCORERS",
    "ExpectedStep",
    "FunctionScorer",
    "Score",
    "ScoreContext",
    "Scorer",
    "ScorerConfigError",
    "ScorerParams",
    "ScorerType",
    "build_scorer",
    "expectation_defs",
    "register_type",
    "runs_of",
    "score_all",
    "scorer",
    "scorer_type",
]
