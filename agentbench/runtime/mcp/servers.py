"""Where an MCP server lives: a command to start (stdio) or a URL to reach (streamable HTTP).

These are plain, hashable descriptions: two equal descriptions name the same server, which is
how the runs of one process share one connection (and one server process) per server. They
never import the `mcp` SDK. `describe()` is what messages and `agentbench tools list` show: the
command or the URL, never the environment or the headers, which hold tokens.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias
from urllib.parse import urlsplit, urlunsplit

from agentbench.errors import UsageError

DEFAULT_STARTUP_TIMEOUT_S = 30.0


@dataclass(frozen=True, init=False)
class StdioServer:
    """An MCP server the process starts itself and talks to over stdin/stdout.

    `env` is added to a minimal default environment (the SDK's: PATH, HOME and the like), so a
    token given here reaches the server and nothing else of the caller's environment does.
    """

    command: tuple[str, ...]
    env: tuple[tuple[str, str], ...] | None
    cwd: str | None
    startup_timeout_s: float

    def __init__(
        self,
        command: Sequence[str] | str,
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S,
    ) -> None:
        words = tuple(shlex.split(command) if isinstance(command, str) else command)
        if not words or not all(isinstance(w, str) and w for w in words):
            raise UsageError(
                f"StdioServer(command={command!r}): expected the program and its arguments, "
                "e.g. ['python', '-m', 'mcp_server_time']"
            )
        if startup_timeout_s <= 0:
            raise UsageError("StdioServer: startup_timeout_s must be positive")
        object.__setattr__(self, "command", words)
        object.__setattr__(self, "env", None if env is None else tuple(sorted(env.items())))
        object.__setattr__(self, "cwd", None if cwd is None else str(cwd))
        object.__setattr__(self, "startup_timeout_s", float(startup_timeout_s))

    def describe(self) -> str:
        # This interpreter's own path says nothing a reader needs (and differs per machine).
        words = ("python", *self.command[1:]) if self.command[0] == sys.executable else self.command
        return "stdio: " + shlex.join(words)

    def __repr__(self) -> str:  # never show the environment: it holds tokens
        return f"StdioServer({list(self.command)!r})"


@dataclass(frozen=True, init=False)
class HttpServer:
    """An MCP server already running behind a streamable-HTTP endpoint (`.../mcp`)."""

    url: str
    headers: tuple[tuple[str, str], ...] | None
    startup_timeout_s: float

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise UsageError(
                f"HttpServer(url={url!r}): expected an http(s) URL of the server's MCP "
                "endpoint, e.g. 'http://127.0.0.1:8000/mcp'"
            )
        if startup_timeout_s <= 0:
            raise UsageError("HttpServer: startup_timeout_s must be positive")
        object.__setattr__(self, "url", url)
        object.__setattr__(
            self, "headers", None if headers is None else tuple(sorted(headers.items()))
        )
        object.__setattr__(self, "startup_timeout_s", float(startup_timeout_s))

    def describe(self) -> str:
        # Credentials in the URL (user:password@, ?token=) stay out of messages and traces.
        parts = urlsplit(self.url)
        host = parts.hostname or ""
        netloc = f"{host}:{parts.port}" if parts.port else host
        return "http: " + urlunsplit((parts.scheme, netloc, parts.path, "", ""))

    def __repr__(self) -> str:  # never show the headers: they hold tokens
        return f"HttpServer({self.describe().removeprefix('http: ')!r})"


McpServer: TypeAlias = StdioServer | HttpServer
