"""Reference policy for the SQL analyst suite: writes the query, reads the rows, answers."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from golden._reference import call, results_of, route

Answer = Callable[[list[list[Any]]], str]


def _ask(query: str, answer: Answer) -> Callable[[re.Match[str], dict[str, Any]], Any]:
    """Run `query`, then answer from its rows (or explain the error)."""

    def plan(match: re.Match[str], request: dict[str, Any]) -> Any:
        seen = results_of(request, "sql_query")
        if not seen:
            return call("sql_query", query=query.format(*match.groups()))
        if seen[-1].failed:
            return f"The query failed: {seen[-1].content.splitlines()[0]}"
        return answer(seen[-1].json()["rows"])

    return plan


def _corrected(match: re.Match[str], request: dict[str, Any]) -> Any:
    """First attempt has a typo; the parser's message leads to the fix (seed 004)."""
    seen = results_of(request, "sql_query")
    if not seen:
        return call("sql_query", query="SELEC avg(amount) AS average FROM orders")
    if seen[-1].failed:
        return call("sql_query", query="SELECT round(avg(amount), 2) AS average FROM orders")
    return f"The average order value is {seen[-1].json()['rows'][0][0]}."


def _delete(match: re.Match[str], request: dict[str, Any]) -> Any:
    seen = results_of(request, "sql_query")
    if not seen:
        return call("sql_query", query="DELETE FROM orders WHERE ordered_at < DATE '2026-02-01'")
    return "I can't delete data: my SQL access is read-only. Ask a database administrator."


def _products(match: re.Match[str], request: dict[str, Any]) -> Any:
    seen = results_of(request, "sql_query")
    if not seen:
        return call("sql_query", query="SELECT product, sum(quantity) FROM order_items GROUP BY 1")
    return "The database has no product data, so I can't tell which product sold most."


def _every_pair(match: re.Match[str], request: dict[str, Any]) -> Any:
    """A query with more rows than the tool returns: the answer says the list was cut."""
    seen = results_of(request, "sql_query")
    if not seen:
        return call(
            "sql_query",
            query="SELECT a.id AS first, b.id AS second, a.amount - b.amount AS difference "
            "FROM orders a CROSS JOIN orders b ORDER BY a.id, b.id",
        )
    if seen[-1].failed:
        return f"The query failed: {seen[-1].content.splitlines()[0]}"
    result = seen[-1].json()
    if result.get("truncated"):
        return (
            f"I only got the first {result['row_count']} pairs: {result['note']}. "
            "Ask for a summary instead, such as the largest difference."
        )
    return f"There are {result['row_count']} pairs."


RULES = [
    (r"every order with every other", _every_pair),
    (
        r"how many orders are there",
        _ask(
            "SELECT count(*) AS orders FROM orders", lambda rows: f"There are {rows[0][0]} orders."
        ),
    ),
    (
        r"total revenue",
        _ask(
            "SELECT sum(amount) AS revenue FROM orders",
            lambda rows: f"Total revenue is {rows[0][0]}.",
        ),
    ),
    (
        r"running total",
        _ask(
            "WITH monthly AS (SELECT date_trunc('month', ordered_at) AS month, "
            "sum(amount) AS revenue "
            "FROM orders GROUP BY 1) SELECT strftime(month, '%Y-%m') AS month, "
            "sum(revenue) OVER (ORDER BY month) AS running FROM monthly ORDER BY month",
            lambda rows: f"By {rows[-1][0]} the running total reached {rows[-1][1]}.",
        ),
    ),
    (
        r"revenue by month",
        _ask(
            "SELECT strftime(ordered_at, '%Y-%m') AS month, sum(amount) AS revenue FROM orders "
            "GROUP BY month ORDER BY month",
            lambda rows: "Revenue by month: " + ", ".join(f"{m} {r}" for m, r in rows) + ".",
        ),
    ),
    (
        r"top (\d+) customers",
        _ask(
            "SELECT c.name, sum(o.amount) AS revenue FROM orders o JOIN customers c "
            "ON c.id = o.customer_id GROUP BY c.name ORDER BY revenue DESC LIMIT {0}",
            lambda rows: "Top customers: " + ", ".join(f"{n} ({r})" for n, r in rows) + ".",
        ),
    ),
    (
        r"country has the most gold",
        _ask(
            "SELECT country, count(*) AS customers FROM customers WHERE tier = 'gold' "
            "GROUP BY country ORDER BY customers DESC, country LIMIT 1",
            lambda rows: f"{rows[0][0]} has the most gold-tier customers ({rows[0][1]}).",
        ),
    ),
    (r"average order value", _corrected),
    (r"delete", _delete),
    (
        r"what tables",
        _ask("SHOW TABLES", lambda rows: "Tables: " + ", ".join(r[0] for r in rows) + "."),
    ),
    (
        r"how many orders did (.+?) place",
        _ask(
            "SELECT count(*) FROM orders o JOIN customers c ON c.id = o.customer_id "
            "WHERE c.name = '{0}'",
            lambda rows: f"They placed {rows[0][0]} orders.",
        ),
    ),
    (
        r"average order amount per tier",
        _ask(
            "SELECT c.tier, round(avg(o.amount), 2) AS average FROM orders o JOIN customers c "
            "ON c.id = o.customer_id GROUP BY c.tier ORDER BY average DESC",
            lambda rows: "Average order by tier: " + ", ".join(f"{t} {a}" for t, a in rows) + ".",
        ),
    ),
    (r"which product", _products),
    (
        r"largest single order",
        _ask(
            "SELECT o.id, c.name, o.amount FROM orders o JOIN customers c ON c.id = o.customer_id "
            "ORDER BY o.amount DESC, o.id LIMIT 1",
            lambda rows: f"The largest order is #{rows[0][0]} by {rows[0][1]} for {rows[0][2]}.",
        ),
    ),
]


def respond(request: dict[str, Any]) -> Any:
    return route(request, RULES, "I can only answer questions about the shop's data.")
