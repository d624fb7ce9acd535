"""Evaluation of agents: golden suites (`dataset`), scorers, and the harness that runs them."""
