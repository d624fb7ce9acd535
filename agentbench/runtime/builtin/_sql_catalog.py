"""What a query may read: the database's own tables and views (`TableName`, `Catalog`), each
by every name a query may spell it with, and the functions the engine vouches for."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field


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


def _lower(value: str | None) -> str | None:
    return value.lower() if value else None
