"""Evaluation of agents, a room per concern: golden suites and their cases (`suites/`), running
them (`running/`: the harness, executors, shards), comparing evals and the verdict
(`comparing/`), a suite across commits (`history/`: history, bisect), where results are kept
(`storage/`: the results store, the lake, merging), and the scorers (`scorers/`).

These names are what a scorer's author imports; the rest of the package may move:

    from agentbench.evals import Score, ScoreContext, scorer
"""

from agentbench.evals.scorers import Score, ScoreContext, Scorer, scorer

__all__ = ["Score", "ScoreContext", "Scorer", "scorer"]
