"""SQL analyst agent (seed 004): answers questions with read-only SQL over the shop database."""

from __future__ import annotations

from agentbench import Agent
from agentbench.tools import sql_query
from golden.sql_analyst.data import build

sql_agent = Agent(
    name="sql_analyst",
    description="Answers questions about the shop's customers and orders with read-only SQL.",
    instructions=(
        "You are a data analyst. Answer with numbers from the database, queried with sql_query "
        "(DuckDB dialect, read-only). If a query fails, read the error and fix the query. You "
        "cannot change data; say so if asked. Answer in one sentence."
    ),
    tools=[sql_query(build(), dialect="duckdb", max_rows=200)],
)
