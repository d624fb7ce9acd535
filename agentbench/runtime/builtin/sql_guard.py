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
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ParseError, SqlglotError
from sqlglot.tokens import Token, TokenType

from agentbench.runtime.tools import BusinessFailure

ALLOWED_STATEMENTS = "SELECT, WITH … SELECT, SHOW, DESCRIBE or EXPLAIN"
MAX_QUERY_CHARS = 20_000
MAX_NESTING = 24  # parentheses, brackets, braces and CASE; sqlglot recurses ~26 frames a level
MAX_NODES = 10_000  # sqlglot's node budget: bounds the parse, backtracking included
MAX_GENERATED = 10_000  # characters or elements a size argument (repeat, lpad, range…) may ask
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
# Functions sqlglot models whose DuckDB rendering reads files or advances a sequence; the test
# suite renders every modelled function for DuckDB and checks this list is complete.
_REFUSED_MODELLED = tuple(
    getattr(exp, name)
    for name in ("ReadCSV", "ReadParquet", "NextValueFor", "ToFile")
    if isinstance(getattr(exp, name, None), type)
)
# Refused by name whatever the engine says (and dropped from the engine's function list), each
# group with the reason the model is told; prefixes unless a name ends in $.
_DENIED_FUNCTIONS = tuple(
    (re.compile(rf"^({'|'.join(names.split())})"), reason)
    for names, reason in (
        (
            "read_ write_ scan_ .*_scan$ glob sniff_ parquet_ http s3_ gcs_ azure_ delta_ "
            "iceberg_ sqlite_ postgres_ mysql_ st_read load install export import copy attach "
            "detach checkpoint force_checkpoint open url file lo_ dblink",
            "it reads or writes files, the network or other databases",
        ),
        ("query json_execute json_serialize_plan", "it runs SQL given as a string"),
        (
            "nextval setval currval lastval setseed sleep write_log",
            "it changes state outside the query (a sequence, the random seed, the log) or stalls",
        ),
        (
            "getenv current_setting set_config getvariable current_query which_secret duckdb_ "
            "pragma_ enable_ disable_ txid_ pg_ system shell sys_ xp_ __",
            "it reveals or changes the environment, settings or engine internals",
        ),
    )
)
# Flagged by DuckDB as having side effects, yet they only draw random numbers or raise an error.
_HARMLESS_VOLATILE = frozenset({"random", "uuid", "gen_random_uuid", "uuidv4", "uuidv7", "error"})
# DuckDB's own extensions whose built-in functions count as known (no others: an extension a
# caller loaded, such as httpfs or spatial, brings functions that reach outside the database).
BUNDLED_EXTENSIONS = ("", "core_functions", "icu", "json", "parquet")
# A name that DuckDB's replacement scans would read as a file or URL.
_PATH_LIKE = re.compile(r"[/\\:.*?~]")
_OPENERS = {TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.L_BRACE, TokenType.CASE}
_CLOSERS = {TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.R_BRACE, TokenType.END}
_STATEMENT_NAMES = {"truncatetable": "TRUNCATE", "loaddata": "LOAD DATA", "into": "SELECT … INTO"}
_NESTING_HINT = "flatten it, e.g. move inner parts into CTEs (WITH name AS (…))"
_PRINTF_FIELD = re.compile(r"%[^a-zA-Z]*")


class QueryRejected(BusinessFailure):
    """The query is not valid SQL, or not a single read-only query; the message says why."""


@dataclass(frozen=True)
class TableName:
    """One table or view of the database, as the tool's description shows it."""

    name: str
    schema: str | None = None
    catalog: str | None = None
    display: str = ""  # how the description names it: `name`, or `schema.name` off the default

    def spellings(self) -> set[tuple[str, ...]]:
        """Every way a query may name this table, in lower case."""
        name, schema, catalog = self.name.lower(), _lower(self.schema), _lower(self.catalog)
        shown = tuple(part.lower() for part in (self.display or name).split("."))
        found = {shown}
        if schema:
            found.add((schema, name))
        if catalog and schema:
            found.add((catalog, schema, name))
        if catalog and shown == (name,):
            found.add((catalog, name))
        return found


@dataclass(frozen=True)
class Catalog:
    """What a query may read: the database's own tables and views, and — when the engine can
    list them — the names of its built-in functions without side effects (`None`: no list, so
    only the denied names are refused) and of the functions it lists but does not vouch for
    (side effects, or defined by the caller, perhaps shadowing a built-in), refused even where
    sqlglot knows the name."""

    tables: tuple[TableName, ...] = ()
    functions: frozenset[str] | None = None
    unvouched: frozenset[str] = frozenset()
    _spellings: Mapping[tuple[str, ...], str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        spellings = {s: t.display or t.name for t in self.tables for s in t.spellings()}
        object.__setattr__(self, "_spellings", spellings)

    @classmethod
    def of(cls, names: Iterable[str], functions: Iterable[str] | None = None) -> Catalog:
        """A catalog from plain names (`orders`, `sales.orders`), for tests and simple setups."""
        tables = []
        for display in names:
            *schema, name = display.split(".")
            tables.append(TableName(name, schema[-1] if schema else None, display=display))
        known = None if functions is None else frozenset(f.lower() for f in functions)
        return cls(tuple(tables), known)

    def resolve(self, parts: tuple[str, ...]) -> str | None:
        """The table a reference names (as the description shows it), or None."""
        return self._spellings.get(tuple(p.lower() for p in parts))

    def names(self) -> list[str]:
        return sorted({t.display or t.name for t in self.tables})

    def narrowed(self, wanted: Iterable[str]) -> Catalog:
        """Only the tables named in `wanted`; raises KeyError naming one that is not here."""
        keep = set()
        for name in wanted:
            found = self.resolve(tuple(name.split(".")))
            if found is None:
                raise KeyError(name)
            keep.add(found)
        tables = tuple(t for t in self.tables if (t.display or t.name) in keep)
        return Catalog(tables, self.functions, self.unvouched)


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
            + _NESTING_HINT
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
            f"{MAX_NESTING}: " + _NESTING_HINT
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
            f"{_statement_name(root)} statements are not allowed; "
            f"only {ALLOWED_STATEMENTS} (read-only queries)"
        )
    else:
        raise QueryRejected(f"this is not a query; send one {ALLOWED_STATEMENTS} statement")
    _check_tree(root, catalog, query)
    relations = _count_relations(root)
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


def _check_tree(root: exp.Expression, catalog: Catalog, source: str) -> None:
    for node in root.walk():
        if isinstance(node, FORBIDDEN_NODES):
            raise QueryRejected(
                f"{_statement_name(node)} is not allowed anywhere in the query, not even in a "
                f"CTE or subquery; only {ALLOWED_STATEMENTS} (read-only queries)"
            )
        if isinstance(node, exp.Func):
            _check_function(node, catalog, source)
        elif isinstance(node, exp.Table):
            _check_table(node, catalog)
        elif isinstance(node, exp.CTE) and _PATH_LIKE.search(node.alias_or_name):
            raise QueryRejected(
                f"CTE name {node.alias_or_name!r} looks like a file name; use a plain name"
            )
        elif isinstance(node, exp.Lambda):
            depth = 1 + sum(isinstance(a, exp.Lambda) for a in _ancestors(node))
            if depth > MAX_LAMBDA_NESTING:
                raise QueryRejected(
                    f"lambdas nest {depth} deep; the limit is {MAX_LAMBDA_NESTING} (binding "
                    "them doubles with each level): " + _NESTING_HINT
                )


# --- tables ---------------------------------------------------------------------------------


def _check_table(table: exp.Table, catalog: Catalog) -> None:
    if isinstance(table.this, exp.Func):
        return  # a function in FROM position: _check_function refuses it
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


def _count_relations(root: exp.Expression) -> int:
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
            if cte is None or any(a is cte for a in _ancestors(node)):  # recursive self-use
                count += 1
            else:
                uses.append(cte)
    return count, uses


# --- functions ------------------------------------------------------------------------------


def _check_function(node: exp.Func, catalog: Catalog, source: str) -> None:
    name = function_name(node, source)
    if _in_table_position(node):
        raise QueryRejected(
            f"table function {name}() is not allowed: only the database's own tables can be "
            "read in FROM; for a short series use SELECT unnest(range(n)) AS i"
        )
    if isinstance(node.parent, exp.Dot) and node.parent.expression is node:
        raise QueryRejected(f"call {name}(…) as a plain function, not as something.{name}()")
    denied = _denied(name)
    if isinstance(node, _REFUSED_MODELLED) and denied is None:
        denied = "it reads files or changes a sequence"
    if denied:
        raise QueryRejected(f"function {name}() is not allowed: {denied}")
    known = catalog.functions
    if name in catalog.unvouched or (
        isinstance(node, exp.Anonymous) and known is not None and name not in known
    ):
        raise QueryRejected(
            f"function {name}() is not one of the database's built-in functions without "
            "side effects; use a standard SQL function"
        )
    _check_generated_size(node, name)


def _denied(name: str) -> str | None:
    """Why a function is refused by name, or None."""
    return next((reason for pattern, reason in _DENIED_FUNCTIONS if pattern.match(name)), None)


def function_name(node: exp.Func, source: str = "") -> str:
    """The lower-case name a function was called by in `source`, else sqlglot's name for it
    (`range` is sqlglot's GENERATE_SERIES, and the model should hear the name it wrote)."""
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    start, end = node.meta.get("start"), node.meta.get("end")
    written = source[start : end + 1] if start is not None and end is not None else ""
    return written.lower() if written.isidentifier() else node.sql_name().lower()


def _in_table_position(node: exp.Expression) -> bool:
    return isinstance(node.parent, exp.Table | exp.From | exp.Join | exp.Lateral)


def _check_generated_size(node: exp.Func, name: str) -> None:
    """A value whose size an argument sets is built in one piece, outside DuckDB's memory limit
    and deaf to interrupts: the size must be a small literal, and such calls may not nest."""
    if isinstance(node, exp.GenerateSeries):
        _check_series(node, name)
        sizes: list[exp.Expression] = []
    elif isinstance(node, exp.Format) or name in ("printf", "format"):
        template = node.this if isinstance(node, exp.Format) else _argument(node, 0)
        _check_template(template, name)
        return
    elif isinstance(node, exp.Repeat):
        sizes = [node.args.get("times")]
    elif isinstance(node, exp.Space):
        sizes = [node.this]
    elif isinstance(node, exp.Pad):
        sizes = [node.expression]
    elif name in ("list_resize", "array_resize", "bitstring"):
        sizes = [_argument(node, 1)]
    else:
        return
    for size in sizes:
        value = _literal_number(size)
        if value is None or value > MAX_GENERATED:
            raise QueryRejected(
                f"{name}()'s size argument must be a number literal of at most "
                f"{MAX_GENERATED:,}; got {size.sql() if size else 'nothing'}"
            )
    # Nested, the sizes multiply; one of the two sees the other among its ancestors.
    if any(_generates(parent) for parent in _ancestors(node)):
        raise QueryRejected(f"{name}() may not be nested inside another sized function")


def _generates(node: exp.Expression) -> bool:
    if isinstance(node, exp.Repeat | exp.Space | exp.Pad | exp.GenerateSeries):
        return True
    return isinstance(node, exp.Anonymous) and node.name.lower() in (
        "list_resize",
        "array_resize",
        "bitstring",
    )


def _ancestors(node: exp.Expression) -> Iterable[exp.Expression]:
    parent = node.parent
    while parent is not None:
        yield parent
        parent = parent.parent


def _check_series(node: exp.GenerateSeries, name: str) -> None:
    start = _literal_number(node.args.get("start")) if node.args.get("start") else 0
    end = _literal_number(node.args.get("end"))
    step = _literal_number(node.args.get("step")) if node.args.get("step") else 1
    if start is None or end is None or not step:
        raise QueryRejected(
            f"{name}() needs whole-number literals here (a list of at most {MAX_GENERATED:,}); "
            "for dates, add an INTERVAL to a date: DATE '2026-01-01' + INTERVAL (i) DAY"
        )
    span = end - start
    count = -(-span // step) if node.args.get("is_end_exclusive") else span // step + 1
    if count > MAX_GENERATED:
        raise QueryRejected(f"{name}() may produce at most {MAX_GENERATED:,} elements")


def _check_template(template: exp.Expression | None, name: str) -> None:
    if not (isinstance(template, exp.Literal) and template.is_string):
        raise QueryRejected(f"{name}()'s format must be a string literal")
    # Every number in a printf conversion (%08.2f, %1$5s) or fmt field ({:>10}) is bounded, and
    # a width taken from an argument (%*d, {:{}}) is refused.
    text = template.this
    fields = _PRINTF_FIELD.findall(text.replace("%%", "")) if name == "printf" else []
    fields += _fmt_fields(text) if name == "format" else []
    for size in (s for f in fields for s in re.findall(r"\d+|\*|\{", f)):
        if not size.isdigit() or int(size) > MAX_GENERATED:
            raise QueryRejected(
                f"{name}()'s widths and precisions must be written in the format and at most "
                f"{MAX_GENERATED:,}"
            )


def _fmt_fields(text: str) -> list[str]:
    """The insides of fmt's replacement fields, nested ones included; `{{` is a brace."""
    fields, i = [], 0
    while i < len(text):
        if text.startswith("{{", i):
            i += 2
        elif text[i] == "{":
            depth, j = 0, i
            while j < len(text):
                depth += (text[j] == "{") - (text[j] == "}")
                if depth == 0:
                    break
                j += 1
            fields.append(text[i + 1 : j])
            i = j + 1
        else:
            i += 1
    return fields


def _argument(node: exp.Func, index: int) -> exp.Expression | None:
    arguments = node.expressions
    return arguments[index] if len(arguments) > index else None


def _literal_number(node: exp.Expression | None) -> int | None:
    """The value of a whole-number literal (negated or in parentheses too), else None."""
    sign = 1
    while isinstance(node, exp.Paren | exp.Neg):
        sign = -sign if isinstance(node, exp.Neg) else sign
        node = node.this
    if isinstance(node, exp.Literal) and not node.is_string:
        try:
            return sign * int(node.this)
        except ValueError:
            return None
    return None


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
        if _denied(name) or not all(_is_builtin(row) for row in group):
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
        _check_tree(expression, Catalog(functions=known), source)
    except (SqlglotError, QueryRejected, RecursionError, IndexError):
        return False
    return not any(isinstance(n, exp.Query) for n in expression.walk())


def _unqualified_call(node: exp.Expression) -> exp.Expression:
    if isinstance(node, exp.Dot) and isinstance(node.expression, exp.Func):
        return node.expression.copy()  # a copy: detached from the Dot it leaves
    return node


def _lower(value: str | None) -> str | None:
    return value.lower() if value else None


def _statement_name(node: exp.Expression) -> str:
    if isinstance(node, exp.Command):
        return str(node.this).upper()
    return _STATEMENT_NAMES.get(node.key, node.key.upper())
