"""Choosing the N-th of several things a case did (model calls, calls of one tool).

Cases count as people do: from 1, or from the end with -1 for the last. The parameter is
validated when the suite loads, so `call: 0` is a config error naming the file and line, not a
failing score.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def check_position(value: int | None) -> int | None:
    """A pydantic validator body for `call:` parameters."""
    if value == 0:
        raise ValueError("counts from 1 (the first), or from the end with -1 (the last); not 0")
    return value


def ordinal(position: int) -> str:
    """`1st`, `2nd`, `last`, `2nd from the end`."""
    if position == -1:
        return "last"
    number = abs(position)
    suffix = {1: "st", 2: "nd", 3: "rd"}.get(number % 10 if number % 100 not in (11, 12, 13) else 0)
    text = f"{number}{suffix or 'th'}"
    return text if position > 0 else f"{text} from the end"


def pick(items: Sequence[T], position: int | None) -> list[T] | None:
    """The item at 1-based `position` (negative: from the end) as a one-item list, every item
    when `position` is None, and None when there is no such item."""
    if position is None:
        return list(items)
    index = position - 1 if position > 0 else position
    if -len(items) <= index < len(items):
        return [items[index]]
    return None
