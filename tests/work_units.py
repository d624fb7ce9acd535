"""How pytest-xdist hands the tests to its workers: a test file at a time.

A file is one unit of work (xdist's loadscope, files with the most tests first), so a
module-scoped fixture — a shipped suite run once, a baseline eval — is built by one worker,
never once per worker. The tests of a file in SPLIT_BY_SUITE, whose setup is per suite (the
first word of a test's parameter id), are one unit per suite instead, so a file of long
journeys is shared between the workers. xdist's own groups (`--dist loadgroup` and the
`xdist_group` mark) do not group under pytest 9.2 (pytest-dev/pytest-xdist#1386): they rename
node ids, which pytest no longer lets a plugin do.
"""

from __future__ import annotations

from xdist.scheduler import LoadScopeScheduling

# Files whose expensive setup is one per suite, built on first use (test_journeys' baselines),
# and test_docs_code, whose pages share nothing and take seconds to minutes each.
SPLIT_BY_SUITE = frozenset({"tests/test_journeys.py", "tests/test_docs_code.py"})


class FileScheduling(LoadScopeScheduling):
    """xdist's loadscope, by file (a class's tests stay with their file's fixtures)."""

    def _split_scope(self, nodeid: str) -> str:
        module = nodeid.split("::", 1)[0]
        if module in SPLIT_BY_SUITE and "[" in nodeid:
            test, _, parameters = nodeid.partition("[")
            return f"{test}[{parameters.split('-', 1)[0]}"
        return module

    def _assign_work_unit(self, node: object) -> None:
        # A split file's units are few tests of minutes: first, so none is left for the end,
        # one worker running it while the other waits (units go by number of tests, largest first).
        for scope in self.workqueue:
            if scope.split("::", 1)[0] in SPLIT_BY_SUITE:
                self.workqueue.move_to_end(scope, last=False)
                break
        super()._assign_work_unit(node)
