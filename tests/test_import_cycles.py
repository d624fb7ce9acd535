"""agentbench's modules import one another without circles.

The graph is read from the source with `ast`, not by importing: an edge is an import that runs
when its module is imported (top level, class bodies, `if`/`try`/`with` blocks), whether
absolute (`from agentbench.evals import x`) or relative (`from . import x`). Imports inside a
function are lazy by design (a heavy dependency loaded only when used) and are not edges, nor
are imports under `if TYPE_CHECKING:`, which never run. A circle fails the test, named as a
path: `agentbench.a -> agentbench.b -> agentbench.a`.

A circle is not broken by hiding one of its imports in a function or under `TYPE_CHECKING`:
the two modules still need each other. So a second graph counts those imports too, and must
have no circle either; the cure is to move what both need where both can import it.
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Iterator
from pathlib import Path

import agentbench

PACKAGE = Path(agentbench.__file__).parent
ROOT = "agentbench"


def module_files(package: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the package by its dotted name (a package by its `__init__.py`)."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def eager_imports(
    body: list[ast.stmt], *, hidden: bool = False
) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements that run when a module's body runs; with `hidden`, also those in
    its functions and under `if TYPE_CHECKING:`."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if hidden:  # else it runs when called: a lazy import
                yield from eager_imports(node.body, hidden=hidden)
        elif isinstance(node, ast.If) and is_type_checking(node.test):
            if hidden:
                yield from eager_imports(node.body, hidden=hidden)
            yield from eager_imports(node.orelse, hidden=hidden)
        else:
            for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                inner = getattr(node, field, None)
                if isinstance(inner, list):
                    yield from eager_imports(
                        [s for item in inner for s in getattr(item, "body", [item])]
                        if field in ("handlers", "cases")
                        else inner,
                        hidden=hidden,
                    )


def imported_modules(
    name: str, path: Path, modules: dict[str, Path], *, hidden: bool = False
) -> Iterator[str]:
    """The package's modules that `name` imports when it is imported (`hidden`: or later)."""
    is_package = path.name == "__init__.py"
    for node in eager_imports(ast.parse(path.read_text(), str(path)).body, hidden=hidden):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = name.split(".")
                anchor = anchor if is_package else anchor[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            # `from package import module` imports the module; `from module import name`
            # imports the module that defines the name.
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                for alias in node.names
            ]
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target.split(".")[0] == ROOT and target != name:
                yield target


def import_graph(modules: dict[str, Path], *, hidden: bool = False) -> dict[str, set[str]]:
    return {
        name: set(imported_modules(name, path, modules, hidden=hidden))
        for name, path in modules.items()
    }


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's components, iteratively: the groups of modules that reach one another."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                components.append(component)
    return components


def shortest_path(graph: dict[str, set[str]], start: str, goal: str, within: set[str]) -> list[str]:
    came_from: dict[str, str | None] = {start: None}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        if node == goal:
            path = []
            step: str | None = node
            while step is not None:
                path.append(step)
                step = came_from[step]
            return path[::-1]
        for child in sorted(graph[node] & within):
            if child not in came_from:
                came_from[child] = node
                queue.append(child)
    raise AssertionError(f"{goal} is not reachable from {start} inside its component")


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One shortest circle through each import edge that lies on a circle, without repeats:
    every edge listed is one that has to go for the circle to break."""
    found: dict[tuple[str, ...], list[str]] = {}
    for component in strongly_connected(graph):
        if len(component) < 2:
            continue
        for source in sorted(component):
            for target in sorted(graph[source] & component):
                circle = [source, *shortest_path(graph, target, source, component)]
                turn = circle.index(min(circle[:-1]))
                canonical = [*circle[turn:-1], *circle[:turn], circle[turn]]
                found.setdefault(tuple(canonical), canonical)
    return sorted(found.values())


def test_the_graph_sees_every_kind_of_module_level_import(tmp_path: Path) -> None:
    package = tmp_path / ROOT
    (package / "sub").mkdir(parents=True)
    sources = {
        "__init__.py": "",
        "a.py": "from agentbench import b\n",
        "b.py": "from .sub import c\nclass K:\n    from agentbench.sub.d import X\n",
        "sub/__init__.py": "",
        "sub/c.py": (
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from agentbench import e\n"
            "try:\n    from ..e import thing\nexcept ImportError:\n    import agentbench.f\n"
            "def lazy():\n    from agentbench import g\n"
        ),
        "sub/d.py": "import agentbench.sub as sub\n",
        "e.py": "",
        "f.py": "",
        "g.py": "",
    }
    for relative, text in sources.items():
        (package / relative).write_text(text)
    graph = import_graph(module_files(package))
    assert graph["agentbench.a"] == {"agentbench.b"}
    assert graph["agentbench.b"] == {"agentbench.sub.c", "agentbench.sub.d"}
    assert graph["agentbench.sub.c"] == {"agentbench.e", "agentbench.f"}
    assert graph["agentbench.sub.d"] == {"agentbench.sub"}
    assert graph["agentbench.g"] == set()
    everything = import_graph(module_files(package), hidden=True)
    assert everything["agentbench.sub.c"] == {"agentbench.e", "agentbench.f", "agentbench.g"}


def test_a_circle_is_named_as_a_path() -> None:
    graph = {
        "agentbench.a": {"agentbench.b"},
        "agentbench.b": {"agentbench.a", "agentbench.c"},
        "agentbench.c": {"agentbench.d"},
        "agentbench.d": {"agentbench.b"},
        "agentbench.e": {"agentbench.a"},
    }
    assert cycles(graph) == [
        ["agentbench.a", "agentbench.b", "agentbench.a"],
        ["agentbench.b", "agentbench.c", "agentbench.d", "agentbench.b"],
    ]


def test_agentbench_has_no_import_circles() -> None:
    found = cycles(import_graph(module_files()))
    assert not found, f"{len(found)} import circle(s) in agentbench:\n" + "\n".join(
        " -> ".join(circle) for circle in found
    )


def test_no_import_circle_hides_in_a_function_or_under_type_checking() -> None:
    found = cycles(import_graph(module_files(), hidden=True))
    assert not found, (
        f"{len(found)} import circle(s) in agentbench, counting imports inside functions and "
        "under TYPE_CHECKING (move what both modules need where both can import it):\n"
        + "\n".join(" -> ".join(circle) for circle in found)
    )
