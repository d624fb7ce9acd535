"""YAML loading that remembers where every value was written.

PyYAML's composer gives each node a start mark (line and column); `safe_load` throws them
away. `load_yaml` builds the same plain data as `yaml.safe_load` (merge keys and anchors
included) and keeps a map from each value's path (`("cases", 3, "expect", 1)`) to its
position, so a validation error found later can name the line it is about. Duplicate keys,
which PyYAML silently lets the last one win, are reported with both lines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

Loc = tuple[Any, ...]


@dataclass(frozen=True)
class Position:
    line: int  # 1-based
    column: int | None = None  # 1-based; None where unknown (a JSONL row)


class YamlSyntaxError(Exception):
    """The text is not valid YAML; `position` is where the parser gave up."""

    def __init__(self, message: str, position: Position | None) -> None:
        super().__init__(message)
        self.message = message
        self.position = position


@dataclass
class YamlDocument:
    """Plain data, where each part of it was written, and any duplicate keys found."""

    data: Any
    positions: dict[Loc, Position] = field(default_factory=dict)
    duplicates: list[tuple[Loc, Position, Position]] = field(default_factory=list)

    def position(self, loc: Sequence[Any]) -> Position | None:
        """Where `loc` was written, or its nearest written ancestor (for a missing key)."""
        path = tuple(loc)
        while True:
            found = self.positions.get(path)
            if found is not None or not path:
                return found
            path = path[:-1]


def _position(node: Node) -> Position:
    return Position(node.start_mark.line + 1, node.start_mark.column + 1)


def load_yaml(text: str) -> YamlDocument:
    """Parse one YAML document; raise YamlSyntaxError with the parser's line and column."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        document = YamlDocument(None)
        if node is not None:
            document.data = _Builder(loader, document).build(node, ())
        return document
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        position = Position(mark.line + 1, mark.column + 1) if mark else None
        message = ", ".join(part for part in (exc.context, exc.problem) if part)
        raise YamlSyntaxError(f"not valid YAML: {message}", position) from None
    except yaml.YAMLError as exc:
        raise YamlSyntaxError(f"not valid YAML: {exc}", None) from None
    finally:
        loader.dispose()


class _Builder:
    def __init__(self, loader: yaml.SafeLoader, document: YamlDocument) -> None:
        self.loader = loader
        self.document = document
        self.open: set[int] = set()  # nodes being built: a recursive alias would never end

    def build(self, node: Node, loc: Loc) -> Any:
        self.document.positions.setdefault(loc, _position(node))
        if isinstance(node, ScalarNode):
            return self.loader.construct_object(node)
        if id(node) in self.open:
            raise yaml.constructor.ConstructorError(
                None, None, "a recursive alias refers to itself", node.start_mark
            )
        self.open.add(id(node))
        try:
            if isinstance(node, SequenceNode):
                return [self.build(child, (*loc, i)) for i, child in enumerate(node.value)]
            if isinstance(node, MappingNode):
                return self._mapping(node, loc)
            return self.loader.construct_object(node)
        finally:
            self.open.discard(id(node))

    def _mapping(self, node: MappingNode, loc: Loc) -> dict[Any, Any]:
        self.loader.flatten_mapping(node)  # resolves `<<: *anchor` merge keys
        built: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = self.loader.construct_object(key_node)
            if isinstance(key, list | dict):
                raise yaml.constructor.ConstructorError(
                    None, None, "a mapping key must be a plain value", key_node.start_mark
                )
            where = (*loc, key)
            if key in built:
                self.document.duplicates.append(
                    (where, _position(key_node), self.document.positions[where])
                )
            # A key's line is where a person looks for it (a block value starts a line later).
            self.document.positions[where] = _position(key_node)
            built[key] = self.build(value_node, where)
        return built
