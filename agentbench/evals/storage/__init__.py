"""Where an eval's results are kept: the store's `evals` and `results` tables, the lake, merges.

`results_store` writes and reads evals and their scored results in the trace store (journaled
as each trial finishes, so `--resume` finds them); `lake` writes each eval to a Parquet lake
as well (`run --results parquet://DIR`); `merging` brings shards' stores and lakes back into
one store (`agentbench merge`).
"""
