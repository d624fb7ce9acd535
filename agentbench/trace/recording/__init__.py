"""Getting a run's rows into the store: this process's journal and background ingest, or a
recording process that the run's events are sent to encoded, and what this process learns of
their secrets meanwhile."""
