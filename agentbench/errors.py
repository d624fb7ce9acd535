"""The one exception tree of agentbench.

Every error agentbench raises for a user derives from `AgentbenchError`. Errors meant for the
*model* (bad tool arguments, an unknown tool, a tool's business failure) never surface as
exceptions: the runner turns them into observations. Everything here is for the *user*: it says
where the problem is (agent, tool, file, step) and what was expected. Constructors have no side
effects (no logging), so raising and catching them is cheap and quiet.
"""

from __future__ import annotations


def one_line(exc: BaseException, limit: int | None = None) -> str:
    """An exception's message on one line (cut to `limit`), for messages that quote it."""
    message = " ".join(str(exc).split()) or "(no message)"
    return message if limit is None or len(message) <= limit else message[: limit - 1] + "…"


class AgentbenchError(Exception):
    """Root of every agentbench error."""


class UsageError(AgentbenchError):
    """The API or CLI was called in a way that cannot work (CLI exit code 2)."""


class RecordingError(AgentbenchError):
    """A run's record could not be kept: its store's disk is full, or the store is read-only
    (CLI exit code 3). Unlike any other error a hook raises, this one is not swallowed: the
    runner finishes the run, lets every hook see its end, then raises it to the caller, so a
    run that was not recorded is never handed back as finished."""


class ToolDefinitionError(AgentbenchError):
    """A tool cannot be built from its function, or two tools share a name."""


class InstructionsError(AgentbenchError):
    """An agent's instructions template failed to render."""

    def __init__(self, agent: str, message: str, variable: str | None = None) -> None:
        self.agent = agent
        self.variable = variable
        super().__init__(f"agent {agent!r}: instructions template: {message}")


class ModelError(AgentbenchError):
    """The model provider failed in a way retries could not fix.

    `status_code` and `body` are the HTTP status and the server's whole response body when
    there was one (the message keeps only the body's first line), so a recording can keep the
    failure exactly and replay it as the same error.
    """

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        attempts: int = 1,
        body: str | None = None,
    ) -> None:
        self.status_code = status_code
        self.attempts = attempts
        self.body = body
        super().__init__(message)


class ModelTimeoutError(ModelError):
    """A model call did not answer within its timeout, on every attempt."""


class ScriptExhaustedError(AgentbenchError):
    """A ScriptedModel was asked for more responses than it was given."""


class OutputValidationError(AgentbenchError):
    """The final answer did not match the agent's `output_type`, even after a correction."""


class RunTimeoutError(AgentbenchError):
    """The run's wall-clock budget (`Limits.timeout_s`) ran out."""


class Interrupted(AgentbenchError):  # noqa: N818 - what happened, in the user's words
    """The user interrupted a command (Ctrl-C); the message says what was kept and how to go on
    (CLI exit code 130)."""

    def __init__(self, message: str, *, eval_id: str | None = None) -> None:
        self.eval_id = eval_id
        super().__init__(message)
