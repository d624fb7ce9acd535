"""Which of the engine's functions a query may call, from the engine's own list: built-in
scalar, aggregate, window functions and macros of DuckDB or a bundled extension, free of side
effects, not refused by name, and for a macro, a body that passes the guard itself."""

from __future__ import annotations

import functools

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from agentbench.runtime.builtin._sql_calls import denied
from agentbench.runtime.builtin._sql_catalog import Catalog
from agentbench.runtime.builtin._sql_refusal import QueryRejected
from agentbench.runtime.builtin._sql_tree import check_tree

# Flagged by DuckDB as having side effects, yet they only draw random numbers or raise an error.
_HARMLESS_VOLATILE = frozenset({"random", "uuid", "gen_random_uuid", "uuidv4", "uuidv7", "error"})
# DuckDB's own extensions whose built-in functions count as known (no others: an extension a
# caller loaded, such as httpfs or spatial, brings functions that reach outside the database).
BUNDLED_EXTENSIONS = ("", "core_functions", "icu", "json", "parquet")


# One row per overload, as DuckDB's duckdb_functions() lists it.
FunctionRow = tuple[str, str, bool | None, bool, str | None, str | None]


@functools.lru_cache(maxsize=16)
def vet_functions(rows: tuple[FunctionRow, ...]) -> tuple[frozenset[str], frozenset[str]]:
    """The function names a query may call, and the other names the engine lists, from its own
    list: rows of (name, type, has side effects, internal, extension, macro definition). A name
    counts when every overload is a built-in scalar, aggregate, window function or macro of
    DuckDB or a bundled extension, free of side effects and not denied by name; a macro only if
    its body would pass this guard itself, since a harmless-looking macro may wrap a sleep or a
    catalog read."""
    overloads: dict[str, list[FunctionRow]] = {}
    for row in rows:
        overloads.setdefault(row[0].lower(), []).append(row)
    plain: set[str] = set()
    macros: dict[str, list[str]] = {}
    for name, group in overloads.items():
        if denied(name) or not all(_is_builtin(row) for row in group):
            continue
        bodies = [str(row[5] or "") for row in group if row[1] == "macro"]
        if bodies:
            macros[name] = bodies
        else:
            plain.add(name)
    # A macro overloading a function of the same name may call it (current_database does).
    overloaded = {n for n in macros if any(row[1] != "macro" for row in overloads[n])}
    known = frozenset(plain)
    for _ in range(3):  # macros calling macros: a few rounds reach the fixed point
        vetted = {
            n
            for n, bodies in macros.items()
            if all(_macro_is_safe(b, known | ({n} & overloaded)) for b in bodies)
        }
        if vetted <= known:
            break
        known = known | vetted
    return known, frozenset(overloads) - known


def _is_builtin(row: FunctionRow) -> bool:
    name, kind, side_effects, internal, extension, _ = row
    # DuckDB flags no macro either way; its body is vetted instead.
    pure = side_effects is False or (kind == "macro" and side_effects is None)
    pure = pure or name.lower() in _HARMLESS_VOLATILE
    return (
        kind in ("scalar", "aggregate", "window", "macro")
        and pure
        and bool(internal)
        and (extension or "") in BUNDLED_EXTENSIONS
    )


def _macro_is_safe(body: str, known: frozenset[str]) -> bool:
    try:
        source = f"SELECT {body}"
        expression = sqlglot.parse_one(source, read="duckdb").selects[0]
        # DuckDB's own macros call built-ins by their full name ("system".main.f()).
        expression = expression.transform(_unqualified_call)
        check_tree(expression, Catalog(functions=known), source)
    except (SqlglotError, QueryRejected, RecursionError, IndexError):
        return False
    return not any(isinstance(n, exp.Query) for n in expression.walk())


def _unqualified_call(node: exp.Expression) -> exp.Expression:
    if isinstance(node, exp.Dot) and isinstance(node.expression, exp.Func):
        return node.expression.copy()  # a copy: detached from the Dot it leaves
    return node
