"""What a parsed query may contain: no statement that writes or changes anything, anywhere in
the tree; tables only from the catalog or a CTE visible where it is used; a bounded number of
relations to plan and of nested lambdas; and every function call checked (see `_sql_calls`)."""

from __future__ import annotations

import re

from sqlglot import exp

from agentbench.runtime.builtin._sql_calls import ancestors, check_function
from agentbench.runtime.builtin._sql_catalog import Catalog
from agentbench.runtime.builtin._sql_refusal import ALLOWED_STATEMENTS, NESTING_HINT, QueryRejected

# DuckDB plans a query without checking for interrupts, and some plans grow faster than the
# query: 300 joins took 218 s, 20 CTEs each joining the last to itself 130 s, 12 nested lambdas
# double per level. Measured under 0.5 s at these limits.
MAX_RELATIONS = 64  # tables, subqueries and CTE uses, each use counted as the CTE's own
MAX_LAMBDA_NESTING = 8

# Statement kinds that may not appear anywhere in the tree (CTEs and subqueries included).
# Named rather than imported so an older or newer sqlglot without one of them still loads.
_FORBIDDEN_NAMES = (
    *("DML", "DDL", "Insert", "Update", "Delete", "Merge", "Create", "Drop", "Alter", "Command"),
    *("Pragma", "Set", "Attach", "Detach", "Copy", "Install", "Use", "Into", "TruncateTable"),
    *("Grant", "Revoke", "Transaction", "Commit", "Rollback", "LoadData", "Cache", "Uncache"),
    *("Refresh", "Analyze", "Summarize", "Kill", "Declare", "Execute", "Export"),
)
FORBIDDEN_NODES: tuple[type[exp.Expression], ...] = tuple(
    getattr(exp, name) for name in _FORBIDDEN_NAMES if isinstance(getattr(exp, name, None), type)
)
# A name that DuckDB's replacement scans would read as a file or URL.
_PATH_LIKE = re.compile(r"[/\\:.*?~]")
_STATEMENT_NAMES = {"truncatetable": "TRUNCATE", "loaddata": "LOAD DATA", "into": "SELECT … INTO"}


def check_tree(root: exp.Expression, catalog: Catalog, source: str) -> None:
    for node in root.walk():
        if isinstance(node, FORBIDDEN_NODES):
            raise QueryRejected(
                f"{statement_name(node)} is not allowed anywhere in the query, not even in a "
                f"CTE or subquery; only {ALLOWED_STATEMENTS} (read-only queries)"
            )
        if isinstance(node, exp.Func):
            check_function(node, catalog, source)
        elif isinstance(node, exp.Table):
            _check_table(node, catalog)
        elif isinstance(node, exp.CTE) and _PATH_LIKE.search(node.alias_or_name):
            raise QueryRejected(
                f"CTE name {node.alias_or_name!r} looks like a file name; use a plain name"
            )
        elif isinstance(node, exp.Lambda):
            depth = 1 + sum(isinstance(a, exp.Lambda) for a in ancestors(node))
            if depth > MAX_LAMBDA_NESTING:
                raise QueryRejected(
                    f"lambdas nest {depth} deep; the limit is {MAX_LAMBDA_NESTING} (binding "
                    "them doubles with each level): " + NESTING_HINT
                )


def _check_table(table: exp.Table, catalog: Catalog) -> None:
    if isinstance(table.this, exp.Func):
        return  # a function in FROM position: check_function refuses it
    if not isinstance(table.this, exp.Identifier):
        raise QueryRejected(
            f"{table.sql()!r} is not a table name; " + _what_can_be_queried(catalog)
        )
    parts = tuple(part.name for part in table.parts)
    if _cte_of(table) is not None:
        return
    if catalog.resolve(parts) is None:
        raise QueryRejected(
            f"{'.'.join(parts)!r} is not one of the database's tables; "
            + _what_can_be_queried(catalog)
        )


def _what_can_be_queried(catalog: Catalog) -> str:
    names = catalog.names()
    if not names:
        return "no tables are available to this query (files and system catalogs never are)"
    shown = ", ".join(names[:20]) + (f" and {len(names) - 20} more" if len(names) > 20 else "")
    return f"query only {shown} (files, system catalogs and other databases are not available)"


def _cte_of(table: exp.Table) -> exp.CTE | None:
    """The CTE a table reference names, if it names one it can see: those of every enclosing
    WITH, the nearest first, but within a CTE only the ones defined before it (and itself, in
    a WITH RECURSIVE)."""
    if len(table.parts) != 1:
        return None
    name = table.name.lower()
    path: list[exp.Expression] = [table]
    node = table.parent
    while node is not None:
        with_ = node.args.get("with_")
        if isinstance(with_, exp.With):
            ctes = list(with_.expressions)
            visible = ctes
            if path[-1] is with_ and len(path) > 1:
                index = next((i for i, c in enumerate(ctes) if c is path[-2]), 0)
                visible = ctes[: index + 1] if with_.args.get("recursive") else ctes[:index]
            for cte in reversed(visible):
                if cte.alias_or_name.lower() == name:
                    return cte
        path.append(node)
        node = node.parent
    return None


def count_relations(root: exp.Expression) -> int:
    """Tables and subqueries the engine must plan, each use of a CTE counted as its body
    (capped just past the limit: CTEs that use each other twice grow exponentially). A
    depth-first walk over CTE uses with an explicit stack, since a chain of CTEs can be longer
    than Python's recursion limit; nodes are keyed by identity, as sqlglot's == compares trees."""
    direct: dict[int, tuple[int, list[exp.CTE]]] = {}
    totals: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[exp.Expression, bool]] = [(root, False)]
    while stack:
        item, uses_done = stack.pop()
        key = id(item)
        if key in totals:
            continue
        if key not in direct:
            direct[key] = _scan_relations(item.this if isinstance(item, exp.CTE) else item)
        count, uses = direct[key]
        if not uses_done:
            on_path.add(key)
            stack.append((item, True))
            stack.extend((c, False) for c in uses if id(c) not in totals and id(c) not in on_path)
            continue
        on_path.discard(key)
        total = count + sum(totals.get(id(c), 1) for c in uses)
        totals[key] = min(total, MAX_RELATIONS + 1)
    return totals[id(root)]


def _scan_relations(body: exp.Expression) -> tuple[int, list[exp.CTE]]:
    """Relations in `body` outside CTE definitions, and the CTEs it uses."""
    count, uses = 0, []
    for node in body.walk(prune=lambda n: isinstance(n, exp.CTE)):
        if isinstance(node, exp.Subquery):
            count += 1
        elif isinstance(node, exp.Table):
            cte = _cte_of(node)
            if cte is None or any(a is cte for a in ancestors(node)):  # recursive self-use
                count += 1
            else:
                uses.append(cte)
    return count, uses


def statement_name(node: exp.Expression) -> str:
    if isinstance(node, exp.Command):
        return str(node.this).upper()
    return _STATEMENT_NAMES.get(node.key, node.key.upper())
