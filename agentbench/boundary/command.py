"""A suite's agent that is a command: any program, in any language, run once per turn.

`agent: {command: ["node", "agent.mjs"], timeout: 60, env: {...}, cwd: "."}` in suite.yaml
is a `CommandAgent`; the harness makes it a `CommandTarget`, a `CallableTarget` whose function
runs the program (`boundary.process`), so its turns go through `session.run_turns` like any
function's: a loopback server per case, its model calls recorded and replayed there.

The contract with the program (docs/guides/frameworks.md): stdin is one JSON object (`input`,
`context`, `turn`, `model`, `base_url`, `anthropic_base_url`); the environment carries the loopback
URLs and key (OPENAI_BASE_URL, ANTHROPIC_BASE_URL, OPENAI_API_KEY, ANTHROPIC_API_KEY,
AGENTBENCH_MODEL, AGENTBENCH_TURN) and never the user's real keys; stdout is the output (a JSON
object with an `output` key: that value); a non-zero exit or a timeout is the run's error, with the
end of stderr.
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, field_validator

from agentbench.boundary.process import Finished, run_process
from agentbench.boundary.target import CallableTarget, TargetContext
from agentbench.errors import UsageError

STDOUT_LIMIT = 16 * 1024 * 1024  # the output; more is an error, not a silently cut answer
STDERR_LIMIT = 64 * 1024  # the end of what it said, kept for the error
ERROR_LINES = 20  # lines of stderr quoted in the run's error


class CommandAgent(BaseModel):
    """`agent:` written as a command to run once per turn."""

    model_config = ConfigDict(extra="forbid")

    command: list[str] = Field(
        json_schema_extra={"minItems": 1},  # checked by `_a_program`, in the user's words
        description="The program and its arguments, e.g. [node, agent.mjs]. The program is "
        "looked up on PATH (a path with a slash: relative to cwd); {suite} in any item is the "
        "suite folder.",
    )
    timeout: float = Field(
        60, gt=0, description="Seconds one turn may take; then it is killed with its children."
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        description="Environment variables added for the program ({suite} expands).",
    )
    cwd: str = Field(".", description="The folder it runs in, relative to the suite folder.")
    name: str | None = Field(
        None,
        description="The agent's name in trajectories and divergences (default: its "
        "script's, `agent` for `node dist/agent.js`).",
    )

    @field_validator("command")
    @classmethod
    def _a_program(cls, value: list[str]) -> list[str]:
        if not value or not value[0].strip():
            raise ValueError("needs the program to run and its arguments, e.g. [node, agent.mjs]")
        return value

    def label(self) -> str:
        """The command as a shell would show it."""
        return shlex.join(self.command)


class CommandFailed(Exception):  # noqa: N818 - the run's error, in the user's words
    """The program exited non-zero, timed out, or wrote too much: the run's error."""


@dataclass(frozen=True)
class Command:
    """A command agent resolved against its suite folder: what runs each turn."""

    argv: tuple[str, ...]
    label: str
    cwd: Path
    env: tuple[tuple[str, str], ...]
    timeout_s: float


@dataclass(frozen=True)
class CommandTarget(CallableTarget):
    """A boundary target whose function runs a program once per turn."""

    command: Command | None = None

    @classmethod
    def of_command(
        cls, spec: CommandAgent, suite_dir: Path, *, where: str = "", model: str | None = None
    ) -> CommandTarget:
        """The target for `spec` (paths from `suite_dir`); UsageError, naming `where`, when
        its folder or program is not there."""
        folder = str(suite_dir.resolve())

        def expand(text: str) -> str:
            return text.replace("{suite}", folder)

        cwd = (suite_dir / expand(spec.cwd)).resolve()
        if not cwd.is_dir():
            raise UsageError(f"{where}agent: cwd {spec.cwd!r}: no such folder {cwd}")
        items = [expand(item) for item in spec.command]
        program = _program(items[0], cwd)
        if program is None:
            place = f"an executable file in {cwd}" if "/" in items[0] else "found on PATH"
            raise UsageError(f"{where}agent: command {spec.command[0]!r} is not {place}")
        command = Command(
            (program, *items[1:]),
            spec.label(),
            cwd,
            tuple((key, expand(value)) for key, value in spec.env.items()),
            spec.timeout,
        )
        function = functools.partial(run_turn, command)
        return cls(function, spec.name or _name(items), True, model, command)


def _program(name: str, cwd: Path) -> str | None:
    """Where `name` runs from: a path (with a slash) from `cwd`, else found on PATH."""
    if "/" in name:
        path = cwd / name
        return str(path) if path.is_file() and os.access(path, os.X_OK) else None
    return shutil.which(name)


def _name(items: list[str]) -> str:
    """The agent's name in trajectories: its script's (`agent` for `node dist/agent.js`)."""
    script = next((i for i in reversed(items) if not i.startswith("-")), items[0])
    return Path(script).stem or script


async def run_turn(command: Command, turn_input: Any, context: TargetContext) -> Any:
    """One turn: the program run with the turn on stdin; its output, or CommandFailed."""
    anthropic_url = anthropic_base_url(context)
    stdin = {
        "input": turn_input,
        "context": context.variables,
        "turn": context.turn,
        "model": context.model,
        "base_url": context.base_url,
        "anthropic_base_url": anthropic_url,
    }
    env = child_env(os.environ, command.env, context, anthropic_url)
    try:
        finished = await run_process(
            command.argv,
            stdin=orjson.dumps(stdin, option=orjson.OPT_NON_STR_KEYS) + b"\n",
            env=env,
            cwd=command.cwd,
            timeout_s=command.timeout_s,
            stdout_limit=STDOUT_LIMIT,
            stderr_limit=STDERR_LIMIT,
        )
    except OSError as exc:  # gone since the suite loaded, or not executable
        raise CommandFailed(f"{command.label}: cannot start {command.argv[0]}: {exc}") from None
    return output_of(command, finished)


def anthropic_base_url(context: TargetContext) -> str:
    """The loopback server's root, as the anthropic SDK and ANTHROPIC_BASE_URL take it."""
    given = getattr(context, "anthropic_base_url", None)
    if given:
        return str(given)
    return context.base_url.removesuffix("/").removesuffix("/v1")


def child_env(
    parent: Mapping[str, str],
    own: tuple[tuple[str, str], ...],
    context: TargetContext,
    anthropic_url: str,
) -> dict[str, str]:
    """The program's environment: ours, the suite's `env:`, then the loopback server's URLs
    and key, which the suite cannot override (its calls must reach the server to be
    recorded) and which take the place of the user's real keys: those stay with agentbench,
    which forwards a recording's calls with them."""
    env = {**parent, **dict(own)}
    env.update(
        OPENAI_BASE_URL=context.base_url,
        OPENAI_API_KEY=context.api_key,
        ANTHROPIC_BASE_URL=anthropic_url,
        ANTHROPIC_API_KEY=context.api_key,
        AGENTBENCH_MODEL=context.model,
        AGENTBENCH_TURN=str(context.turn),
    )
    return env


def output_of(command: Command, finished: Finished) -> Any:
    """What the program answered (its stdout), or CommandFailed saying why it did not."""
    if finished.timed_out:
        raise CommandFailed(
            f"{command.label} did not finish within {command.timeout_s:g} s (timeout; killed)"
            + _said(finished.stderr)
        )
    if finished.stdout_overflow:
        raise CommandFailed(
            f"{command.label} wrote more than {STDOUT_LIMIT // (1024 * 1024)} MiB to stdout "
            "(killed)" + _said(finished.stderr)
        )
    code = finished.returncode
    if code:
        how = f"was killed by {_signal_name(-code)}" if code < 0 else f"exited {code}"
        raise CommandFailed(f"{command.label} {how}" + _said(finished.stderr))
    text = finished.stdout.decode("utf-8", errors="replace")
    text = text.removesuffix("\n").removesuffix("\r")
    if text.lstrip().startswith("{"):
        try:
            data = orjson.loads(text)
        except orjson.JSONDecodeError:
            return text
        if isinstance(data, dict) and "output" in data:
            return data["output"]
    return text


def _said(stderr: bytes) -> str:
    lines = stderr.decode("utf-8", errors="replace").rstrip().splitlines()[-ERROR_LINES:]
    return (": " + "\n".join(lines)) if lines else " (nothing on stderr)"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
