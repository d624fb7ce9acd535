"""Reading suite and cassette files within bounds, and YAML that remembers where values were.

PyYAML's composer gives each node a start mark (line and column); `safe_load` throws them
away. `load_yaml` builds the same plain data as `yaml.safe_load` (merge keys and anchors
included) and keeps a map from each value's path (`("cases", 3, "expect", 1)`) to its
position, so a validation error found later can name the line it is about. Duplicate keys,
which PyYAML silently lets the last one win, are reported with both lines.

Files come from people and from other programs, so nothing here trusts them to be small or
sane: `read_source` reads at most `max_file_bytes()` of a regular file as UTF-8, and
`check_yaml_bounds` / `check_json_depth` refuse nesting deeper than `MAX_DEPTH` and aliases
that expand to more than `MAX_ALIAS_VALUES` values (the "billion laughs" bomb) by walking the
parser's events, before any value is built, so a hostile file costs no more than its own size.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from yaml.events import AliasEvent, CollectionEndEvent, CollectionStartEvent, ScalarEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from agentbench.errors import UsageError

Loc = tuple[Any, ...]

# Python's own recursion gives out near 1,000 levels (PyYAML's composer, `json.loads`, the
# code that walks the data afterwards); no hand-written suite or recorded cassette comes near 100.
MAX_DEPTH = 100
# Values that aliases may add to one document, counted as they would be expanded: anchors are
# for small shared blocks (`<<: *defaults`), and a few hundred bytes of nested aliases can
# otherwise expand to billions of values.
MAX_ALIAS_VALUES = 10_000
MAX_FILE_MB_ENV = "AGENTBENCH_MAX_FILE_MB"
DEFAULT_MAX_FILE_MB = 16
# The parser used for the bounds walk: libyaml's when installed (vcrpy reads cassettes with it),
# which is linear where PyYAML's scanner is quadratic in the depth of flow nesting.
_FAST_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class Position:
    line: int  # 1-based
    column: int | None = None  # 1-based; None where unknown (a JSONL row)


class SourceError(Exception):
    """A file cannot be used as it is; `position` is where in it, when there is a place."""

    def __init__(self, message: str, position: Position | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.position = position


class YamlSyntaxError(SourceError):
    """The text is not valid YAML, or is beyond a bound; `position` is where it was found."""


def max_file_bytes() -> int:
    """The largest suite, case or cassette file read: `AGENTBENCH_MAX_FILE_MB` (default 16)."""
    raw = os.environ.get(MAX_FILE_MB_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_FILE_MB * 2**20
    try:
        megabytes = float(raw)
    except ValueError:
        megabytes = 0.0
    if not 0 < megabytes < 2**20:  # also refuses nan and inf
        raise UsageError(
            f"{MAX_FILE_MB_ENV}={raw!r}: expected a positive number of megabytes "
            f"(default {DEFAULT_MAX_FILE_MB})"
        )
    return max(1, int(megabytes * 2**20))


def read_source(path: Path) -> str:
    """The UTF-8 text of a regular file of at most `max_file_bytes()`; SourceError if not."""
    data = read_bytes(path, max_file_bytes(), _too_big)
    encoding = wrong_encoding(data)
    if encoding is not None:
        raise SourceError(f"{encoding}; save the file as UTF-8", Position(1, 1))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        message, where = not_utf8(data, exc)
        raise SourceError(f"{message}; save the file as UTF-8", where) from None
    return text.removeprefix("\ufeff")  # a byte-order mark some editors write; JSON rejects it


def read_bytes(path: Path, limit: int, too_big: Callable[[int, int], str]) -> bytes:
    """The bytes of a regular file of at most `limit` bytes, never reading more than that (and
    one): SourceError if it is no regular file (a named pipe would block the read forever, a
    device may never end), cannot be read, or is bigger (`too_big(size, limit)` says so)."""
    try:
        info = path.stat()  # follows links: a loop or a dangling link fails here, by name
        if not stat.S_ISREG(info.st_mode):
            raise SourceError(f"not a regular file ({file_kind(info.st_mode)}); expected text")
        if info.st_size > limit:
            raise SourceError(too_big(info.st_size, limit))
        with open(path, "rb") as stream:
            data = stream.read(limit + 1)  # it may have grown since stat
    except OSError as exc:
        raise SourceError(f"cannot read the file: {_os_reason(path, exc)}") from None
    if len(data) > limit:
        raise SourceError(too_big(len(data), limit))
    return data


# Byte-order marks of the encodings a text file saved by mistake is most often in.
_BOMS = (
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"),
    (b"\xfe\xff", "UTF-16"),
)


def wrong_encoding(data: bytes) -> str | None:
    """`not UTF-8 text: it is UTF-16 (...)` when `data` is plainly UTF-16 or UTF-32 (a
    byte-order mark, or ASCII text with NUL bytes between its characters, which UTF-8
    decoding alone would take), else None."""
    found = next((name for bom, name in _BOMS if data.startswith(bom)), None)
    head = data[:64]
    nuls = head.count(0)
    if found is None and len(head) >= 4 and nuls * 2 >= len(head) and head.isascii():
        found = "UTF-32" if nuls * 4 >= len(head) * 3 else "UTF-16"
    if found is None:
        return None
    return f"not UTF-8 text: it is {found} (convert it: iconv -f {found} -t UTF-8)"


def not_utf8(data: bytes, exc: UnicodeDecodeError, first_line: int = 1) -> tuple[str, Position]:
    """What is wrong with `data` (a file's bytes, or its line `first_line`), which are not
    UTF-8, and where: `not UTF-8 text: byte 0xE9 at line 2, column 8 (...)`."""
    line_start = data.rfind(b"\n", 0, exc.start) + 1
    where = Position(first_line + data.count(b"\n", 0, exc.start), exc.start - line_start + 1)
    byte = data[exc.start]
    guess = " (Latin-1 or Windows-1252 text?)" if byte >= 0xA0 else ""
    return (
        f"not UTF-8 text: byte 0x{byte:02X} at line {where.line}, column {where.column} "
        f"({exc.reason}){guess}",
        where,
    )


def _too_big(size: int, limit: int) -> str:
    return (
        f"the file is {size:,} bytes, over the limit of {limit:,} bytes for suite, case and "
        f"cassette files (set {MAX_FILE_MB_ENV} to raise it)"
    )


def file_kind(mode: int) -> str:
    kinds = {
        stat.S_IFDIR: "a folder",
        stat.S_IFIFO: "a named pipe",
        stat.S_IFCHR: "a character device",
        stat.S_IFBLK: "a block device",
        stat.S_IFSOCK: "a socket",
    }
    return kinds.get(stat.S_IFMT(mode), "not a file")


def _os_reason(path: Path, exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "a loop of symbolic links (a link that leads back to itself)"
    if exc.errno == errno.ENOENT and path.is_symlink():
        return f"a symbolic link to {os.readlink(path)}, which does not exist"
    return exc.strerror or str(exc)


def check_yaml_bounds(text: str, loader: Any = _FAST_LOADER) -> bool:
    """Refuse (YamlSyntaxError) nesting deeper than MAX_DEPTH and aliases that would expand to
    more than MAX_ALIAS_VALUES values, walking the parser's events: nothing is built.

    Returns False at a syntax error, which the parse that follows reports in its own words.
    """
    walk = _BoundsWalk()
    parser = None
    try:
        parser = loader(text)
        while parser.check_event():
            walk.see(parser.get_event())
    except yaml.MarkedYAMLError as exc:
        # libyaml scans far ahead and stops at 1,000 levels before a single event is seen.
        if "nesting depth" in str(exc.problem) and exc.problem_mark is not None:
            raise YamlSyntaxError(_TOO_DEEP.format(MAX_DEPTH, "mappings"), _mark(exc)) from None
        return False
    except yaml.YAMLError:
        return False
    finally:
        if parser is not None:
            parser.dispose()
    return True


class _BoundsWalk:
    """Counts, event by event, how deep the document is and how many values it expands to."""

    def __init__(self) -> None:
        self.sizes: dict[str, int] = {}  # anchor → how many values it stands for, expanded
        self.frames: list[list[Any]] = [[None, 0]]  # open collections: [anchor, values in it]
        self.aliased = 0

    def see(self, event: Any) -> None:
        if isinstance(event, CollectionStartEvent):
            self.frames.append([event.anchor, 1])
            if len(self.frames) - 1 > MAX_DEPTH:
                raise YamlSyntaxError(_TOO_DEEP.format(MAX_DEPTH, "mappings"), _mark(event))
        elif isinstance(event, CollectionEndEvent):
            anchor, size = self.frames.pop()
            self._add(anchor, size)
        elif isinstance(event, ScalarEvent):
            self._add(event.anchor, 1)
        elif isinstance(event, AliasEvent):
            # An alias to an unknown or still-open anchor is the parse's error to report.
            size = self.sizes.get(event.anchor, 1)
            self.aliased += size
            if self.aliased > MAX_ALIAS_VALUES:
                raise YamlSyntaxError(
                    f"aliases expand to more than {MAX_ALIAS_VALUES:,} values (an alias bomb?); "
                    "refused before expanding them: write the values out or use fewer aliases",
                    _mark(event),
                )
            self._add(None, size)

    def _add(self, anchor: str | None, size: int) -> None:
        if anchor is not None:
            self.sizes[anchor] = size
        self.frames[-1][1] += size


_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def check_json_depth(text: str) -> None:
    """Refuse (SourceError) JSON nested deeper than MAX_DEPTH before a recursive parser sees it."""
    depth = 0
    for match in _JSON_TOKEN.finditer(text):
        opener = match.group()
        if opener in ("[", "{"):
            depth += 1
            if depth > MAX_DEPTH:
                start = match.start()
                line_start = text.rfind("\n", 0, start) + 1
                raise SourceError(
                    _TOO_DEEP.format(MAX_DEPTH, "objects"),
                    Position(text.count("\n", 0, start) + 1, start - line_start + 1),
                )
        elif opener in ("]", "}"):
            depth -= 1


_TOO_DEEP = "nested deeper than {} levels of lists and {}; expected flatter data"


def _mark(found: Any) -> Position:
    """Where an event starts, or where a parser error was found."""
    mark = getattr(found, "start_mark", None) or found.problem_mark
    return Position(mark.line + 1, mark.column + 1)


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


def _document(loader: Any, node: Node | None) -> YamlDocument:
    """The document of a composed node tree, positions kept."""
    document = YamlDocument(None)
    if node is not None:
        document.data = _Builder(loader, document).build(node, ())
    return document


def _load_fast(text: str) -> YamlDocument | None:
    """The document through libyaml, or None when that path cannot give it: PyYAML's own
    composer then reports any error in its words, as it always has."""
    fast = _compose_fast(text)
    if fast is None:
        return None
    loader, node = fast
    try:
        return _document(loader, node)
    except yaml.YAMLError:
        return None
    finally:
        loader.dispose()


def load_yaml(text: str) -> YamlDocument:
    """Parse one YAML document; raise YamlSyntaxError with the parser's line and column."""
    walked = _load_walk(text)
    if walked is not None:
        return walked
    if not check_yaml_bounds(text) and _FAST_LOADER is not yaml.SafeLoader:
        # libyaml gave up early; PyYAML may read further, so it walks the text within bounds too.
        check_yaml_bounds(text, yaml.SafeLoader)
    fast = _load_fast(text)
    if fast is not None:
        return fast
    loader = None
    try:
        loader = yaml.SafeLoader(text)  # it checks the characters as it starts
        return _document(loader, loader.get_single_node())
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        position = Position(mark.line + 1, mark.column + 1) if mark else None
        message = ", ".join(part for part in (exc.context, exc.problem) if part)
        raise YamlSyntaxError(f"not valid YAML: {message}", position) from None
    except yaml.reader.ReaderError as exc:
        # A control character or the like: its position is an offset, not a line.
        position = Position(text.count("\n", 0, exc.position) + 1)
        char = exc.character
        shown = f"#x{char:04x}" if isinstance(char, int) else repr(char)
        raise YamlSyntaxError(
            f"not valid YAML: unacceptable character {shown}: {exc.reason}", position
        ) from None
    except yaml.YAMLError as exc:
        raise YamlSyntaxError(f"not valid YAML: {exc}", None) from None
    finally:
        if loader is not None:
            loader.dispose()


def _load_walk(text: str) -> YamlDocument | None:
    """The document built in one walk of libyaml's events — what `_load_fast` builds from
    the composed tree, positions and duplicates included, with no tree, no second parse for
    the bounds and no walk for `?` — or None for anything but a plain document within
    bounds (an anchor, alias, tag or merge key, nesting past MAX_DEPTH, a `?` in a flow
    scalar, an error): the other paths then read it and report what is wrong as ever."""
    loader = _libyaml_loader(text)
    if loader is None:
        return None
    try:
        return _EventWalk(loader).document()
    except (_NotPlainError, yaml.YAMLError, ValueError, TypeError, OverflowError):
        return None
    finally:
        loader.dispose()


class _NotPlainError(Exception):
    """The document is not for `_load_walk`."""


_WALK_STR = "tag:yaml.org,2002:str"
_WALK_SCALAR_TAGS = frozenset(
    f"tag:yaml.org,2002:{kind}" for kind in ("null", "bool", "int", "float", "binary", "timestamp")
)
_SHARED_CHARS = 64  # equal short texts (keys above all) are kept as one string object
_NO_KEY = object()


class _EventWalk:
    """Builds the data, positions and duplicates `_Builder` would, from events. Each open
    collection is a frame: [container, its location, inside a flow collection, the key
    waiting for its value (or _NO_KEY), is the root's holder]."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader
        self.built = YamlDocument(None)
        self.resolved: dict[str, str] = {}
        self.shared: dict[str, str] = {}

    def document(self) -> YamlDocument:
        get = self.loader.get_event
        if not isinstance(get(), yaml.StreamStartEvent):
            raise _NotPlainError
        event = get()
        if isinstance(event, yaml.StreamEndEvent):
            return self.built  # no document: what safe_load gives (None)
        if not isinstance(event, yaml.DocumentStartEvent):
            raise _NotPlainError
        root: list[Any] = [[], (), False, _NO_KEY, True]
        stack = [root]
        positions = self.built.positions
        while True:
            event = get()
            kind = type(event)
            if kind is yaml.ScalarEvent:
                self._scalar_event(stack[-1], event)
            elif kind is yaml.MappingStartEvent or kind is yaml.SequenceStartEvent:
                if event.anchor is not None or event.tag is not None or len(stack) > MAX_DEPTH:
                    raise _NotPlainError
                parent = stack[-1]
                if type(parent[0]) is dict and parent[3] is _NO_KEY:
                    raise _NotPlainError  # a collection as a key
                loc = _next_location(parent)
                positions.setdefault(loc, _event_position(event))
                container: Any = {} if kind is yaml.MappingStartEvent else []
                in_flow = parent[2] or bool(event.flow_style)
                stack.append([container, loc, in_flow, _NO_KEY, False])
            elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
                _put(stack[-2], stack.pop()[0])
            elif kind is yaml.DocumentEndEvent:
                break
            else:  # an alias, or an event out of place
                raise _NotPlainError
        if not isinstance(get(), yaml.StreamEndEvent) or len(root[0]) != 1:
            raise _NotPlainError
        self.built.data = root[0][0]
        return self.built

    def _scalar_event(self, frame: list[Any], event: Any) -> None:
        value = self._scalar(event, frame[2])
        positions = self.built.positions
        if type(frame[0]) is dict and frame[3] is _NO_KEY:
            # A key: its line is where a person looks for it (a block value starts a line
            # later); a key written twice keeps both lines.
            where = (*frame[1], value)
            position = _event_position(event)
            if value in frame[0]:
                self.built.duplicates.append((where, position, positions[where]))
            positions[where] = position
            frame[3] = value
            return
        positions.setdefault(_next_location(frame), _event_position(event))
        _put(frame, value)

    def _scalar(self, event: Any, in_flow: bool) -> Any:
        if event.anchor is not None or event.tag is not None:
            raise _NotPlainError
        value: str = event.value
        if len(value) <= _SHARED_CHARS:
            value = self.shared.setdefault(value, value)
        if not event.implicit[0]:
            return value  # quoted: a string
        if in_flow and "?" in value:
            raise _NotPlainError  # PyYAML ends a plain scalar there
        tag = self.resolved.get(value)
        if tag is None:
            tag = self.resolved[value] = self.loader.resolve(ScalarNode, value, event.implicit)
        if tag == _WALK_STR:
            return value
        if tag not in _WALK_SCALAR_TAGS:
            raise _NotPlainError  # a merge key `<<`, a value key `=`
        node = ScalarNode(tag, value, event.start_mark, event.end_mark, event.style)
        return self.loader.yaml_constructors[tag](self.loader, node)


def _next_location(frame: list[Any]) -> Loc:
    """Where the next value put in `frame`'s collection is (the root's holder: the root)."""
    if frame[4]:
        return ()
    container = frame[0]
    if type(container) is list:
        return (*frame[1], len(container))
    return (*frame[1], frame[3])


def _put(frame: list[Any], value: Any) -> None:
    container = frame[0]
    if type(container) is list:
        container.append(value)
    else:
        container[frame[3]] = value
        frame[3] = _NO_KEY


def _event_position(event: Any) -> Position:
    return Position(event.start_mark.line + 1, event.start_mark.column + 1)


def _libyaml_loader(text: str) -> Any:
    """libyaml's loader for `text`, or None when libyaml is not installed, the text needs
    what only PyYAML does, or holds characters PyYAML refuses (refused here too)."""
    if _FAST_LOADER is yaml.SafeLoader or _PYYAML_ONLY.search(text):
        return None
    try:
        yaml.reader.Reader(text)
    except yaml.YAMLError:
        return None
    return _FAST_LOADER(text)


def _compose_fast(text: str) -> tuple[Any, Node | None] | None:
    """libyaml's node tree of `text` (marks included) and its loader, or None when libyaml is
    not installed or finds anything wrong: a suite of thousands of cases composes ~14× faster
    than with PyYAML's composer, which still reads (and reports) everything else."""
    loader = _libyaml_loader(text)
    if loader is None:
        return None
    try:
        node = loader.get_single_node()
    except yaml.YAMLError:
        node = None
    if node is None or _question_in_flow(node):
        loader.dispose()
        return None
    return loader, node


# Where libyaml and PyYAML read the same text differently (tabs, a byte-order mark or Unicode
# line breaks inside the text shift columns or end tokens elsewhere; a comment right after a
# block scalar's indicator, which PyYAML refuses): PyYAML reads these.
_PYYAML_ONLY = re.compile("[\t\r\x85\u2028\u2029\ufeff]|[|>][-+0-9]*#")


def _question_in_flow(root: Node) -> bool:
    """Whether a plain scalar in a flow collection holds `?`: PyYAML ends the scalar there (and
    then fails), where libyaml reads on. A node met twice (an alias, maybe of a node inside
    itself) is answered True too: PyYAML reads documents with aliases, which are rare."""
    stack = [(root, False)]
    seen: set[int] = set()
    while stack:
        node, in_flow = stack.pop()
        if id(node) in seen:
            return True
        seen.add(id(node))
        if isinstance(node, ScalarNode):
            if in_flow and not node.style and "?" in node.value:
                return True
            continue
        in_flow = in_flow or bool(node.flow_style)
        children = node.value
        if isinstance(node, MappingNode):
            children = [part for pair in children for part in pair]
        stack.extend((child, in_flow) for child in children)
    return False


class _Builder:
    def __init__(self, loader: Any, document: YamlDocument) -> None:
        self.loader = loader
        self.document = document
        self.open: set[int] = set()  # nodes being built: a recursive alias would never end

    def build(self, node: Node, loc: Loc) -> Any:
        self.document.positions.setdefault(loc, _position(node))
        if isinstance(node, ScalarNode):
            return self._scalar(node)
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

    def _scalar(self, node: ScalarNode) -> Any:
        try:
            return self.loader.construct_object(node)
        except (ValueError, OverflowError) as exc:
            # PyYAML lets Python's own errors out: a 13th month, an integer of 5,000 digits.
            kind = str(node.tag).rsplit(":", 1)[-1]
            shown = node.value if len(node.value) <= 40 else node.value[:40] + "…"
            raise yaml.constructor.ConstructorError(
                None, None, f"the {kind} {shown!r} cannot be read: {exc}", node.start_mark
            ) from None

    def _mapping(self, node: MappingNode, loc: Loc) -> dict[Any, Any]:
        self.loader.flatten_mapping(node)  # resolves `<<: *anchor` merge keys
        built: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, ScalarNode):
                raise yaml.constructor.ConstructorError(
                    None, None, "a mapping key must be a plain value", key_node.start_mark
                )
            key = self._scalar(key_node)
            where = (*loc, key)
            if key in built:
                self.document.duplicates.append(
                    (where, _position(key_node), self.document.positions[where])
                )
            # A key's line is where a person looks for it (a block value starts a line later).
            self.document.positions[where] = _position(key_node)
            built[key] = self.build(value_node, where)
        return built
