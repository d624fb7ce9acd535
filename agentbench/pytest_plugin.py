"""agentbench for teams that live in pytest: fixtures, and golden cases as test items.

Fixtures:

* `scripted_model(items)` — a `ScriptedModel`; every one made in a test must be used up.
* `cassette(model, name=None)` — record `model`'s calls into `cassettes/<module>/<test>.yaml`
  beside the test file on the first run (or with `--agentbench-record-mode all`), and replay
  them afterwards without the model: a vcrpy-format file at the model boundary.
* `trace_store` — a `TraceStore` in the test's temporary directory.

Golden suites: `pytest --agentbench-golden golden/` (or `agentbench_golden = golden` in the
ini file) collects one test per case, replaying its cassette and failing with the scorers'
reasons and the case's file and line.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentbench.replay.cassette import Cassette, RecordMode
from agentbench.replay.models import RecordingModel, ReplayModel
from agentbench.runtime.models import ChatModel, ScriptedModel


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("agentbench")
    group.addoption(
        "--agentbench-record-mode",
        default=None,
        choices=[m.value for m in RecordMode],
        help="How the `cassette` fixture records: none, once (default), new_episodes, all.",
    )
    group.addoption(
        "--agentbench-golden",
        action="append",
        default=[],
        metavar="PATH",
        help="Collect the golden suites under PATH as tests (one per case).",
    )
    parser.addini("agentbench_golden", "Golden suite folders to collect as tests.", type="paths")


@pytest.fixture
def scripted_model() -> Iterator[Callable[..., ScriptedModel]]:
    made: list[ScriptedModel] = []

    def make(items: Any = (), **options: Any) -> ScriptedModel:
        model = ScriptedModel(items, **options)
        made.append(model)
        return model

    yield make
    for model in made:
        model.assert_complete()


@pytest.fixture
def cassette(request: pytest.FixtureRequest) -> Iterator[Callable[..., ChatModel]]:
    mode = RecordMode.parse(request.config.getoption("--agentbench-record-mode") or "once")
    folder = Path(request.node.path).parent / "cassettes" / Path(request.node.path).stem
    recorders: list[tuple[RecordingModel, Path]] = []

    def use(model: ChatModel | None = None, name: str | None = None) -> ChatModel:
        path = folder / f"{name or request.node.name}.yaml"
        if path.is_file() and mode in (RecordMode.NONE, RecordMode.ONCE):
            return ReplayModel(Cassette.load(path))
        if mode is RecordMode.NONE:
            raise pytest.UsageError(f"no cassette at {path} and the record mode is 'none'")
        if model is None:
            pytest.fail(f"no cassette at {path}: pass the live model to record it")
        recorder = RecordingModel(model)
        recorders.append((recorder, path))
        return recorder

    yield use
    for recorder, path in recorders:
        if recorder.cassette.interactions:
            recorder.cassette.save(path)


@pytest.fixture
def trace_store(tmp_path: Path) -> Iterator[Any]:
    from agentbench.trace.store import TraceStore

    store = TraceStore(tmp_path / "traces.duckdb")
    yield store
    store.close()


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.name != "suite.yaml":
        return None
    roots = [Path(p).resolve() for p in parent.config.getoption("--agentbench-golden")]
    roots += [Path(p).resolve() for p in parent.config.getini("agentbench_golden")]
    if not any(file_path.resolve().is_relative_to(root) for root in roots):
        return None
    return GoldenSuite.from_parent(parent, path=file_path)


def pytest_sessionstart(session: pytest.Session) -> None:
    # Golden suites may live outside the test paths: add them to what pytest collects.
    paths = session.config.getoption("--agentbench-golden")
    if paths:
        session.config.args.extend(
            str(Path(p)) for p in paths if str(Path(p)) not in session.config.args
        )


class GoldenSuite(pytest.File):
    def collect(self) -> Iterator[pytest.Item]:
        from agentbench.evals.suites.dataset import load_suite

        suite = load_suite(self.path.parent)
        for case in suite.cases:
            yield GoldenCase.from_parent(self, name=case.id, suite=suite, case=case)


class GoldenCase(pytest.Item):
    def __init__(self, *, suite: Any, case: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.suite = suite
        self.case = case
        if case.skip:
            self.add_marker(pytest.mark.skip(reason=case.skip))
        elif case.xfail:
            # As the gate: an XPASS fails only in a suite that says strict_xfail: true.
            strict = bool(getattr(suite, "strict_xfail", False))
            self.add_marker(pytest.mark.xfail(reason=case.xfail, strict=strict))

    def runtest(self) -> None:
        from agentbench.evals.running.harness import (
            Harness,
            HarnessOptions,
            agent_for,
            missing_requirements,
        )

        missing = missing_requirements(self.suite)
        if missing is not None:  # a framework this machine lacks: skipped, as `run` does
            pytest.skip(missing)
        harness = Harness(None, HarnessOptions())
        agent = agent_for(self.suite)
        if self.suite.setup:
            self.suite.load_object(self.suite.setup)()
        outcome = asyncio.run(harness.run_trial(self.suite, agent, self.case))
        if outcome.status == "error":
            raise GoldenCaseFailed(self, [outcome.error or "the case could not run"])
        if not all(score["passed"] for score in outcome.scores):
            raise GoldenCaseFailed(self, outcome.reasons())

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, GoldenCaseFailed):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        source = self.case.source
        line = source[1] - 1 if source else None
        return (source[0] if source else self.path), line, f"{self.suite.name}/{self.case.id}"


class GoldenCaseFailed(Exception):  # noqa: N818 - reads as what happened in a pytest report
    def __init__(self, item: GoldenCase, reasons: list[str]) -> None:
        where = f"{item.case.source[0]}:{item.case.source[1]}" if item.case.source else item.path
        lines = [f"{item.suite.name}/{item.case.id} ({where}) failed:"]
        lines += [f"  - {reason}" for reason in reasons]
        super().__init__("\n".join(lines))
