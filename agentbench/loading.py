"""Import user code: `module:attribute` objects (agents, scorers) and modules (suite plugins)."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from agentbench.errors import UsageError, one_line


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
        raise UsageError(
            f"{what}: importing {module_name!r} raised {type(exc).__name__}: {one_line(exc)}"
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
    if search_path is not None:
        # First on the path, even if it was there already behind another checkout's root.
        while str(search_path) in sys.path:
            sys.path.remove(str(search_path))
        sys.path.insert(0, str(search_path))
        if not name.endswith(".py"):
            _forget_if_elsewhere(name.partition(".")[0], search_path)
    if not name.endswith(".py"):
        return importlib.import_module(name)
    path = Path(name)
    if search_path is not None and not path.is_absolute():
        path = search_path / path
    return _import_file(path)


def _forget_if_elsewhere(package: str, root: Path) -> None:
    """A package imported before from another folder (another checkout of the same suites)
    is forgotten, so `package` is imported from `root` as asked, not served stale."""
    module = sys.modules.get(package)
    if module is None or not ((root / package).is_dir() or (root / f"{package}.py").is_file()):
        return  # not imported yet, or `root` has no copy of its own (an installed package)
    origins = [Path(p) for p in getattr(module, "__path__", ())] or (
        [Path(module.__file__).parent] if getattr(module, "__file__", None) else []
    )
    if not origins or any(_inside(origin, root) for origin in origins):
        return
    for name in [m for m in sys.modules if m == package or m.startswith(f"{package}.")]:
        del sys.modules[name]
    importlib.invalidate_caches()


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
    except ValueError:
        return False
    return True


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
