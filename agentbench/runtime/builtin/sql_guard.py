"""Deciding whether a model-written SQL query is a single, read-only query we are willing to run.

`check_query` parses with sqlglot and accepts exactly one SELECT, WITH … SELECT, set operation,
SHOW, DESCRIBE or EXPLAIN of those. It then walks the whole tree, so a DELETE inside a CTE, a
DROP after a semicolon, or a `read_csv('/etc/passwd')` in a subquery are found wherever they
hide. Table functions (anything in FROM position) must be on a short allow-list; scalar
functions that read files, reach the network, run SQL from a string or reveal settings are
refused by name. What runs is the SQL regenerated from the checked tree, without comments, so
the database never sees text the checker did not understand. A refusal is a `QueryRejected`, a
`BusinessFailure` whose message says what to change (with line and column for syntax errors).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ParseError, SqlglotError
from sqlglot.tokens import Token, TokenType

from agentbench.runtime.tools import BusinessFailure

ALLOWED_STATEMENTS = "SELECT, WITH … SELECT, SHOW, DESCRIBE or EXPLAIN"

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

# Functions allowed in FROM position: generators and catalog views, none of which takes a path.
ALLOWED_TABLE_FUNCTIONS = frozenset(
    {
        "range",
        "generate_series",
        "unnest",
        "explode",
        "json_each",
        "json_tree",
        "duckdb_tables",
        "duckdb_columns",
        "duckdb_views",
        "duckdb_schemas",
        "duckdb_constraints",
        "duckdb_indexes",
        "duckdb_types",
        "duckdb_functions",
        "duckdb_keywords",
        "pragma_table_info",
    }
)
# Scalar functions refused by name: file and network readers, SQL-from-a-string, settings and
# secrets, and the classic escape hatches of other engines.
_DENIED_FUNCTION = re.compile(
    r"""^(
        read_ | write_ | scan_ | .*_scan$ | glob | sniff_ | parquet_ | http | s3_ | gcs_ | azure_
      | delta_ | iceberg_ | sqlite_ | postgres_ | mysql_ | st_read | load | install | export
      | import | copy | attach | detach | checkpoint | force_checkpoint | getenv | current_setting
      | set_config | query | json_execute | which_secret | duckdb_secrets | enable_ | disable_
      | system | shell | pg_read | pg_ls | pg_stat_file | lo_ | dblink | sys_ | xp_ | open
      | url | file
    )""",
    re.VERBOSE,
)
# A table name that DuckDB's replacement scans would read as a file or URL.
_PATH_LIKE = re.compile(r"[/\\:.*?~]")
_STATEMENT_NAMES = {"truncatetable": "TRUNCATE", "loaddata": "LOAD DATA", "into": "SELECT … INTO"}
_SHOW_LISTINGS = frozenset({"TABLES", "ALL TABLES", "DATABASES"})


class QueryRejected(BusinessFailure):
    """The query is not valid SQL, or not a single read-only query; the message says why."""


@dataclass(frozen=True)
class CheckedQuery:
    """A query that passed the checks, and the SQL text to run for it."""

    sql: str
    kind: str  # "select", "show", "describe" or "explain"


def check_query(query: str, dialect: str = "duckdb") -> CheckedQuery:
    """Accept one read-only statement or raise `QueryRejected` saying what is wrong."""
    try:
        tokens = Dialect.get_or_raise(dialect).tokenize(query)
    except SqlglotError as exc:
        raise QueryRejected(f"invalid SQL: {exc}") from None
    if not tokens:
        raise QueryRejected("the query is empty; send one SELECT statement")
    first = tokens[0].text.upper()
    if first == "EXPLAIN":
        return _check_explain(query[tokens[0].end + 1 :], dialect)
    if first == "SHOW":
        return _check_show(query, tokens, dialect)
    return _check_statement(query, dialect)


def _check_explain(rest: str, dialect: str) -> CheckedQuery:
    modifier = ""
    tokens = Dialect.get_or_raise(dialect).tokenize(rest)
    words = [t.text.upper() for t in tokens[:2]]
    if words[:1] == ["ANALYZE"]:
        modifier, rest = "ANALYZE ", rest[tokens[0].end + 1 :]
    elif words == ["QUERY", "PLAN"]:
        modifier, rest = "QUERY PLAN ", rest[tokens[1].end + 1 :]
    inner = check_query(rest, dialect)
    if inner.kind != "select":
        raise QueryRejected("EXPLAIN is allowed only for a SELECT query")
    return CheckedQuery(sql=f"EXPLAIN {modifier}{inner.sql}", kind="explain")


def _check_show(query: str, tokens: list[Token], dialect: str) -> CheckedQuery:
    rest = query[tokens[0].end + 1 :]
    body = list(tokens[1:])
    while body and body[-1].token_type is TokenType.SEMICOLON:
        body.pop()
    if any(t.token_type is TokenType.SEMICOLON for t in body):
        raise QueryRejected("send exactly one statement; found more (separated by ';')")
    words = " ".join(t.text.upper() for t in body)
    if words in _SHOW_LISTINGS:
        return CheckedQuery(sql=f"SHOW {words}", kind="show")
    # `SHOW name` describes a table; check it as the DESCRIBE it means.
    described = _check_statement(f"DESCRIBE {rest}", dialect)
    return CheckedQuery(sql=described.sql, kind="show")


def _check_statement(query: str, dialect: str) -> CheckedQuery:
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
            f"{_statement_name(root)} statements are not allowed; "
            f"only {ALLOWED_STATEMENTS} (read-only queries)"
        )
    else:
        raise QueryRejected(f"this is not a query; send one {ALLOWED_STATEMENTS} statement")
    _check_tree(root)
    return CheckedQuery(sql=root.sql(dialect=dialect, comments=False), kind=kind)


def _parse(query: str, dialect: str) -> list[exp.Expression]:
    try:
        parsed = sqlglot.parse(query, read=dialect)
    except ParseError as exc:
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


def _check_tree(root: exp.Expression) -> None:
    for node in root.walk():
        if isinstance(node, FORBIDDEN_NODES):
            raise QueryRejected(
                f"{_statement_name(node)} is not allowed anywhere in the query, not even in a "
                f"CTE or subquery; only {ALLOWED_STATEMENTS} (read-only queries)"
            )
        if isinstance(node, exp.Func):
            _check_function(node)
        elif isinstance(node, exp.Table):
            _check_table_name(node)


def _check_function(node: exp.Func) -> None:
    name = function_name(node)
    if _in_table_position(node):
        if name not in ALLOWED_TABLE_FUNCTIONS:
            allowed = ", ".join(sorted(ALLOWED_TABLE_FUNCTIONS))
            raise QueryRejected(
                f"table function {name}() is not allowed (it may read files or the network); "
                f"query the database's tables, or use one of: {allowed}"
            )
    elif _DENIED_FUNCTION.match(name):
        raise QueryRejected(
            f"function {name}() is not allowed: it can read files, reach the network, "
            "run SQL from a string or reveal settings"
        )


def function_name(node: exp.Func) -> str:
    """The lower-case name a function was called by (sqlglot's canonical one if it knows it)."""
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    return node.sql_name().lower()


def _in_table_position(node: exp.Expression) -> bool:
    return isinstance(node.parent, exp.Table | exp.From | exp.Join | exp.Lateral)


def _check_table_name(table: exp.Table) -> None:
    for part in table.parts:
        if isinstance(part, exp.Identifier) and _PATH_LIKE.search(part.name):
            raise QueryRejected(
                f"table name {part.name!r} looks like a file path or URL; "
                "only the database's own tables can be queried"
            )


def _statement_name(node: exp.Expression) -> str:
    if isinstance(node, exp.Command):
        return str(node.this).upper()
    return _STATEMENT_NAMES.get(node.key, node.key.upper())
