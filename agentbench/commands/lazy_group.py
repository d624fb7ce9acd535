"""A click group whose commands are imported when one is run, not when the program starts.

Each command module imports what it needs (DuckDB, the openai SDK, the trace store: most of a
second together), so importing every one to print `agentbench --help` or to run one of them
made every command pay for all. Here a command is a `module:attribute` reference and a short
help line: `--help` lists the lines, and only the command named on the command line is
imported. The short line is the command's own `short_help` once it is loaded, so the listing
and each command's page say the same.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

import click


@dataclass(frozen=True)
class LazyCommand:
    """Where a command lives, and the line `--help` lists it with."""

    ref: str  # "agentbench.commands.run:run"
    short_help: str


class _Commands(dict[str, click.Command]):
    """A group's commands as click keeps them, loading a lazy one when it is asked for: by
    name (running it), or all of them when they are listed as a whole (a documentation
    generator, a test walking the tree), which is never on the way to running one."""

    def __init__(self, lazy: dict[str, LazyCommand], known: dict[str, click.Command]) -> None:
        super().__init__(known)
        self.lazy = lazy

    def load(self, name: str) -> click.Command | None:
        if not dict.__contains__(self, name) and name in self.lazy:
            entry = self.lazy[name]
            module, _, attribute = entry.ref.partition(":")
            command = getattr(importlib.import_module(module), attribute)
            command.short_help = entry.short_help
            dict.__setitem__(self, name, command)
        return dict.get(self, name)

    def _all(self) -> None:
        for name in self.lazy:
            self.load(name)

    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]
        found = self.load(name)
        return default if found is None else found

    def __getitem__(self, name: str) -> click.Command:
        found = self.load(name)
        if found is None:
            raise KeyError(name)
        return found

    def __contains__(self, name: object) -> bool:
        return dict.__contains__(self, name) or name in self.lazy

    def __iter__(self) -> Any:
        self._all()
        return dict.__iter__(self)

    def __len__(self) -> int:
        return len({*dict.keys(self), *self.lazy})

    def keys(self) -> Any:
        self._all()
        return dict.keys(self)

    def values(self) -> Any:
        self._all()
        return dict.values(self)

    def items(self) -> Any:
        self._all()
        return dict.items(self)

    def loaded(self, name: str) -> click.Command | None:
        """The command if it is loaded, without loading it."""
        return dict.get(self, name)


class LazyGroup(click.Group):
    """A group of `LazyCommand`s (beside any command added the usual way)."""

    commands: _Commands

    def __init__(self, *args: Any, lazy: dict[str, LazyCommand], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands = _Commands(dict(lazy), dict(self.commands))

    def list_commands(self, ctx: click.Context | None) -> list[str]:
        return sorted({*dict.keys(self.commands), *self.commands.lazy})

    def get_command(self, ctx: click.Context | None, cmd_name: str) -> click.Command | None:
        return self.commands.load(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The listing, from the short lines: nothing is imported to print it."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max((len(name) for name in names), default=0)  # click's
        rows = []
        for name in names:
            entry = self.commands.lazy.get(name)
            if entry is not None:
                rows.append((name, entry.short_help))
                continue
            command = self.commands.loaded(name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
