"""Import user objects named `module:attribute` (agents, scorers), with errors that say why."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

from agentbench.errors import UsageError


def load_object(ref: str, *, what: str = "object", search_path: Path | None = None) -> Any:
    """`pkg.module:name` (or `path/to/file.py:name`) → the object; `name` may be dotted."""
    module_name, sep, attribute = ref.partition(":")
    if not sep or not module_name or not attribute:
        raise UsageError(f"{what} {ref!r}: expected 'module:attribute', e.g. 'myapp.agents:triage'")
    if search_path is not None and str(search_path) not in sys.path:
        sys.path.insert(0, str(search_path))
    try:
        if module_name.endswith(".py"):
            module = _import_file(Path(module_name))
        else:
            module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UsageError(f"{what} {ref!r}: cannot import {module_name!r}: {exc}") from None
    target: Any = module
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise UsageError(
                f"{what} {ref!r}: module {module_name!r} has no attribute {attribute!r}"
            ) from None
    return target


def _import_file(path: Path) -> Any:
    if not path.is_file():
        raise ImportError(f"no such file {path}")
    # Keyed by content version too: a file edited since it was imported is imported afresh.
    stamp = path.stat().st_mtime_ns
    name = f"agentbench_user_{abs(hash((path.resolve(), stamp)))}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
