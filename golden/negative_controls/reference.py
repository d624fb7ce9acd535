"""Reference policy for the negative controls: look the book up, reserve it, answer."""

from __future__ import annotations

import re
from typing import Any

from golden._reference import call, results_of, route


def _reserve(match: re.Match[str], request: dict[str, Any]) -> Any:
    title = match.group(1)
    found = results_of(request, "find_book")
    if not found:
        return call("find_book", title=title)
    if found[-1].failed:
        return f"I could not find {title} in the catalogue."
    book = found[-1].json()
    reserved = results_of(request, "reserve_book")
    if not reserved:
        return call("reserve_book", title=book["title"])
    if reserved[-1].failed:
        return f"{book['title']} has no free copy right now."
    code = reserved[-1].content.removeprefix("reserved ")
    return (
        f"{book['title']} by {book['author']} is on shelf {book['shelf']}; "
        f"I reserved a copy for you ({code})."
    )


def respond(request: dict[str, Any]) -> Any:
    return route(request, [(r"reserve (\w+)", _reserve)], "Which book would you like?")
