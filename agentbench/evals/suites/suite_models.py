"""The model of a golden suite (`suite.yaml`), and where its paths lead.

A suite is a folder: `suite.yaml` (this `Suite` model) and case files under `cases/`. Paths
in a suite resolve by two rules:

* the **repository root** is the parent of the folder holding the suite folders
  (`golden/weather/suite.yaml` → the folder holding `golden/`); `agent`, `setup`, `plugins`
  and custom scorers written `package.module:attribute` are imported with it on `sys.path`,
  and the default cassette folder is `<root>/replays/<suite name>`;
* anything written as a path (`cassettes:`, `agent: agent.py:weather`, `plugins:
  [checks.py]`) is relative to the **suite folder**, like every path in a configuration file
  (a custom scorer's `function: path/to/file.py:name` is the exception: it is relative to
  the repository root, where its module form is imported from).

Only `plugins` are imported while a suite loads (`import_plugin`), because the scorers they
register must be known before the expectations naming them are checked; everything else is
imported by `Suite.load_object` when the harness asks.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    WithJsonSchema,
    field_validator,
)

from agentbench.boundary.command import CommandAgent
from agentbench.evals.suites.case_models import NAME_PATTERN, Case, check_name
from agentbench.evals.suites.expectations import Expectations, ScorerSpec
from agentbench.evals.suites.tools_config import ToolsConfig
from agentbench.evals.suites.validation import (
    PLUGIN_PATTERN,
    REFERENCE_PATTERN,
    check_plugin,
    check_reference,
)
from agentbench.loading import import_module, load_object
from agentbench.replay.faults import ServeKey
from agentbench.runtime.agent import ModelSettings
from agentbench.runtime.models import Usage


class Pricing(BaseModel):
    """What the model costs, in US dollars per million tokens."""

    model_config = ConfigDict(extra="forbid")

    input_per_mtok: float = Field(ge=0, description="US dollars per million input tokens.")
    output_per_mtok: float = Field(ge=0, description="US dollars per million output tokens.")

    def cost(self, usage: Usage) -> float:
        return (
            usage.input_tokens * self.input_per_mtok + usage.output_tokens * self.output_per_mtok
        ) / 1_000_000


# What a live call may generate when the agent's own settings set no limit: a model that loops
# (a small local one, say) otherwise generates until its context is full, minutes per call.
DEFAULT_LIVE_MAX_TOKENS = 4096


class SuiteModel(BaseModel):
    """The model the suite's agent runs on when live (replay serves the cassettes)."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(None, description="Model name, e.g. gpt-4o-mini.")
    base_url: str | None = Field(None, description="An OpenAI-compatible endpoint.")
    settings: ModelSettings = Field(
        default_factory=ModelSettings, description="Request parameters (temperature, seed…)."
    )
    max_tokens: int | None = Field(
        DEFAULT_LIVE_MAX_TOKENS,
        ge=1,
        description="Live calls: the most tokens one answer may have, sent as max_tokens when "
        "the agent's settings set none (null: send none). Replay is unaffected: the cassette "
        "records the request the agent built.",
    )
    pricing: Pricing | None = Field(None, description="Prices, for cost and cost_budget.")


def repository_root(folder: Path) -> Path:
    """The repository root of the suite in `folder`: the parent of the folder holding it."""
    return folder.resolve().parent.parent


def import_plugin(ref: str, folder: Path) -> str | None:
    """Import the `plugins:` entry `ref` of the suite in `folder`; None, or what went wrong.

    `pkg.module` is imported from the repository root, `path/to/file.py` is relative to the
    suite folder. Anything the module raises while it runs is reported, never raised: one
    broken plugin is a problem of its suite, not a crash of the whole run.
    """
    root = repository_root(folder)
    path = (folder / ref).resolve() if ref.endswith(".py") else None
    if path is not None and not path.is_file():
        return f"no such file {path} (a plugin file is relative to the suite folder)"
    try:
        import_module(str(path) if path else ref, search_path=root)
    except (Exception, SystemExit) as exc:
        missing = getattr(exc, "name", None) if isinstance(exc, ImportError) else None
        if path is None and missing and (ref == missing or ref.startswith(f"{missing}.")):
            return (
                f"cannot import {ref!r}: {exc} (modules are imported from the repository "
                f"root, {root})"
            )
        return f"importing {ref!r} raised {type(exc).__name__}: {exc}"
    return None


Plugin = Annotated[
    str,
    AfterValidator(check_plugin),
    WithJsonSchema({"type": "string", "pattern": PLUGIN_PATTERN}),
]


class Suite(BaseModel):
    """A golden suite: the agent, how to run and score it, and its cases."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        json_schema_extra={"pattern": NAME_PATTERN},
        description="The suite's name (default: the folder's name).",
    )
    description: str = Field("", description="What the suite covers, for people.")
    agent: Annotated[str, Field(json_schema_extra={"pattern": REFERENCE_PATTERN})] | (
        CommandAgent
    ) = Field(
        description="The agent: module:attribute importable from the repository root, or "
        "file.py:attribute in the suite folder. An agentbench Agent, or any function "
        "fn(input, target) whose model calls go to target.base_url (a boundary target). Or a "
        "program in any language, run once per turn: {command: [node, agent.mjs], timeout, "
        "env, cwd}.",
    )
    requires: list[str] = Field(
        default_factory=list,
        description="What the agent needs: modules (e.g. agents, langgraph), program:NAME "
        "(on PATH), file:PATH (in the suite folder). When one is missing, the suite's cases "
        "are skipped with the reason, not failed.",
    )
    model: SuiteModel | None = Field(None, description="The model the agent runs on live.")
    judge: str | None = Field(None, description="Model name for llm_judge expectations.")
    plugins: list[Plugin] = Field(
        default_factory=list,
        description="Modules (package.module, from the repository root) or files "
        "(path/to/file.py, in the suite folder) imported before the expectations are checked, "
        "so the scorers they define with @scorer can be named like built-in ones.",
    )
    scorers: Expectations = Field(
        default_factory=list,
        description="Expectations applied to every case; a case's expectation of the same "
        "scorer replaces them.",
    )
    cassettes: str | None = Field(
        None,
        description="Cassette folder, relative to the suite folder "
        "(default: replays/<name> in the repository root).",
    )
    tools: ToolsConfig = Field(
        default_factory=ToolsConfig, description="Tool policies during replay."
    )
    serve: ServeKey = Field(
        None,
        description="Serve each cassette through the openai client and a local server "
        "(true, or {quirks, faults}) instead of replaying above the SDK.",
    )
    tags: list[str] = Field(default_factory=list, description="Labels to select suites by.")
    trials: int = Field(1, ge=1, description="Runs of each case.")
    concurrency: int | None = Field(
        None, ge=1, description="Cases run at once (default: the harness's)."
    )
    strict_xfail: bool = Field(
        False,
        description="An xfail case that passes (XPASS) fails the gate, like pytest's "
        "xfail_strict (`--strict-xfail` does it for every suite of a run).",
    )
    setup: str | None = Field(
        None,
        json_schema_extra={"pattern": REFERENCE_PATTERN},
        description="A function the harness calls once before the suite runs (module:function).",
    )
    cases: list[Case] = Field(default_factory=list, description="Cases written inline.")

    _path: Path = PrivateAttr(default_factory=Path.cwd)
    # (line, column) of top-level keys in suite.yaml, for errors found after loading
    _positions: dict[str, tuple[int, int | None]] = PrivateAttr(default_factory=dict)
    _root_of: tuple[tuple[Path, str | None], Path] | None = PrivateAttr(default=None)

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        return check_name(value, "a suite name")

    @field_validator("agent")
    @classmethod
    def _agent(cls, value: str | CommandAgent) -> str | CommandAgent:
        if isinstance(value, CommandAgent):
            return value
        return check_reference(value, "golden.weather.agent:agent")

    @field_validator("requires")
    @classmethod
    def _requires(cls, value: list[str]) -> list[str]:
        for entry in value:
            kind, sep, name = entry.partition(":")
            if sep and (kind not in ("program", "file") or not name.strip()):
                raise ValueError(f"{entry!r}: expected a module name, program:NAME or file:PATH")
        return value

    @property
    def agent_ref(self) -> str:
        """The agent as cassettes and stored runs name it: its module:attribute, or
        `command: <the command line>`."""
        if isinstance(self.agent, CommandAgent):
            return f"command: {self.agent.label()}"
        return self.agent

    @field_validator("setup")
    @classmethod
    def _setup(cls, value: str | None) -> str | None:
        return None if value is None else check_reference(value, "golden.shop.setup:build_db")

    @property
    def path(self) -> Path:
        """The suite folder."""
        return self._path

    @property
    def file(self) -> Path:
        return self._path / "suite.yaml"

    @property
    def root(self) -> Path:
        """The repository root: the parent of the folder holding the suite folders."""
        # Asked for every trial (cassette paths, scorers): resolved once per folder, not
        # with a filesystem walk each time; a relative folder depends on the working folder.
        key = (self._path, None if self._path.is_absolute() else os.getcwd())
        if self._root_of is None or self._root_of[0] != key:
            self._root_of = (key, repository_root(self._path))
        return self._root_of[1]

    @property
    def cassette_dir(self) -> Path:
        if self.cassettes is not None:
            return (self._path / self.cassettes).resolve()
        return self.root / "replays" / self.name

    def cassette_for(self, case: Case) -> Path:
        return self.cassette_dir / (case.cassette or f"{case.id}.yaml")

    def trials_for(self, case: Case) -> int:
        return case.trials or self.trials

    def expectations_for(self, case: Case) -> list[ScorerSpec]:
        """The suite's default scorers (minus those the case names itself), then the case's."""
        own = {spec.name for spec in case.expect}
        return [s for s in self.scorers if s.name not in own] + list(case.expect)

    def case(self, case_id: str) -> Case:
        by_id = getattr(self.cases, "by_id", None)  # a loaded suite's cases are read on demand
        found = (
            by_id(case_id)
            if by_id is not None
            else next((c for c in self.cases if c.id == case_id), None)
        )
        if found is None:
            raise KeyError(f"suite {self.name!r} has no case {case_id!r}")
        return found

    def load_object(self, ref: str, what: str = "object") -> Any:
        """Import `module:attribute` from the repository root, or `file.py:attr` in the suite.

        This is the only place a suite imports anything; loading the suite never does.
        """
        module, _, attribute = ref.partition(":")
        if module.endswith(".py"):
            ref = f"{(self._path / module).resolve()}:{attribute}"
        return load_object(ref, what=f"{self.where(what)}{what}", search_path=self.root)

    def where(self, key: str) -> str:
        """`golden/x/suite.yaml:6:8: ` for a top-level key of suite.yaml (its file, if the
        line is not known), so an error about that key points at it."""
        position = self._positions.get(key)
        if position is None:
            return f"{self.file}: "
        column = f":{position[1]}" if position[1] else ""
        return f"{self.file}:{position[0]}{column}: "
