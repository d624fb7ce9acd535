"""Plain YAML documents built straight from libyaml's events: one parse, bounds checked on the way.

A cassette is read many times per eval, and PyYAML's way costs three passes over it: a walk of
the parser's events for the bounds (`yaml_source.check_yaml_bounds`), then libyaml's parse
again to compose a node tree, then PyYAML's generic constructor over every node. For the
documents vcrpy and agentbench write — one document of mappings, sequences and scalars, no
anchors, aliases or explicit tags — the data can be built in the walk itself. `load_plain`
does that, with the loader's own resolver and constructors for every scalar that is not a
string, so the result is what `yaml.load(text, Loader=loader)` returns; anything else (an
alias, a tag, a merge key, a second document, a syntax error, nesting deeper than the bound)
raises `NotPlainError`, and the caller takes the full path, which reports it as it always has.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.events import (
    DocumentEndEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
    StreamStartEvent,
)
from yaml.nodes import ScalarNode

_STR = "tag:yaml.org,2002:str"
# Scalars the safe constructors build on their own, from the scalar alone; any other tag
# (a merge key `<<`, a `=` value key, a custom tag) needs the full constructor.
_SCALAR_TAGS = frozenset(
    f"tag:yaml.org,2002:{kind}" for kind in ("null", "bool", "int", "float", "binary", "timestamp")
)
_NO_KEY = object()


class NotPlainError(Exception):
    """The document needs the full loader (or has an error the full loader reports)."""


def fast_path_for(loader: Any) -> bool:
    """Whether `load_plain` can stand in for `loader`: libyaml's parser must be underneath."""
    cparser = getattr(getattr(yaml, "cyaml", None), "CParser", None)
    return cparser is not None and isinstance(loader, type) and issubclass(loader, cparser)


def load_plain(text: str, loader: Any, max_depth: int) -> Any:
    """The data of the single plain YAML document in `text`, as `loader` would build it.

    Raises NotPlainError when the document is anything but plain, or deeper than `max_depth`
    collections, or not valid YAML.
    """
    parser = loader(text)
    try:
        return _build(parser, max_depth)
    except NotPlainError:
        raise
    except (yaml.YAMLError, ValueError, TypeError, OverflowError) as exc:
        raise NotPlainError(str(exc)) from None
    finally:
        parser.dispose()


def _build(parser: Any, max_depth: int) -> Any:
    get = parser.get_event
    if not isinstance(get(), StreamStartEvent):
        raise NotPlainError("no stream")
    event = get()
    if isinstance(event, StreamEndEvent):
        return None  # no document at all (comments only): what yaml.load returns
    if not isinstance(event, DocumentStartEvent):
        raise NotPlainError("no document")
    resolved: dict[str, str] = {}  # plain scalars repeat (keys above all): resolve each once
    # Open collections: [the list or dict, the key waiting for its value]; the root's holder.
    stack: list[list[Any]] = [[[], _NO_KEY]]
    while True:
        event = get()
        kind = type(event)
        if kind is ScalarEvent:
            _put(stack[-1], _scalar(parser, event, resolved))
        elif kind is MappingStartEvent or kind is SequenceStartEvent:
            _check_plain(event)
            if len(stack) > max_depth:
                raise NotPlainError("too deep")
            stack.append([{} if kind is MappingStartEvent else [], _NO_KEY])
        elif kind is MappingEndEvent or kind is SequenceEndEvent:
            _put(stack[-2], stack.pop()[0])
        elif kind is DocumentEndEvent:
            break
        else:  # an alias, or an event out of place
            raise NotPlainError(type(event).__name__)
    if not isinstance(get(), StreamEndEvent):
        raise NotPlainError("more than one document")
    held = stack[0][0]
    if len(held) != 1:
        raise NotPlainError("no root node")
    return held[0]


def _put(frame: list[Any], value: Any) -> None:
    """Add `value` to the open collection of `frame`: an item, a key, or a key's value."""
    container = frame[0]
    if type(container) is list:
        container.append(value)
    elif frame[1] is _NO_KEY:
        if type(value) in (dict, list):
            raise NotPlainError("a collection as a key")
        frame[1] = value
    else:
        container[frame[1]] = value
        frame[1] = _NO_KEY


def _check_plain(event: Any) -> None:
    if event.anchor is not None or event.tag is not None:
        raise NotPlainError("anchor or tag")


def _scalar(parser: Any, event: ScalarEvent, resolved: dict[str, str]) -> Any:
    """A scalar's value, resolved (a plain one) and built by the loader's constructors."""
    _check_plain(event)
    value: Any = event.value
    if not event.implicit[0]:
        return value  # quoted: a string
    tag = resolved.get(value)
    if tag is None:
        tag = resolved[value] = parser.resolve(ScalarNode, value, event.implicit)
    if tag == _STR:
        return value
    if tag not in _SCALAR_TAGS:
        raise NotPlainError(tag)
    node = ScalarNode(tag, value, event.start_mark, event.end_mark, event.style)
    return parser.yaml_constructors[tag](parser, node)
