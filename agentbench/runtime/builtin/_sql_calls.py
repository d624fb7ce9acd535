"""The functions a query calls: none that reads files, the network or other databases, runs
SQL given as text, changes state outside the query or reveals the environment (refused by
name, whatever the engine says); none in FROM position; none the engine does not vouch for;
and where an argument sets the size of what a function builds (`repeat`, `lpad`, `range`,
a format's widths), a small literal there, since DuckDB builds such a value in one allocation
that neither its memory limit nor an interrupt stops."""

from __future__ import annotations

import re
from collections.abc import Iterable

from sqlglot import exp

from agentbench.runtime.builtin._sql_catalog import Catalog
from agentbench.runtime.builtin._sql_refusal import QueryRejected

MAX_GENERATED = 10_000  # characters or elements a size argument (repeat, lpad, range…) may ask
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
_PRINTF_FIELD = re.compile(r"%[^a-zA-Z]*")


def check_function(node: exp.Func, catalog: Catalog, source: str) -> None:
    name = function_name(node, source)
    if _in_table_position(node):
        raise QueryRejected(
            f"table function {name}() is not allowed: only the database's own tables can be "
            "read in FROM; for a short series use SELECT unnest(range(n)) AS i"
        )
    if isinstance(node.parent, exp.Dot) and node.parent.expression is node:
        raise QueryRejected(f"call {name}(…) as a plain function, not as something.{name}()")
    refused = denied(name)
    if isinstance(node, _REFUSED_MODELLED) and refused is None:
        refused = "it reads files or changes a sequence"
    if refused:
        raise QueryRejected(f"function {name}() is not allowed: {refused}")
    known = catalog.functions
    if name in catalog.unvouched or (
        isinstance(node, exp.Anonymous) and known is not None and name not in known
    ):
        raise QueryRejected(
            f"function {name}() is not one of the database's built-in functions without "
            "side effects; use a standard SQL function"
        )
    _check_generated_size(node, name)


def denied(name: str) -> str | None:
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
    if any(_generates(parent) for parent in ancestors(node)):
        raise QueryRejected(f"{name}() may not be nested inside another sized function")


def _generates(node: exp.Expression) -> bool:
    if isinstance(node, exp.Repeat | exp.Space | exp.Pad | exp.GenerateSeries):
        return True
    return isinstance(node, exp.Anonymous) and node.name.lower() in (
        "list_resize",
        "array_resize",
        "bitstring",
    )


def ancestors(node: exp.Expression) -> Iterable[exp.Expression]:
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
