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
# Room for a few megabytes of image as base64; an answer larger than this is far past what a
# model reads (a result is cut to the tool's max_result_chars) and only costs memory.
DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024
# Restarts in a row, with no call answered between them, before a server is given up on.
DEFAULT_MAX_RESTARTS = 3


def _limits(who: str, startup_timeout_s: float, max_message_bytes: int, max_restarts: int) -> None:
    if startup_timeout_s <= 0:
        raise UsageError(f"{who}: startup_timeout_s must be positive")
    if isinstance(max_message_bytes, bool) or not isinstance(max_message_bytes, int):
        raise UsageError(f"{who}: max_message_bytes must be a whole number of bytes")
    if max_message_bytes < 1024:
        raise UsageError(
            f"{who}: max_message_bytes must be at least 1024 (got {max_message_bytes})"
        )
    if isinstance(max_restarts, bool) or not isinstance(max_restarts, int) or max_restarts < 0:
        raise UsageError(f"{who}: max_restarts must be a whole number, 0 or more")


@dataclass(frozen=True, init=False)
class StdioServer:
    """An MCP server the process starts itself and talks to over stdin/stdout.

    `env` is added to a minimal default environment (the SDK's: PATH, HOME and the like), so a
    token given here reaches the server and nothing else of the caller's environment does.
    A message from the server over `max_message_bytes` is refused (its call gets an error
    saying so); `max_restarts` bounds the restarts in a row of a server that dies or stops
    answering.
    """

    command: tuple[str, ...]
    env: tuple[tuple[str, str], ...] | None
    cwd: str | None
    startup_timeout_s: float
    max_message_bytes: int
    max_restarts: int

    def __init__(
        self,
        command: Sequence[str] | str,
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        max_restarts: int = DEFAULT_MAX_RESTARTS,
    ) -> None:
        words = tuple(shlex.split(command) if isinstance(command, str) else command)
        if not words or not all(isinstance(w, str) and w for w in words):
            raise UsageError(
                f"StdioServer(command={command!r}): expected the program and its arguments, "
                "e.g. ['python', '-m', 'mcp_server_time']"
            )
        _limits("StdioServer", startup_timeout_s, max_message_bytes, max_restarts)
        object.__setattr__(self, "command", words)
        object.__setattr__(self, "env", None if env is None else tuple(sorted(env.items())))
        object.__setattr__(self, "cwd", None if cwd is None else str(cwd))
        object.__setattr__(self, "startup_timeout_s", float(startup_timeout_s))
        object.__setattr__(self, "max_message_bytes", max_message_bytes)
        object.__setattr__(self, "max_restarts", max_restarts)

    def describe(self) -> str:
        # This interpreter's own path says nothing a reader needs (and differs per machine).
        words = ("python", *self.command[1:]) if self.command[0] == sys.executable else self.command
        return "stdio: " + shlex.join(words)

    def __repr__(self) -> str:  # never show the environment: it holds tokens
        return f"StdioServer({list(self.command)!r})"


@dataclass(frozen=True, init=False)
class HttpServer:
    """An MCP server already running behind a streamable-HTTP endpoint (`.../mcp`).

    `max_message_bytes` bounds each answer (a JSON body, or one server-sent event);
    `max_restarts` bounds the new sessions in a row for a server that stops answering.
    """

    url: str
    headers: tuple[tuple[str, str], ...] | None
    startup_timeout_s: float
    max_message_bytes: int
    max_restarts: int

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        max_restarts: int = DEFAULT_MAX_RESTARTS,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise UsageError(
                f"HttpServer(url={url!r}): expected an http(s) URL of the server's MCP "
                "endpoint, e.g. 'http://127.0.0.1:8000/mcp'"
            )
        _limits("HttpServer", startup_timeout_s, max_message_bytes, max_restarts)
        object.__setattr__(self, "url", url)
        object.__setattr__(
            self, "headers", None if headers is None else tuple(sorted(headers.items()))
        )
        object.__setattr__(self, "startup_timeout_s", float(startup_timeout_s))
        object.__setattr__(self, "max_message_bytes", max_message_bytes)
        object.__setattr__(self, "max_restarts", max_restarts)

    def describe(self) -> str:
        # Credentials in the URL (user:password@, ?token=) stay out of messages and traces.
        parts = urlsplit(self.url)
        host = parts.hostname or ""
        netloc = f"{host}:{parts.port}" if parts.port else host
        return "http: " + urlunsplit((parts.scheme, netloc, parts.path, "", ""))

    def __repr__(self) -> str:  # never show the headers: they hold tokens
        return f"HttpServer({self.describe().removeprefix('http: ')!r})"


McpServer: TypeAlias = StdioServer | HttpServer
