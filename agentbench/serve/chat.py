"""The OpenAI chat-completions shape of a served agent: the request it takes, the bodies and
chunks it answers with.

A served agent is a "model" whose answer is the agent's whole run: the client sends the
conversation so far, the agent runs its own tools, and the final text comes back as one
assistant message. What the agent cannot honour is refused by name rather than ignored:
client-side tools (the agent has its own), several choices, non-text content, and text that
is not Unicode (a lone surrogate, which no store or answer can hold). Context variables come
in an extension field, `"agentbench": {"context": {...}}` (the openai SDK's `extra_body`).
"""

from __future__ import annotations

import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from agentbench.runtime.completions import usage_body
from agentbench.runtime.models import Usage
from agentbench.serve.redaction import LONE_SURROGATE

# What a client message may carry through to the agent (name: tool messages and named users).
_MESSAGE_KEYS = ("role", "content", "name", "tool_calls", "tool_call_id")
# Stop reasons that are an answer; a brake's (max_iterations, loop_detected, token_budget) is
# the finish_reason itself, so a client never takes a stopped run for a whole answer.
_ANSWER_REASONS = ("completed", "business_stop", "handoff")


def lone_surrogate(value: Any, path: str = "") -> str | None:
    """Where in a parsed JSON value a string (or key) holds a lone surrogate, as
    `messages[0].content`; None when there is none."""
    if isinstance(value, str):
        found = LONE_SURROGATE.search(value)
        if found is None:
            return None
        return f"{path or 'body'} (\\u{ord(found.group()):04x} at character {found.start()})"
    if isinstance(value, dict):
        for key, item in value.items():
            inner = f"{path}.{key}" if path else str(key)
            if isinstance(key, str) and LONE_SURROGATE.search(key):
                return f"a key in {path or 'body'}"
            found_in = lone_surrogate(item, inner)
            if found_in is not None:
                return found_in
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found_in = lone_surrogate(item, f"{path}[{index}]")
            if found_in is not None:
                return found_in
    return None


class _UnicodeOnly(BaseModel):
    """A request body whose strings must be Unicode text (refused with 400 otherwise)."""

    @model_validator(mode="before")
    @classmethod
    def _no_lone_surrogates(cls, data: Any) -> Any:
        where = lone_surrogate(data)
        if where is not None:
            raise PydanticCustomError(
                "lone_surrogate",
                "{where} holds a lone surrogate: that is not Unicode text, so it can be "
                "neither run nor stored; send the text whole (UTF-8)",
                {"where": where},
            )
        return data


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None

    @field_validator("content")
    @classmethod
    def _text_parts_only(cls, content: Any) -> Any:
        if isinstance(content, list):
            for index, part in enumerate(content):
                if part.get("type") != "text":
                    raise ValueError(
                        f"part {index} is of type {part.get('type')!r}: a served agent reads "
                        "text parts only"
                    )
        return content

    def as_input(self) -> dict[str, Any]:
        """The message as the agent's conversation holds it (text parts joined)."""
        message = {key: getattr(self, key) for key in _MESSAGE_KEYS if getattr(self, key)}
        if self.role == "developer":  # the newer name for a system message
            message["role"] = "system"
        if isinstance(self.content, list):
            message["content"] = "".join(part.get("text") or "" for part in self.content)
        if self.role == "assistant" and "content" not in message:
            message["content"] = None
        return message


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")

    include_usage: bool = False


class ChatExtension(BaseModel):
    """`"agentbench": {...}` in a chat request: what the OpenAI shape has no place for."""

    model_config = ConfigDict(extra="forbid")

    context: dict[str, Any] = Field(
        default_factory=dict, description="The run's context variables (session scope)."
    )


class ChatRequest(_UnicodeOnly):
    """`POST /v1/chat/completions`: sampling settings are accepted and left to the agent's own
    model settings; what would change the contract of the answer is refused."""

    model_config = ConfigDict(extra="allow")

    model: str
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    user: str | None = None
    n: int = 1
    tools: list[dict[str, Any]] | None = None
    functions: list[dict[str, Any]] | None = None
    tool_choice: Any = None
    agentbench: ChatExtension = Field(default_factory=ChatExtension)

    @field_validator("n")
    @classmethod
    def _one_choice(cls, n: int) -> int:
        if n != 1:
            raise ValueError("a served agent gives one answer: n must be 1")
        return n

    @field_validator("tools", "functions")
    @classmethod
    def _no_client_tools(cls, tools: Any) -> Any:
        if tools:
            raise ValueError(
                "a served agent runs its own tools; client-side tools are not supported"
            )
        return tools

    def conversation(self) -> list[dict[str, Any]]:
        return [message.as_input() for message in self.messages]


class RunRequest(_UnicodeOnly):
    """`POST /v1/runs`: one agent run in the background."""

    model_config = ConfigDict(extra="forbid")

    agent: str | None = Field(default=None, description="A served agent; optional if one.")
    input: str | list[ChatMessage]
    context: dict[str, Any] = Field(default_factory=dict)
    conversation_id: str | None = None

    def conversation(self) -> str | list[dict[str, Any]]:
        if isinstance(self.input, str):
            return self.input
        return [message.as_input() for message in self.input]


def finish_reason(stop_reason: str) -> str:
    """How a run's end reads to a chat client: "stop" for an answer; a brake's stop reason
    (`max_iterations`, `loop_detected`, `token_budget`) when a brake stopped the run."""
    return "stop" if stop_reason in _ANSWER_REASONS else stop_reason


def completion(
    *,
    completion_id: str,
    agent: str,
    text: str,
    stop_reason: str,
    usage: Usage,
    extra: dict[str, Any],
) -> dict[str, Any]:
    """The whole answer as a `chat.completion` body. A run a brake stopped before it had any
    text has `content: null`: there is no answer, and `agentbench.stop_detail` says why."""
    answered = stop_reason in _ANSWER_REASONS
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": agent,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text if answered or text else None},
                "finish_reason": finish_reason(stop_reason),
            }
        ],
        "usage": usage_body(usage),
        "agentbench": extra,
    }


class ChunkWriter:
    """`chat.completion.chunk` dicts of one streamed answer, sharing id, time and model."""

    def __init__(self, completion_id: str, agent: str) -> None:
        self.base = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": agent,
        }

    def delta(
        self,
        delta: dict[str, Any],
        finish: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        chunk = {**self.base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        if extra is not None:
            chunk["agentbench"] = extra
        return chunk

    def usage(self, usage: Usage) -> dict[str, Any]:
        return {**self.base, "choices": [], "usage": usage_body(usage)}
