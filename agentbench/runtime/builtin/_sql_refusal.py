"""How the SQL guard refuses a query: `QueryRejected`, a `BusinessFailure` whose message says
what to change, and the wording its refusals share."""

from __future__ import annotations

from agentbench.runtime.tools import BusinessFailure

ALLOWED_STATEMENTS = "SELECT, WITH … SELECT, SHOW, DESCRIBE or EXPLAIN"
NESTING_HINT = "flatten it, e.g. move inner parts into CTEs (WITH name AS (…))"


class QueryRejected(BusinessFailure):
    """The query is not valid SQL, or not a single read-only query; the message says why."""
