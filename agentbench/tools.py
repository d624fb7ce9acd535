"""The built-in tools users hand to their agents, with real safety boundaries.

`python_sandbox()` runs model-written Python in an isolated, resource-limited process;
`sql_query(database)` runs one checked, read-only query with a row limit and a timeout;
`calculator` evaluates arithmetic without `eval`. The implementations live in
`agentbench.runtime.builtin`; these names are the public ones.
"""

from agentbench.runtime.builtin.calculator import calculator
from agentbench.runtime.builtin.sandbox import (
    SandboxLimits,
    SandboxOutcome,
    SandboxResult,
    python_sandbox,
    run_python,
    sandbox_isolation,
)
from agentbench.runtime.builtin.sql import open_duckdb_read_only, sql_query
from agentbench.runtime.builtin.sql_guard import QueryRejected, check_query

__all__ = [
    "QueryRejected",
    "SandboxLimits",
    "SandboxOutcome",
    "SandboxResult",
    "calculator",
    "check_query",
    "open_duckdb_read_only",
    "python_sandbox",
    "run_python",
    "sandbox_isolation",
    "sql_query",
]
