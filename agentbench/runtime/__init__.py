"""The agent runtime: tools, models, the loop and its events. Knows nothing of traces or evals."""
