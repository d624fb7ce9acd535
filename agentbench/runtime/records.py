"""`built`: a pydantic record made from values the runtime already knows are valid.

Every step of a run makes a handful of records (its events, the model's `ChatResponse`, the
tool's `ToolResult`) and a long run keeps them all. Validation would check values the runtime
built itself, and copy every dict it checks (a second copy of each request, of each tool
call's arguments); each record would also carry its own set of the field names given, 200–700
bytes, though every record of a kind made at one place names the same fields. `built` makes
the record pydantic's validation would, field for field and in the same order, defaults
filled in, sharing the values it is given and one set of field names per kind and names.

A field assigned later moves the record to the shared set that has its name too (the models
derive from `SharesFieldNames`); a `model_copy` of a record gets a plain set of its own.
"""

from __future__ import annotations

import copy
import enum
import functools
from collections.abc import Callable
from typing import Any, TypeAlias, TypeVar

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

M = TypeVar("M", bound=BaseModel)


class SharedFieldNames(set[str]):
    """The `model_fields_set` of every record of one kind built from the same field names."""

    def __copy__(self) -> set[str]:
        return set(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> set[str]:
        return set(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (set, (list(self),))


_IMMUTABLE = (str, int, float, bool, type(None), enum.Enum, tuple, frozenset)
Maker: TypeAlias = Callable[[dict[str, Any]], Any]
# Per model class and names given (in the order given): the function that makes the record.
_MAKERS: dict[tuple[type[BaseModel], tuple[str, ...]], Maker] = {}
# The shared sets, by model class and the names in them.
_NAMES: dict[tuple[type[BaseModel], frozenset[str]], SharedFieldNames] = {}
# A shared set with one more name (a field assigned later), by (id of the set, name).
_GROWN: dict[tuple[int, str], SharedFieldNames] = {}


def built(cls: type[M], fields: dict[str, Any]) -> M:
    """What `cls(**fields)` gives, for `fields` already valid: not checked, nor copied.

    Only for models without aliases, validators that change values or `model_post_init`,
    and values of the fields' types: what the runtime itself made. Values from the user
    (a run's input, a scripted response) go through validation.
    """
    given = tuple(fields)
    make = _MAKERS.get((cls, given)) or _maker(cls, given)
    return make(fields)  # type: ignore[no-any-return]


def maker(cls: type[M], given: tuple[str, ...]) -> Callable[[dict[str, Any]], M]:
    """The function `built(cls, fields)` calls for `fields` naming `given` (in that order),
    for a caller that always names the same fields: looked up once, not every record."""
    return _MAKERS.get((cls, given)) or _maker(cls, given)


def _maker(cls: type[BaseModel], given: tuple[str, ...]) -> Maker:
    """A function making `cls` records from `given` fields, written out as `dataclasses`
    writes `__init__`: one dict display in field order, no loop (half the cost of one)."""
    scope: dict[str, Any] = {"new": cls.__new__, "cls": cls, "setattr": object.__setattr__}
    entries = [f"{name!r}: {value}" for name, value in field_sources(cls, given, scope)]
    scope["names"] = shared_names(cls, given)
    # What `BaseModel.model_construct` sets; it is not called since its per-field alias
    # handling costs more than validating would.
    source = (
        "def make(fields):\n"
        "    made = new(cls)\n"
        f"    setattr(made, '__dict__', {{{', '.join(entries)}}})\n"
        "    setattr(made, '__pydantic_fields_set__', names)\n"
        "    setattr(made, '__pydantic_extra__', None)\n"
        "    setattr(made, '__pydantic_private__', None)\n"
        "    return made\n"
    )
    # Named for what it makes, so a traceback or tracemalloc says which record.
    exec(compile(source, f"<built {cls.__name__}>", "exec"), scope)
    make: Maker = scope["make"]
    _MAKERS[(cls, given)] = make
    return make


def field_sources(
    cls: type[BaseModel], given: tuple[str, ...], scope: dict[str, Any]
) -> list[tuple[str, str]]:
    """Each field of `cls` in order, with the expression a generated maker computes its
    value with: `fields[name]` for a field given, else its default (a shared immutable one)
    or its factory's result; the defaults and factories are put in `scope`."""
    unknown = set(given) - set(cls.model_fields)
    if unknown:
        raise TypeError(f"{cls.__name__} has no field {sorted(unknown)[0]!r}")
    sources = []
    for index, (name, info) in enumerate(cls.model_fields.items()):
        default = info.default
        if name in given:
            sources.append((name, f"fields[{name!r}]"))
        elif info.default_factory is not None:
            scope[f"factory_{index}"] = info.default_factory
            sources.append((name, f"factory_{index}()"))
        elif default is PydanticUndefined:
            raise TypeError(f"{cls.__name__} needs {name!r}")
        elif isinstance(default, _IMMUTABLE):
            scope[f"default_{index}"] = default
            sources.append((name, f"default_{index}"))
        else:
            scope[f"factory_{index}"] = functools.partial(copy.deepcopy, default)
            sources.append((name, f"factory_{index}()"))
    return sources


def shared_names(cls: type[BaseModel], given: tuple[str, ...]) -> SharedFieldNames:
    """The `model_fields_set` every `cls` record built from the `given` names shares."""
    key = (cls, frozenset(given))
    names = _NAMES.get(key)
    if names is None:
        names = _NAMES[key] = SharedFieldNames(given)
    return names


class SharesFieldNames(BaseModel):
    """A model whose instances `built` may make with a shared set of field names."""

    def __setattr__(self, name: str, value: Any) -> None:
        names = self.__pydantic_fields_set__
        if type(names) is SharedFieldNames and name not in names:
            _move_to_grown(self, names, name)
        super().__setattr__(name, value)


def _move_to_grown(record: BaseModel, names: SharedFieldNames, name: str) -> None:
    """This record alone now has `name` set: it moves to the shared set that says so
    (pydantic's own `add` then finds the name there)."""
    grown = _GROWN.get((id(names), name))
    if grown is None:
        if name not in type(record).model_fields:  # not a field: a set of its own
            grown = set(names)  # type: ignore[assignment]
        else:
            grown = _GROWN[(id(names), name)] = SharedFieldNames({*names, name})
    object.__setattr__(record, "__pydantic_fields_set__", grown)


def assign(record: SharesFieldNames, name: str, value: Any) -> None:
    """`record.<name> = value`, for a field of a record neither frozen nor validated on
    assignment: what pydantic does then (the value in `__dict__`, the name in the fields
    set), without the three calls of its `__setattr__` (a replayed step sets a latency)."""
    config = record.model_config
    if config.get("frozen") or config.get("validate_assignment") or name not in record.__dict__:
        setattr(record, name, value)
        return
    names = record.__pydantic_fields_set__
    if name not in names:
        if type(names) is SharedFieldNames:
            _move_to_grown(record, names, name)
        record.__pydantic_fields_set__.add(name)
    record.__dict__[name] = value


__all__ = [
    "SharedFieldNames",
    "SharesFieldNames",
    "assign",
    "built",
    "field_sources",
    "maker",
    "shared_names",
]
