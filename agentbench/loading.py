"""Import user code: `module:attribute` objects (agents, scorers) and modules (suite plugins)."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from agentbench.errors import UsageError


def load_object(ref: str, *, what: str = "object", search_path: Path | None = None) -> Any:
    """`pkg.module:name` (or `path/to/file.py:name`) → the object; `name` may be dotted."""
    module_name, sep, attribute = ref.partition(":")
    if not sep or not module_name or not attribute:
        raise UsageError(f"{what} {ref!r}: expected 'module:attribute', e.g. 'myapp.agents:triage'")
    try:
        module = import_module(module_name, search_path=search_path)
    except ImportError as exc:
        raise UsageError(f"{what} {ref!r}: cannot import {module_name!r}: {exc}") from None
    except (Exception, SystemExit) as exc:
        # The user's module failed while it ran (a bug in it, a missing setting): that is
        # theirs to fix, named as such — not a crash of agentbench.
        message = " ".join(str(exc).split()) or "(no message)"
        raise UsageError(
            f"{what}: importing {module_name!r} raised {type(exc).__name__}: {message}"
        ) from exc
    target: Any = module
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise UsageError(
                f"{what} {ref!r}: module {module_name!r} has no attribute {attribute!r}"
            ) from None
    return target


def import_module(name: str, *, search_path: Path | None = None) -> ModuleType:
    """`pkg.module` (imported with `search_path` first on sys.path) or `path/to/file.py`.

    A relative file path is relative to `search_path` when given (else to the working
    folder). Whatever the module raises while it runs propagates unchanged.
    """
    if search_path is not None and str(search_path) not in sys.path:
        sys.path.insert(0, str(search_path))
    if not name.endswith(".py"):
        return importlib.import_module(name)
    path = Path(name)
    if search_path is not None and not path.is_absolute():
        path = search_path / path
    return _import_file(path)


def _import_file(path: Path) -> ModuleType:
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
    try:
        spec.loader.exec_module(module)
    except BaseException:
        # As importlib does: a half-run module must not be found, half-built, next time.
        del sys.modules[name]
        raise
    return module
