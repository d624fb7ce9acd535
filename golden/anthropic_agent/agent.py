"""Library desk: a public library's front desk on the `anthropic` SDK, as its users write it.

Anthropic's own tool loop (the Messages API): the model answers with `tool_use` blocks — several
at once when it looks at more than one branch — the loop runs each tool and sends every result
back in one user message of `tool_result` blocks, a tool that fails as a result with
`is_error: true`, until the model's `stop_reason` is `end_turn`. With `stream: true` in the
case's context every call streams (`client.messages.stream`) and the loop takes the message
the stream put together.

agentbench calls `library_desk(input, target)` once per user turn: `target.anthropic_base_url`
is its own record/replay server (the root the anthropic SDK takes, as ANTHROPIC_BASE_URL),
`target.model` the suite's model name, `target.variables` the case's context.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from anthropic import Anthropic

if TYPE_CHECKING:  # agentbench is needed only to test the agent, not to run it
    from agentbench import TargetContext

SYSTEM_PROMPT = (
    "You are the front desk of the city library, helping {member}. Look books up in the "
    "catalogue and check the branches before you answer; never promise a copy the tools did "
    "not show. Place holds only for the member's own card."
)
MAX_MODEL_CALLS = 8
MAX_TOKENS = 1024

CATALOGUE: list[dict[str, Any]] = [
    {"isbn": "9780441172719", "title": "Dune", "author": "Frank Herbert", "year": 1965},
    {"isbn": "9780547928227", "title": "The Hobbit", "author": "J. R. R. Tolkien", "year": 1937},
    {"isbn": "9780060935467", "title": "Beloved", "author": "Toni Morrison", "year": 1987},
]
COPIES: dict[tuple[str, str], dict[str, Any]] = {
    ("9780441172719", "central"): {"copies": 2, "on_loan": 1, "shelf": "SF-HER"},
    ("9780441172719", "riverside"): {"copies": 1, "on_loan": 1, "shelf": "SF-HER"},
    ("9780547928227", "central"): {"copies": 3, "on_loan": 0, "shelf": "F-TOL"},
}
MEMBERS = {"M-100": "Ada Lovelace", "M-200": "Alan Turing"}


class UnknownCardError(LookupError):
    """No library card with that number."""


def search_catalog(query: str) -> dict[str, Any]:
    words = query.lower().split()
    found = [b for b in CATALOGUE if all(w in f"{b['title']} {b['author']}".lower() for w in words)]
    return {"query": query, "books": found}


def branch_availability(isbn: str, branch: str) -> dict[str, Any]:
    stock = COPIES.get((isbn, branch.lower()))
    if stock is None:
        return {"isbn": isbn, "branch": branch.lower(), "copies": 0, "available": 0}
    available = stock["copies"] - stock["on_loan"]
    return {"isbn": isbn, "branch": branch.lower(), **stock, "available": available}


def place_hold(isbn: str, member_id: str) -> dict[str, Any]:
    if member_id not in MEMBERS:
        raise UnknownCardError(f"no library card {member_id}")
    return {"hold": f"H-{isbn[-4:]}-{member_id}", "isbn": isbn, "status": "waiting"}


TOOLS: list[dict[str, Any]] = [
    {
        "name": "search_catalog",
        "description": "Books in the catalogue whose title or author match every word.",
        "input_schema": {
            "type": "object",
            "properties": {"query": {"type": "string", "description": "Title or author words"}},
            "required": ["query"],
        },
    },
    {
        "name": "branch_availability",
        "description": "Copies of a book at one branch, and how many are on the shelf now.",
        "input_schema": {
            "type": "object",
            "properties": {
                "isbn": {"type": "string"},
                "branch": {"type": "string", "enum": ["central", "riverside"]},
            },
            "required": ["isbn", "branch"],
        },
    },
    {
        "name": "place_hold",
        "description": "Reserve the next free copy of a book for a member's card.",
        "input_schema": {
            "type": "object",
            "properties": {
                "isbn": {"type": "string"},
                "member_id": {"type": "string", "description": "Library card, e.g. M-100"},
            },
            "required": ["isbn", "member_id"],
        },
    },
]
FUNCTIONS = {
    "search_catalog": search_catalog,
    "branch_availability": branch_availability,
    "place_hold": place_hold,
}


def run_tool(block: Any) -> dict[str, Any]:
    """One `tool_use` block run: its `tool_result` block, `is_error` when the tool failed."""
    result: dict[str, Any] = {"type": "tool_result", "tool_use_id": block.id}
    try:
        result["content"] = json.dumps(FUNCTIONS[block.name](**block.input))
    except Exception as exc:  # the model is told, and answers the member with it
        result["content"] = f"{type(exc).__name__}: {exc}"
        result["is_error"] = True
    return result


class Desk:
    """The tool loop: model calls and tool runs until the model ends its turn."""

    def __init__(self, client: Anthropic, model: str, system: str, *, stream: bool) -> None:
        self.client = client
        self.model = model
        self.system = system
        self.stream = stream

    def run(self, messages: list[dict[str, Any]]) -> str:
        for _ in range(MAX_MODEL_CALLS):
            message = self.ask(messages)
            messages.append({"role": "assistant", "content": message.content})
            if message.stop_reason != "tool_use":
                return "".join(b.text for b in message.content if b.type == "text")
            results = [run_tool(b) for b in message.content if b.type == "tool_use"]
            messages.append({"role": "user", "content": results})
        raise RuntimeError(f"no answer after {MAX_MODEL_CALLS} model calls")

    def ask(self, messages: list[dict[str, Any]]) -> Any:
        settings = {
            "model": self.model,
            "max_tokens": MAX_TOKENS,
            "system": self.system,
            "tools": TOOLS,
            "messages": messages,
        }
        if self.stream:
            with self.client.messages.stream(**settings) as stream:
                return stream.get_final_message()
        return self.client.messages.create(**settings)


def library_desk(input: str | list[dict[str, Any]], target: TargetContext) -> str:
    """One user turn: `input` is the question, or the conversation so far from turn 2 on."""
    client = Anthropic(base_url=target.anthropic_base_url, api_key=target.api_key)
    member = target.variables.get("member", "a member")
    system = SYSTEM_PROMPT.format(member=member)
    desk = Desk(client, target.model, system, stream=bool(target.variables.get("stream")))
    conversation = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
    try:
        return desk.run(conversation)
    finally:
        client.close()
