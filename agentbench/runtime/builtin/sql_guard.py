"""Deciding whether a model-written SQL query is a single, read-only query we are willing to run.

`check_query` accepts exactly one SELECT, WITH … SELECT, set operation, SHOW, DESCRIBE or EXPLAIN
of those, and reads it as a whitelist: every table it names must be one of the database's own
tables or views (a `Catalog`, built by the tool from the database, optionally narrowed) or a CTE
defined in the query where it is used; nothing in FROM position may be a function; a function
sqlglot does not model must be one the engine lists as built-in and free of side effects. Files,
system catalogs, other databases, sequences, settings and table functions are therefore refused
whatever connection the query would run on. Before parsing, the query's length and nesting are
bounded, and sqlglot's own node budget bounds the parse, so checking takes at most a fraction of
a second and never overflows the stack. Functions whose output size an argument sets (`repeat`,
`lpad`, `range`…) need a small literal there: DuckDB builds such a value in one allocation that
neither its memory limit nor an interrupt stops. What runs is the SQL regenerated from the
checked tree, without comments. A refusal is a `QueryRejected`, a `BusinessFailure` whose message
says what to change.

This module reads the statement (its length, nesting, kind, one of them only) and is the guard's
face; the rest lives beside it, one job each: `_sql_catalog` (what may be read), `_sql_tree`
(what a parsed query may contain), `_sql_calls` (the functions it calls), `_sql_vetting` (which
of the engine's functions count as safe) and `_sql_refusal` (`QueryRejected`).
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ParseError, SqlglotError
from sqlglot.tokens import Token, TokenType

from agentbench.runtime.builtin._sql_catalog import Catalog, TableName
from agentbench.runtime.builtin._sql_refusal import ALLOWED_STATEMENTS, NESTING_HINT, QueryRejected
from agentbench.runtime.builtin._sql_tree import (
    FORBIDDEN_NODES,
    MAX_RELATIONS,
    check_tree,
    count_relations,
    statement_name,
)
from agentbench.runtime.builtin._sql_vetting import vet_functions

# What the SQL tool and `agentbench.tools` take from the guard.
__all__ = [
    "ALLOWED_STATEMENTS",
    "Catalog",
    "CheckedQuery",
    "QueryRejected",
    "TableName",
    "check_query",
    "vet_functions",
]

MAX_QUERY_CHARS = 20_000
MAX_NESTING = 24  # parentheses, brackets, braces and CASE; sqlglot recurses ~26 frames a level
MAX_NODES = 10_000  # sqlglot's node budget: bounds the parse, backtracking included
_OPENERS = {TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.L_BRACE, TokenType.CASE}
_CLOSERS = {TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.R_BRACE, TokenType.END}


@dataclass(frozen=True)
class CheckedQuery:
    """A query that passed the checks, and the SQL text to run for it."""

    sql: str
    kind: str  # "select", "show", "describe" or "explain"


def check_query(
    query: str, dialect: str = "duckdb", catalog: Catalog | None = None
) -> CheckedQuery:
    """Accept one read-only statement over `catalog`'s tables or raise `QueryRejected`.

    Without a catalog no table may be read (only table-less SELECTs and CTEs).
    """
    catalog = catalog or Catalog()
    if len(query) > MAX_QUERY_CHARS:
        raise QueryRejected(
            f"the query is {len(query):,} characters long; the limit is {MAX_QUERY_CHARS:,}. "
            "Send a shorter query (let SQL aggregate or filter instead of listing values)"
        )
    try:
        tokens = Dialect.get_or_raise(dialect).tokenize(query)
    except SqlglotError as exc:
        raise QueryRejected(f"invalid SQL: {exc}") from None
    if not tokens:
        raise QueryRejected("the query is empty; send one SELECT statement")
    _check_nesting(tokens)
    try:
        return _check_tokens(query, tokens, dialect, catalog)
    except RecursionError:
        # A shape the token count does not see (a long chain of unary operators, say).
        raise QueryRejected(
            f"the query is nested too deeply to check (the limit is {MAX_NESTING} levels); "
            + NESTING_HINT
        ) from None


def _check_nesting(tokens: list[Token]) -> None:
    depth = deepest = run = 0
    for token in tokens:
        kind = token.token_type
        depth += (kind in _OPENERS) - (kind in _CLOSERS)
        run = run + 1 if kind is TokenType.NOT else 0  # NOT NOT NOT … recurses as deep
        deepest = max(deepest, depth + run)
    if deepest > MAX_NESTING:
        raise QueryRejected(
            f"the query nests {deepest} levels deep (parentheses, brackets, CASE); the limit is "
            f"{MAX_NESTING}: " + NESTING_HINT
        )


def _check_tokens(query: str, tokens: list[Token], dialect: str, catalog: Catalog) -> CheckedQuery:
    first = tokens[0].text.upper()
    if first == "EXPLAIN":
        return _check_explain(query[tokens[0].end + 1 :], dialect, catalog)
    if first == "SHOW":
        return _check_show(query, tokens, dialect, catalog)
    return _check_statement(query, dialect, catalog)


def _check_explain(rest: str, dialect: str, catalog: Catalog) -> CheckedQuery:
    modifier = ""
    tokens = Dialect.get_or_raise(dialect).tokenize(rest)
    words = [t.text.upper() for t in tokens[:2]]
    if words[:1] == ["ANALYZE"]:
        modifier, rest = "ANALYZE ", rest[tokens[0].end + 1 :]
    elif words == ["QUERY", "PLAN"]:
        modifier, rest = "QUERY PLAN ", rest[tokens[1].end + 1 :]
    inner = check_query(rest, dialect, catalog)
    if inner.kind != "select":
        raise QueryRejected("EXPLAIN is allowed only for a SELECT query")
    return CheckedQuery(sql=f"EXPLAIN {modifier}{inner.sql}", kind="explain")


def _check_show(query: str, tokens: list[Token], dialect: str, catalog: Catalog) -> CheckedQuery:
    rest = query[tokens[0].end + 1 :]
    body = list(tokens[1:])
    while body and body[-1].token_type is TokenType.SEMICOLON:
        body.pop()
    if any(t.token_type is TokenType.SEMICOLON for t in body):
        raise QueryRejected("send exactly one statement; found more (separated by ';')")
    words = " ".join(t.text.upper() for t in body)
    if words == "TABLES":
        return CheckedQuery(sql=_list_tables(catalog, dialect), kind="show")
    if words in ("ALL TABLES", "DATABASES"):
        raise QueryRejected(
            f"SHOW {words} is not allowed: only this database's tables can be queried; "
            "use SHOW TABLES, or DESCRIBE name for a table's columns"
        )
    # `SHOW name` describes a table; check it as the DESCRIBE it means.
    described = _check_statement(f"DESCRIBE {rest}", dialect, catalog)
    return CheckedQuery(sql=described.sql, kind="show")


def _list_tables(catalog: Catalog, dialect: str) -> str:
    """SHOW TABLES answered from the catalog, so it lists exactly what may be queried."""
    names = [exp.Literal.string(n).sql(dialect) for n in catalog.names()]
    if not names:
        return "SELECT '' AS name WHERE 1 = 0"
    return " UNION ALL ".join(f"SELECT {n} AS name" for n in names) + " ORDER BY name"


def _check_statement(query: str, dialect: str, catalog: Catalog) -> CheckedQuery:
    statements = _parse(query, dialect)
    if len(statements) != 1:
        raise QueryRejected(
            f"send exactly one statement; found {len(statements)} (separated by ';')"
        )
    root = statements[0]
    if isinstance(root, exp.Describe):
        if not isinstance(root.this, exp.Table | exp.Query):
            raise QueryRejected("DESCRIBE takes a table name or a SELECT query")
        kind = "describe"
    elif isinstance(root, exp.Query):
        kind = "select"
    elif isinstance(root, FORBIDDEN_NODES):
        raise QueryRejected(
            f"{statement_name(root)} statements are not allowed; "
            f"only {ALLOWED_STATEMENTS} (read-only queries)"
        )
    else:
        raise QueryRejected(f"this is not a query; send one {ALLOWED_STATEMENTS} statement")
    check_tree(root, catalog, query)
    relations = count_relations(root)
    if relations > MAX_RELATIONS:
        raise QueryRejected(
            f"the query reads more than {MAX_RELATIONS} tables and subqueries (each use of a "
            "CTE counted in full); the limit keeps planning it cheap. Split it into smaller "
            "queries, or join fewer tables"
        )
    return CheckedQuery(sql=root.sql(dialect=dialect, comments=False), kind=kind)


def _parse(query: str, dialect: str) -> list[exp.Expression]:
    try:
        parsed = sqlglot.parse(query, read=dialect, max_nodes=MAX_NODES)
    except ParseError as exc:
        if "Maximum number of AST nodes" in str(exc):
            raise QueryRejected(
                f"the query has more than {MAX_NODES:,} expressions, the limit; send a shorter "
                "query (let SQL aggregate or filter instead of listing values)"
            ) from None
        raise QueryRejected(f"invalid SQL: {_describe_parse_error(exc)}") from None
    except SqlglotError as exc:
        raise QueryRejected(f"invalid SQL: {exc}") from None
    statements = [s for s in parsed if s is not None]
    if not statements:
        raise QueryRejected("the query is empty; send one SELECT statement")
    return statements


def _describe_parse_error(exc: ParseError) -> str:
    if not exc.errors:
        return str(exc)
    error = exc.errors[0]
    near = error.get("highlight") or ""
    return (
        f"{error.get('description', 'syntax error')} at line {error.get('line')}, "
        f"column {error.get('col')}" + (f", near {near!r}" if near else "")
    )
