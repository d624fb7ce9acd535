"""Evaluation of agents: golden suites (`dataset`), scorers, and the harness that runs them.

These names are what a scorer's author imports; the rest of the package may move:

    from agentbench.evals import Score, ScoreContext, scorer
"""

from agentbench.evals.scorers import Score, ScoreContext, Scorer, scorer

__all__ = ["Score", "ScoreContext", "Scorer", "scorer"]
