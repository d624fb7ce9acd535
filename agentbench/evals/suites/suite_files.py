"""Reading golden suites from disk: `load_suite(folder)` and `discover(paths)`.

A suite folder holds `suite.yaml` (cases may be written inline under `cases:`) and case files
under `cases/` (`*.yaml`, `*.yml`: one case, a list of cases, or `{cases: [...]}`; `*.jsonl`:
one case per line), read in name order after the inline cases. The suite's `plugins` are
imported before any expectation is checked, so the scorers they register are known by name.
Every problem is collected with its file, line, column and field path before anything fails,
so one run of the loader lists everything to fix; `discover` keeps going past a bad suite, so
one never hides another.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ValidationError

from agentbench.evals.errors import Problem, ScorerConfigError, SuiteError, UnknownScorerError
from agentbench.evals.scorers import scorer_type
from agentbench.evals.suites.case_files import SuiteCases, text_digest
from agentbench.evals.suites.case_models import NAME_PATTERN, Case, input_problem
from agentbench.evals.suites.expectations import ScorerSpec, split_expectation
from agentbench.evals.suites.suite_models import Suite, import_plugin
from agentbench.evals.suites.validation import PLUGIN_PATTERN, explain, field_path, show
from agentbench.yaml_source import (
    Position,
    SourceError,
    YamlDocument,
    YamlSyntaxError,
    check_json_depth,
    load_yaml,
    read_source,
)

SUITE_FILE = "suite.yaml"
CASE_SUFFIXES = (".yaml", ".yml", ".jsonl")
_SKIPPED_DIRS = {"__pycache__", "node_modules", "site-packages"}

Loc = tuple[Any, ...]


class Positions(Protocol):
    def position(self, loc: Loc) -> Position | None: ...


@dataclass(frozen=True)
class _Row:
    """A JSONL row: every field of it is on one line; columns are not tracked."""

    line: int

    def position(self, loc: Loc) -> Position | None:
        return Position(self.line)


@dataclass
class DiscoveryResult:
    """The suites that loaded, and an error for each one that did not."""

    suites: list[Suite] = field(default_factory=list)
    errors: list[SuiteError] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


def load_suite(path: str | Path) -> Suite:
    """The suite in folder `path` (or whose suite.yaml is `path`); SuiteError lists problems."""
    folder = Path(path)
    if folder.name == SUITE_FILE and folder.is_file():
        folder = folder.parent
    reader = _SuiteReader(folder)
    suite = reader.read()
    if reader.problems or suite is None:
        raise SuiteError(folder, reader.sorted_problems())
    return suite


def discover(paths: Iterable[str | Path]) -> DiscoveryResult:
    """Every suite (a folder with suite.yaml) under `paths`; bad suites become errors."""
    result = DiscoveryResult()
    seen_names: dict[str, Path] = {}
    for given in paths:
        root = Path(given)
        if not root.exists():
            missing = (
                "a symbolic link that loops or leads nowhere"
                if root.is_symlink()
                else "no such file or folder"
            )
            result.errors.append(SuiteError(root, [Problem(root, missing)]))
            continue
        folders = _suite_folders(root)
        if not folders:
            result.errors.append(
                SuiteError(root, [Problem(root, f"no {SUITE_FILE} found in this folder or below")])
            )
        for folder in folders:
            try:
                suite = load_suite(folder)
            except SuiteError as exc:
                result.errors.append(exc)
                continue
            first = seen_names.get(suite.name)
            if first is not None and first.resolve() != suite.path.resolve():
                problem = Problem(
                    suite.file,
                    f"suite name {suite.name!r} is already used by {first / SUITE_FILE} "
                    "(names must be unique: they name the cassette folders and reports)",
                    field="name",
                )
                result.errors.append(SuiteError(suite.path, [problem]))
                continue
            if first is None:
                seen_names[suite.name] = suite.path
                result.suites.append(suite)
    return result


def _suite_folders(root: Path) -> list[Path]:
    if root.is_file():
        return [root.parent] if root.name == SUITE_FILE else []
    found: list[Path] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIPPED_DIRS)
        if SUITE_FILE in files:
            found.append(Path(folder))
    return found


class _SuiteReader:
    """Reads one suite folder, collecting every problem instead of stopping at the first."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.problems: list[Problem] = []
        self.case_origin: dict[str, tuple[Path, int | None]] = {}
        self.broken_plugins: list[str] = []  # "plugins[0] ('checks.scorers')"
        self.digests: dict[Path, bytes] = {}  # of each text read, to know it again

    def sorted_problems(self) -> list[Problem]:
        """In reading order: file by file (suite.yaml first), line by line within each."""
        files = list(dict.fromkeys(problem.file for problem in self.problems))
        return sorted(
            self.problems, key=lambda p: (files.index(p.file), p.line or 0, p.column or 0)
        )

    def read(self) -> Suite | None:
        file = self.folder / SUITE_FILE
        if not os.path.lexists(file):  # a link that leads nowhere is read, and says so
            self.problems.append(Problem(file, f"no {SUITE_FILE} in {self.folder}"))
            return None
        document = self._yaml(file)
        if document is None:
            return None
        data = document.data
        if not isinstance(data, dict):
            self._add(
                file,
                document,
                (),
                f"expected a mapping with at least agent: module:attribute; got {_kind(data)}",
            )
            return None
        raw = dict(data)
        if "name" not in raw:
            raw["name"] = self.folder.resolve().name
            if not re.match(NAME_PATTERN, raw["name"]):
                self._add(
                    file,
                    document,
                    (),
                    f"the folder name {raw['name']!r} is not a valid suite name (letters, "
                    "digits, '_', '.', '-'); set name: in suite.yaml",
                )
                raw["name"] = "_"  # reported above; keeps the model from reporting it again
        # Before any expectation is checked: plugins register the scorers they may name.
        self._import_plugins(raw.get("plugins"), file, document)
        if "scorers" in raw:
            raw["scorers"] = self._specs(raw["scorers"], file, document, ("scorers",))
        inline = raw.pop("cases", None)
        suite = self._validate(Suite, raw, file, document, ())
        cases = SuiteCases(
            self._inline_cases(inline, file, document), functools.partial(_reread, self.folder)
        )
        for case_file in self._case_files():
            found = self._file_cases(case_file)
            if found:
                cases.add_file(case_file, self.digests.get(case_file, b""), found)
        if suite is None:
            return None
        suite._path = self.folder
        suite.cases = cases
        for key in ("agent", "setup", "model"):
            position = document.position((key,))
            if position is not None:
                suite._positions[key] = (position.line, position.column)
        return suite

    # -- files --------------------------------------------------------------------------
    def _yaml(self, file: Path) -> YamlDocument | None:
        text = self._text(file)
        if text is None:
            return None
        try:
            document = load_yaml(text)
        except YamlSyntaxError as exc:
            self._source_problem(file, exc)
            return None
        for loc, position, first in document.duplicates:
            self.problems.append(
                Problem(
                    file,
                    f"duplicate key {loc[-1]!r} (first written at line {first.line}); "
                    "the later value would silently replace the earlier one",
                    position.line,
                    position.column,
                    field_path(loc),
                )
            )
        return document

    def _text(self, file: Path) -> str | None:
        try:
            text = read_source(file)
        except SourceError as exc:
            self._source_problem(file, exc)
            return None
        self.digests[file] = text_digest(text)
        return text

    def _source_problem(self, file: Path, exc: SourceError) -> None:
        where = exc.position
        self.problems.append(
            Problem(file, exc.message, where.line if where else None, _column(exc))
        )

    def _case_files(self) -> list[Path]:
        folder = self.folder / "cases"
        if not folder.is_dir():
            return []
        # Anything but a folder is read, so a link that loops or leads nowhere (or a named
        # pipe) is reported: skipping it would silently hide its cases.
        return sorted(
            path
            for path in folder.rglob("*")
            if path.suffix in CASE_SUFFIXES and not path.is_dir() and not path.name.startswith(".")
        )

    def _inline_cases(self, raw: Any, file: Path, document: YamlDocument) -> list[Case]:
        if raw is None:
            return []
        if not isinstance(raw, list):
            self._add(file, document, ("cases",), f"expected a list of cases; got {_kind(raw)}")
            return []
        return self._cases(raw, file, document, ("cases",))

    def _file_cases(self, file: Path) -> list[Case]:
        if file.suffix == ".jsonl":
            return self._jsonl_cases(file)
        document = self._yaml(file)
        if document is None:
            return []
        data = document.data
        if isinstance(data, list):
            return self._cases(data, file, document, ())
        if isinstance(data, dict) and set(data) == {"cases"} and isinstance(data["cases"], list):
            return self._cases(data["cases"], file, document, ("cases",))
        if isinstance(data, dict) and "id" in data:
            case = self._case(data, file, document, ())
            return [case] if case else []
        if data is None:
            return []  # an empty case file is a placeholder, not a mistake
        self._add(
            file,
            document,
            (),
            "expected a case (a mapping with id), a list of cases, or {cases: [...]}; "
            f"got {_kind(data)}",
        )
        return []

    def _jsonl_cases(self, file: Path) -> list[Case]:
        text = self._text(file)
        if text is None:
            return []
        cases: list[Case] = []
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                check_json_depth(line)
                row = json.loads(line)
            except SourceError as exc:
                self.problems.append(Problem(file, exc.message, number, _column(exc)))
                continue
            except json.JSONDecodeError as exc:
                self.problems.append(Problem(file, f"not valid JSON: {exc.msg}", number, exc.colno))
                continue
            except ValueError as exc:  # a number Python will not convert (over 4,300 digits)
                self.problems.append(Problem(file, f"not valid JSON: {exc}", number))
                continue
            if not isinstance(row, dict):
                self.problems.append(
                    Problem(file, f"expected a JSON object (one case); got {_kind(row)}", number)
                )
                continue
            case = self._case(row, file, _Row(number), ())
            if case is not None:
                cases.append(case)
        return cases

    # -- plugins, cases and expectations -----------------------------------------------
    def _import_plugins(self, raw: Any, file: Path, document: YamlDocument) -> None:
        if not isinstance(raw, list):
            return  # nothing to import, or a wrong type the model will report
        for index, ref in enumerate(raw):
            if not isinstance(ref, str) or not re.match(PLUGIN_PATTERN, ref):
                continue  # the model reports it
            problem = import_plugin(ref, self.folder)
            if problem is not None:
                self._add(file, document, ("plugins", index), problem)
                self.broken_plugins.append(f"plugins[{index}] ({ref!r})")

    def _cases(self, raw: list[Any], file: Path, where: Positions, loc: Loc) -> list[Case]:
        cases = []
        for index, item in enumerate(raw):
            case = self._case(item, file, where, (*loc, index))
            if case is not None:
                cases.append(case)
        return cases

    def _case(self, raw: Any, file: Path, where: Positions, loc: Loc) -> Case | None:
        if not isinstance(raw, dict):
            self._add(
                file,
                where,
                loc,
                f"expected a case (a mapping with id, input, expect); got {_kind(raw)}",
            )
            return None
        data = dict(raw)
        if isinstance(data.get("expect"), list):
            data["expect"] = self._specs(data["expect"], file, where, (*loc, "expect"))
        # Checked here as well as by the model, whose check runs only once every field is
        # valid: so this mistake is listed together with the others.
        wrong_input = input_problem(data.get("input"), data.get("inputs"))
        if wrong_input is not None:
            self._add(file, where, loc, wrong_input)
            data.pop("inputs", None)
            data["input"] = data.get("input") or ""
        case = self._validate(Case, data, file, where, loc)
        if case is None or wrong_input is not None:
            return None
        position = where.position(loc)
        line = position.line if position else None
        case._source = (file, line or 1)
        first = self.case_origin.get(case.id)
        if first is not None:
            first_file, first_line = first
            self._add(
                file,
                where,
                (*loc, "id"),
                f"duplicate case id {case.id!r}; first defined at {first_file}:{first_line}",
            )
            return None
        self.case_origin[case.id] = (file, line)
        return case

    def _specs(self, raw: Any, file: Path, where: Positions, loc: Loc) -> Any:
        """Expectations as ScorerSpecs with their lines; bad ones become problems."""
        if not isinstance(raw, list):
            return raw  # None (no scorers) or a wrong type the model will report
        specs: list[ScorerSpec] = []
        for index, item in enumerate(raw):
            item_loc = (*loc, index)
            try:
                name, params = split_expectation(item)
            except ScorerConfigError as exc:
                self._add(file, where, item_loc, exc.message)
                continue
            name_loc = item_loc if isinstance(item, str) else (*item_loc, name)
            try:
                scorer_type(name).validate(params)
            except UnknownScorerError as exc:
                self._add(file, where, name_loc, self._unknown(exc))
                continue
            except ScorerConfigError as exc:
                for problem in exc.problems:
                    self._add(file, where, (*name_loc, *problem.loc), problem.message)
                continue
            position = where.position(item_loc)
            specs.append(
                ScorerSpec(
                    name,
                    params,
                    file=file,
                    line=position.line if position else None,
                    column=position.column if position else None,
                    field=field_path(item_loc),
                )
            )
        return specs

    def _unknown(self, exc: UnknownScorerError) -> str:
        """Blame a plugin that did not import rather than list every scorer there is."""
        if not self.broken_plugins or not exc.hint:
            return exc.message
        they = "it registers" if len(self.broken_plugins) == 1 else "they register"
        return (
            f"unknown scorer {exc.name!r}; {', '.join(self.broken_plugins)} failed to import, "
            f"so the scorers {they} are unknown"
        )

    def _validate(
        self, model: type[BaseModel], data: dict[str, Any], file: Path, where: Positions, loc: Loc
    ) -> Any:
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            for problem in explain(exc, model):
                self._add(file, where, (*loc, *problem.loc), problem.message)
            return None

    def _add(self, file: Path, where: Positions, loc: Loc, message: str) -> None:
        position = where.position(loc)
        self.problems.append(
            Problem(
                file,
                message,
                position.line if position else None,
                position.column if position else None,
                field_path(loc),
            )
        )


def _reread(folder: Path, case_file: Path) -> tuple[list[Case], bytes | None]:
    """A case file of the suite in `folder` read again (see `SuiteCases`): its cases, and the
    digest of its text — None when it no longer reads cleanly (it changed)."""
    reader = _SuiteReader(folder)
    cases = reader._file_cases(case_file)
    return cases, None if reader.problems else reader.digests.get(case_file)


def _column(exc: SourceError) -> int | None:
    return exc.position.column if exc.position else None


def _kind(value: Any) -> str:
    if value is None:
        return "nothing (an empty document)"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return show(value)
