"""Reference policy for the library desk on the anthropic SDK.

It reads the request as agentbench's bundled server hands it over, normalized to the chat
shape (the Messages `system` a system message, `tool_use` blocks tool calls, `tool_result`
blocks tool messages), so it is written like every other suite's policy. A title is the quoted
text of the member's question; a card is `M-<digits>`. Tool-use ids are pinned (`toolu_<n>`,
counted through the conversation): the agent sends them back in every later request, so a
re-recorded cassette's requests stay the same.
"""

from __future__ import annotations

import re
from typing import Any

from agentbench import ToolCall
from golden._reference import last_user, results_of

TITLE = re.compile(r'"([^"]+)"')
CARD = re.compile(r"\b(M-\d+)\b")
ISBN = re.compile(r"ISBN (\d{13})")
BRANCHES = ("central", "riverside")


def _calls(request: dict[str, Any], *wanted: tuple[str, dict[str, Any]]) -> list[ToolCall]:
    seen = sum(len(m.get("tool_calls") or ()) for m in request["messages"])
    return [
        ToolCall(name, arguments, id=f"toolu_{seen + n:02d}")
        for n, (name, arguments) in enumerate(wanted, 1)
    ]


def _book(question: str, request: dict[str, Any]) -> Any:
    """The book the question is about — from the conversation, else searched — or the next
    tool call (the search) when it is not known yet."""
    earlier = " ".join(
        str(m.get("content") or "") for m in request["messages"] if m["role"] == "assistant"
    )
    title = TITLE.search(question)
    if title is None and ISBN.search(earlier):
        return {"isbn": ISBN.findall(earlier)[-1]}
    searched = results_of(request, "search_catalog")
    if not searched:
        if title is None:
            return "Which book are you looking for? Put its title in quotes, please."
        return _calls(request, ("search_catalog", {"query": title.group(1)}))
    books = searched[-1].json()["books"]
    if not books:
        return f'"{searched[-1].json()["query"]}" is not in the catalogue.'
    return books[0]


def _found(book: dict[str, Any]) -> str:
    return f"Yes: {book['title']} by {book['author']} ({book['year']}), ISBN {book['isbn']}."


def _availability(question: str, request: dict[str, Any]) -> Any:
    book = _book(question, request)
    if not isinstance(book, dict):
        return book
    seen = results_of(request, "branch_availability")
    if not seen:  # every branch at once: parallel tool use
        wanted = [("branch_availability", {"isbn": book["isbn"], "branch": b}) for b in BRANCHES]
        return _calls(request, *wanted)
    shelves = [o.json() for o in seen]
    said = "; ".join(
        f"{s['branch']}: {s['available']} of {s['copies']} on the shelf" for s in shelves
    )
    return f"{book.get('title', 'The book')} — {said}."


def _hold(question: str, request: dict[str, Any]) -> Any:
    card = CARD.search(question)
    if card is None:
        return "Which library card should I place the hold on?"
    book = _book(question, request)
    if not isinstance(book, dict):
        return book
    held = results_of(request, "place_hold")
    if not held:
        return _calls(request, ("place_hold", {"isbn": book["isbn"], "member_id": card.group(1)}))
    result = held[-1].json()
    if not isinstance(result, dict):  # the tool failed: its error, as the model was told
        return f"I could not place the hold: {held[-1].content.split(': ', 1)[-1]}."
    return f"Hold {result['hold']} placed; you are next in line for ISBN {result['isbn']}."


def respond(request: dict[str, Any]) -> Any:
    question = last_user(request)
    if re.search(r"\bhold\b", question, re.I):
        return _hold(question, request)
    if re.search(r"shelf|branch|available", question, re.I):
        return _availability(question, request)
    book = _book(question, request)
    return _found(book) if isinstance(book, dict) and "title" in book else book
