"""Built-in tools with real safety boundaries: a Python sandbox, read-only SQL, a calculator.

Users import them from `agentbench.tools`; the modules here are the implementations, one job
each: `sandbox` (the tool and its outcome), `_sandbox_process` (supervising the process),
`_sandbox_launcher` (the isolation itself), `sql_guard` (deciding whether a query is safe; its
parts are the `_sql_catalog`, `_sql_tree`, `_sql_calls`, `_sql_vetting` and `_sql_refusal`
modules), `sql` (running it with a row limit and a timeout), and `calculator`.
"""
