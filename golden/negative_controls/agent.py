"""A library desk for the negative controls: one small, fixed conversation to score.

Every case of the suite replays the same recording (a lookup, then a reservation, then the
answer). One case holds what is true of it; each of the others, marked xfail, holds one thing
that is not, so it passes only if its scorer stops telling true from false.
"""

from __future__ import annotations

from agentbench import Agent, BusinessFailure, tool

BOOKS = {
    "dune": {"title": "Dune", "author": "Frank Herbert", "shelf": "F-12", "available": True},
    "emma": {"title": "Emma", "author": "Jane Austen", "shelf": "A-03", "available": False},
}


@tool(effect="read_only", idempotent=True)
def find_book(title: str) -> dict:
    """A book in the catalogue: author, shelf and whether a copy is free.

    Args:
        title: The book's title, e.g. "Dune".
    """
    book = BOOKS.get(title.strip().lower())
    if book is None:
        raise BusinessFailure(f"no book titled {title!r} in the catalogue")
    return book


@tool(effect="write", idempotent=True)
def reserve_book(title: str) -> str:
    """Reserve a free copy of a book for the reader.

    Args:
        title: The book's title, e.g. "Dune".
    """
    book = BOOKS.get(title.strip().lower())
    if book is None or not book["available"]:
        raise BusinessFailure(f"no free copy of {title!r} to reserve")
    return f"reserved R-{book['title'].upper()}"


library_desk = Agent(
    name="library_desk",
    instructions="You are a library assistant. Look books up before reserving them. Be brief.",
    tools=[find_book, reserve_book],
)
