"""Running an eval: the harness and where its trials run.

`harness` plans an eval's trials (selection, `--shard`, `--resume`) and scores each;
`case_runner` runs one trial of a case against its cassette or a live model (`boundary_case`
for a boundary target), `case_trial` plans it and settles what it leaves; `executors` run the queued
trials locally, `ray_executor` on Ray (the `ray` extra, imported only when `executor_choice` is
asked for it); `shards` cuts a CI job matrix's part; `outcome_spool` keeps finished trials on disk;
`completion` says whether a stored eval holds every trial it planned; `judging` records and replays
the LLM judge's own model calls.
"""
