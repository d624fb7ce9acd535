"""The store's DuckDB file: opening it (one writer at a time, readers first), its migrations,
writing and reading rows, Parquet export and import, storage faults, and `traces doctor`."""
