"""Pydantic validation errors rewritten as "what was expected" sentences, with field paths.

Pydantic's own messages are precise but written for programmers ("Extra inputs are not
permitted", a union's members reported one by one under type tags such as `list[str]`). A
suite author needs the field path as written in the file (`cases[3].expect[1].args`), the
allowed names with the closest match first, and one sentence per mistake.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class FieldProblem:
    """One validation failure: where (a path into the input) and what was expected."""

    loc: Loc
    message: str


def field_path(loc: Sequence[str | int]) -> str:
    """`("cases", 3, "expect", 1, "args")` → `cases[3].expect[1].args`."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def closest_first(word: str, candidates: Sequence[str]) -> list[str]:
    """`candidates` ordered by similarity to `word`, the closest first."""

    def likeness(candidate: str) -> float:
        return difflib.SequenceMatcher(None, word.lower(), candidate.lower()).ratio()

    return sorted(candidates, key=lambda candidate: (-likeness(candidate), candidate))


def show(value: Any, limit: int = 60) -> str:
    """A short repr of an input value for an error message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def explain(error: ValidationError, model: type[BaseModel]) -> list[FieldProblem]:
    """Every error of `error` (raised validating `model`) as a located sentence."""
    groups: dict[Loc, list[tuple[Loc, dict[str, Any]]]] = {}
    for detail in error.errors(include_url=False):
        loc, inside_union = _clean_loc(model, tuple(detail["loc"]))
        key = inside_union if inside_union is not None else loc
        groups.setdefault(key, []).append((loc, dict(detail)))
    problems: list[FieldProblem] = []
    # An unknown field is usually a misspelt required one: report it before "missing".
    ordered = sorted(groups.items(), key=lambda item: item[1][0][1]["type"] != "extra_forbidden")
    for key, members in ordered:
        if len(members) == 1:
            loc, detail = members[0]
            problems.append(FieldProblem(loc, _sentence(model, loc, detail)))
            continue
        # Union members: the one that got deeper than the union itself understood the input
        # (e.g. it was a list, and one element was wrong); report that one, else say every
        # form the field accepts.
        deeper = [(loc, detail) for loc, detail in members if len(loc) > len(key)]
        if deeper:
            problems.extend(FieldProblem(loc, _sentence(model, loc, d)) for loc, d in deeper)
            continue
        wanted = _join_or([_expected(detail, model, loc) for loc, detail in members])
        hint = next((h for _, d in members if (h := _did_you_mean(d))), "")
        given = show(members[0][1]["input"])
        problems.append(FieldProblem(key, f"expected {wanted}; got {given}{hint}"))
    return problems


def _sentence(model: type[BaseModel], loc: Loc, detail: dict[str, Any]) -> str:
    kind = detail["type"]
    if kind == "extra_forbidden":
        allowed = fields_at(model, loc[:-1])
        name = str(loc[-1]) if loc else "?"
        if allowed:
            return f"unknown field {name!r}; expected one of: " + ", ".join(
                closest_first(name, allowed)
            )
        return f"unknown field {name!r}"
    if kind == "missing":
        return f"missing required field {str(loc[-1])!r}" if loc else "missing value"
    if kind == "string_pattern_mismatch":
        return f"{show(detail['input'])} does not match the pattern {detail['ctx']['pattern']}"
    message = str(detail["msg"])
    if message.startswith("Value error, "):
        return message.removeprefix("Value error, ")
    if message.startswith("Assertion failed, "):
        return message.removeprefix("Assertion failed, ")
    return (
        f"expected {_expected(detail, model, loc)}; got {show(detail['input'])}"
        f"{_did_you_mean(detail)}"
    )


def _did_you_mean(detail: dict[str, Any]) -> str:
    """For a choice among words (a Literal or an enum), the closest word to a misspelling."""
    expected = (detail.get("ctx") or {}).get("expected")
    given = detail.get("input")
    if not isinstance(expected, str) or not isinstance(given, str):
        return ""
    choices = re.findall(r"'([^']*)'", expected)
    close = difflib.get_close_matches(given, choices, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _expected(detail: dict[str, Any], model: type[BaseModel], loc: Loc) -> str:
    if detail["type"] == "model_type":  # pydantic names the class; the author knows its keys
        return _mapping_of(model, loc, str((detail.get("ctx") or {}).get("class_name")))
    message = str(detail["msg"])
    for prefix in ("Input should be ", "Value error, "):
        if message.startswith(prefix):
            message = message.removeprefix(prefix)
            break
    return (
        message.replace("a valid dictionary", "a mapping")
        .replace("a valid list", "a list")
        .replace("a valid boolean", "true or false")
    )


def _mapping_of(model: type[BaseModel], loc: Loc, class_name: str) -> str:
    """What the model called `class_name` at `loc` is written as: a mapping {its keys}."""
    current: Any = model
    for part in loc:
        current = _step(_unwrap_optional(current), part)
    found = next((m for m in _models_in(current) if m.__name__ == class_name), None)
    if found is None:
        return "a mapping"
    keys = [info.alias or name for name, info in found.model_fields.items()]
    return f"a mapping {{{', '.join(keys)}}}" if keys else "a mapping"


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models `annotation` is, or is a union or `Annotated` of."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _models_in(typing.get_args(annotation)[0])
    if _is_union(annotation):
        return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]
    return []


def _join_or(parts: list[str]) -> str:
    unique = list(dict.fromkeys(parts))
    if len(unique) == 1:
        return unique[0]
    # "true or false, or a mapping": a comma where a part has an "or" of its own.
    last = ", or " if any(" or " in part for part in unique) else " or "
    return ", ".join(unique[:-1]) + last + unique[-1]


def _clean_loc(model: type[BaseModel], loc: Loc) -> tuple[Loc, Loc | None]:
    """Drop pydantic's union-member tags from `loc`.

    Returns the cleaned path and, when the path passed through a union, the path of the union
    field itself (so the errors of its members can be grouped).
    """
    cleaned: list[str | int] = []
    union_at: Loc | None = None
    current: Any = model
    for part in loc:
        current = _unwrap_optional(current)
        if _is_union(current) and isinstance(part, str):
            if union_at is None:
                union_at = tuple(cleaned)
            current = Any  # which member the rest of the path belongs to is not needed
            continue
        cleaned.append(part)
        current = _step(current, part)
    return tuple(cleaned), union_at


def fields_at(model: type[BaseModel], loc: Loc) -> list[str]:
    """The field names of the model found at `loc` inside `model`, or [] if none is."""
    current: Any = model
    for part in loc:
        current = _step(_unwrap_optional(current), part)
    current = _unwrap_optional(current)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return [info.alias or name for name, info in current.model_fields.items()]
    return []


def _step(current: Any, part: str | int) -> Any:
    if isinstance(current, type) and issubclass(current, BaseModel):
        for name, info in current.model_fields.items():
            if part in (name, info.alias):
                return info.annotation
        return Any
    origin = typing.get_origin(current)
    args = typing.get_args(current)
    if origin in (list, tuple, set, frozenset) and args:
        return args[0]
    if origin is dict and len(args) == 2:
        return args[1]
    return Any


def _is_union(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    return origin in (typing.Union, types.UnionType)


def _unwrap_optional(annotation: Any) -> Any:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _unwrap_optional(typing.get_args(annotation)[0])
    if _is_union(annotation):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(members) == 1:
            return _unwrap_optional(members[0])
    return annotation


REFERENCE_PATTERN = r"^[^:\s]+:[A-Za-z_][\w.]*$"


def check_reference(value: str, example: str) -> str:
    """`value` if it reads `module:attribute` (or `file.py:attribute`), else ValueError."""
    if not re.match(REFERENCE_PATTERN, value):
        raise ValueError(
            f"expected 'module:attribute' (e.g. {example!r}) or 'path/to/file.py:attribute'; "
            f"got {value!r}"
        )
    return value


# A suite plugin is a whole module: `pkg.module`, or a file `path/to/file.py`.
PLUGIN_PATTERN = r"^(?:[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*|[^:\s][^:]*\.py)$"


def check_plugin(value: str) -> str:
    """`value` if it names a module or a .py file, else ValueError saying which forms work."""
    if re.match(PLUGIN_PATTERN, value):
        return value
    hint = ""
    if re.match(REFERENCE_PATTERN, value):
        hint = f" (a plugin is a whole module: write {value.partition(':')[0]!r})"
    raise ValueError(
        f"expected a module (e.g. 'checks.scorers') or a file ('path/to/file.py'); "
        f"got {value!r}{hint}"
    )
