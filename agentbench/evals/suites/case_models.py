"""The model of one golden case: its input (or user turns), context and expectations."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from agentbench.evals.suites.expectations import Expectations
from agentbench.evals.suites.tools_config import ToolsConfig
from agentbench.evals.suites.validation import show
from agentbench.replay.faults import ServeKey
from agentbench.runtime.context import Context

NAME_PATTERN = r"^[A-Za-z0-9_.-]+$"
SCOPES = ("session", "request", "global")
ROLES = ("system", "user", "assistant", "tool")


def _chat_message(value: Any) -> Any:
    if not isinstance(value, dict) or value.get("role") not in ROLES:
        raise ValueError(
            f"expected a chat message {{role: {'|'.join(ROLES)}, content: ...}}; got {show(value)}"
        )
    return value


ChatMessage = Annotated[
    dict[str, Any],
    BeforeValidator(_chat_message),
    WithJsonSchema(
        {
            "type": "object",
            "properties": {"role": {"enum": list(ROLES)}, "content": {}},
            "required": ["role"],
        }
    ),
]
Turn = str | list[ChatMessage]


def _reason(default: str) -> Callable[[Any], Any]:
    def normalise(value: Any) -> Any:
        if value is True:
            return default
        return None if value is False else value

    return normalise


def _reason_field(default: str) -> Any:
    return Annotated[
        str | None,
        BeforeValidator(_reason(default)),
        WithJsonSchema({"anyOf": [{"type": "string"}, {"type": "boolean"}]}),
    ]


Xfail = _reason_field("expected to fail")
Skip = _reason_field("skipped")


class CaseContext(BaseModel):
    """Context variables for the case, by scope; a plain mapping means the session scope."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    session: dict[str, Any] = Field(default_factory=dict, description="Session variables.")
    request: dict[str, Any] = Field(default_factory=dict, description="Request variables.")
    global_: dict[str, Any] = Field(
        default_factory=dict, alias="global", description="Global, read-only configuration."
    )

    @model_validator(mode="before")
    @classmethod
    def _plain_is_session(cls, value: Any) -> Any:
        if value is None:
            return {}
        scoped = (
            isinstance(value, dict)
            and value
            and all(key in SCOPES and isinstance(v, dict) for key, v in value.items())
        )
        if isinstance(value, dict) and not scoped:
            return {"session": value}
        return value

    def as_context(self) -> Context:
        return Context(
            session=dict(self.session), request=dict(self.request), global_=dict(self.global_)
        )


class Case(BaseModel):
    """One golden case: the input (or several user turns), context, and expectations."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(
        json_schema_extra={"pattern": NAME_PATTERN},
        description="Unique in the suite; letters, digits, '_', '.', '-'.",
    )
    description: str = Field("", description="What the case checks, for people.")
    input: Turn | None = Field(None, description="The user's message, or a list of messages.")
    inputs: list[Turn] | None = Field(
        None, min_length=1, description="Several user turns, run one after another."
    )
    context: CaseContext = Field(
        default_factory=CaseContext,
        description="Context variables: a mapping (session scope) or {session, request, global}.",
    )
    tags: list[str] = Field(default_factory=list, description="Labels to select cases by.")
    expect: Expectations = Field(
        default_factory=list, description="Expectations: a list of {scorer_name: params}."
    )
    xfail: Xfail = Field(None, description="Expected to fail: true, or the reason why.")
    skip: Skip = Field(None, description="Do not run: true, or the reason why.")
    trials: int | None = Field(None, ge=1, description="Runs of this case (default: the suite's).")
    cassette: str | None = Field(
        None, description="Cassette file name in the suite's cassette folder (default: <id>.yaml)."
    )
    tools: ToolsConfig | None = Field(
        None,
        description="What tools do in this case, over the suite's tools: (its default when "
        "written, and each override on top of the suite's): a fault case, say.",
    )
    serve: ServeKey = Field(
        None,
        description="Serve the cassette through the openai client and a local server (true, "
        "or {quirks, faults}: these after the suite's); false: not served, whatever the suite "
        "says.",
    )

    _source: tuple[Path, int] | None = PrivateAttr(default=None)

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        return check_name(value, "a case id")

    @field_validator("cassette")
    @classmethod
    def _relative(cls, value: str | None) -> str | None:
        if value is not None and (
            PurePosixPath(value).is_absolute() or ".." in PurePosixPath(value).parts
        ):
            raise ValueError(f"expected a file name inside the cassette folder; got {value!r}")
        return value

    @model_validator(mode="after")
    def _one_input(self) -> Case:
        if (problem := input_problem(self.input, self.inputs)) is not None:
            raise ValueError(problem)
        return self

    @property
    def turns(self) -> list[str | list[dict[str, Any]]]:
        """The user turns, in order: one for `input`, several for `inputs`."""
        return [self.input] if self.input is not None else list(self.inputs or [])

    @property
    def source(self) -> tuple[Path, int] | None:
        """(file, line) the case was written at."""
        return self._source

    def run_context(self) -> Context:
        """The context to pass to `Runner.run` for the first turn."""
        return self.context.as_context()


def input_problem(input: Any, inputs: Any) -> str | None:
    """What is wrong with a case's input and inputs together, or None."""
    if input is not None and inputs is not None:
        return "give either input (one user turn) or inputs (a list of user turns), not both"
    if input is None and inputs is None:
        return "give input (one user turn) or inputs (a list of user turns)"
    return None


def check_name(value: str, what: str) -> str:
    if not re.match(NAME_PATTERN, value):
        raise ValueError(f"{what} may use only letters, digits, '_', '.' and '-'; got {value!r}")
    return value
