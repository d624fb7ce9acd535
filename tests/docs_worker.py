"""The Python interpreter a documentation page's python blocks run in, one after another.

Started by tests/test_docs_code.py once per page, in the page's folder: each request (one JSON
line on stdin) is a python block to run in the page's one namespace, as `__main__`, or a suite
folder to load with the suite loader; the answer (one JSON line on the file descriptor given as
the one argument) says whether it went well. Everything the block prints, and whatever its
child processes print, goes to the output file the request names. Line numbers and file names
in a traceback are the page's.
"""

from __future__ import annotations

import importlib
import json
import linecache
import os
import sys
import traceback
from typing import Any


def main() -> None:
    # The page's folder, not this file's, is where `import agent` finds a module a block wrote.
    sys.path[0] = os.getcwd()
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
    answers = os.fdopen(int(sys.argv[1]), "w", encoding="utf-8")
    for request_line in sys.stdin:
        request = json.loads(request_line)
        with _output_to(request["output"]):
            ok = _run(request, namespace)
        answers.write(json.dumps({"ok": ok}) + "\n")
        answers.flush()


def _run(request: dict[str, Any], namespace: dict[str, Any]) -> bool:
    importlib.invalidate_caches()  # a module a block has just written must be found
    try:
        if request["kind"] == "suite":
            from agentbench.evals.suites.dataset import load_suite

            load_suite(request["path"])
            return True
        source = "\n" * request["line"] + request["code"]
        linecache.cache[request["page"]] = (len(source), None, source.splitlines(True), "")
        exec(compile(source, request["page"], "exec"), namespace)
        return True
    except SystemExit as exc:
        if exc.code in (None, 0):
            return True
        print(f"SystemExit: {exc.code}", file=sys.stderr)
        return False
    except BaseException as exc:
        # From the block's first frame on: this file's own frame is not the reader's concern.
        traceback.print_exception(
            type(exc), exc, exc.__traceback__.tb_next if exc.__traceback__ else None
        )
        return False


class _output_to:  # noqa: N801 (used as a `with` statement)
    """Points file descriptors 1 and 2 at `path` for the block (its child processes' too)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __enter__(self) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        self.saved = os.dup(1), os.dup(2)
        target = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(target, 1)
        os.dup2(target, 2)
        os.close(target)

    def __exit__(self, *exc: object) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, saved in zip((1, 2), self.saved, strict=True):
            os.dup2(saved, fd)
            os.close(saved)


if __name__ == "__main__":
    main()
