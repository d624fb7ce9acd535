"""A recorded value that redaction masked matches whatever the current code has in its place.

Cassettes are written redacted, so a recorded request or step can hold `[REDACTED]` where the
run had a key, a password or the fragment of a token at a cut. Replaying the same code must not
call that a change: redaction must never cause a verdict. A masked string reads as a pattern —
its other text must match exactly and each mask stands for one or more characters — and a mask
standing alone was a whole scalar. JSON text written by older versions, re-encoded compactly
when something in it was masked, is compared as JSON.

What a mask stands for is a secret (`revealed`): a replay that meets it in clear — a case's
input, which the recording masked once the run had learned it was a password — hands it to
the run's redactor, so the replayed run masks it as the recorded one did.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

from agentbench.trace.redaction.rules import MASK


def fits(recorded: Any, current: Any) -> bool:
    """Does `current` match `recorded`, each mask in `recorded` read as "whatever was here"?"""
    if recorded == current:
        return True
    if isinstance(recorded, dict) and isinstance(current, dict):
        return recorded.keys() == current.keys() and all(
            fits(value, current[key]) for key, value in recorded.items()
        )
    if isinstance(recorded, list) and isinstance(current, list):
        return len(recorded) == len(current) and all(
            fits(a, b) for a, b in zip(recorded, current, strict=True)
        )
    if not isinstance(recorded, str) or MASK not in recorded:
        return False
    if recorded == MASK:  # a masked scalar: redaction never masks None, "", a bool or a container
        return isinstance(current, str | int | float) and not isinstance(current, bool)
    if not isinstance(current, str):
        return False
    return _matches(recorded.split(MASK), current) or _same_json(recorded, current)


def revealed(recorded: Any, current: Any) -> Iterator[str]:
    """The current text each mask in `recorded` stands for, where `current` fits it."""
    if isinstance(recorded, dict):
        if isinstance(current, dict):
            for key, value in recorded.items():
                if key in current:
                    yield from revealed(value, current[key])
    elif isinstance(recorded, list):
        if isinstance(current, list):
            for old, new in zip(recorded, current, strict=False):
                yield from revealed(old, new)
    elif isinstance(recorded, str) and MASK in recorded and isinstance(current, str):
        yield from _revealed_text(recorded, current)


def _revealed_text(recorded: str, current: str) -> Iterator[str]:
    if recorded == MASK:
        yield current
        return
    spans = _mask_spans(recorded.split(MASK), current)
    if spans is not None:
        yield from (current[start:end] for start, end in spans)
    elif recorded.lstrip()[:1] in ("{", "["):
        try:
            before, now = orjson.loads(recorded), orjson.loads(current)
        except orjson.JSONDecodeError:
            return
        yield from revealed(before, now)


def has_mask(value: Any) -> bool:
    """Is there a mask anywhere in `value`?"""
    return MASK.encode() in orjson.dumps(value, default=str)


def unmasked(recorded: list[Any], current: list[Any]) -> list[Any]:
    """`recorded` with each masked item replaced by the current item it fits — the one at the
    same place if it does, else the nearest — so aligning the two lists by content pairs them
    as the same item instead of one removed and one added."""
    out = list(recorded)
    for index, item in enumerate(recorded):
        if not has_mask(item):
            continue
        order = sorted(range(len(current)), key=lambda j: (abs(j - index), j))
        match = next((j for j in order if fits(item, current[j])), None)
        if match is not None:
            out[index] = current[match]
    return out


def _matches(parts: list[str], text: str) -> bool:
    """`text` against literal `parts` with a mask (one or more characters) between each two."""
    return _mask_spans(parts, text) is not None


def _mask_spans(parts: list[str], text: str) -> list[tuple[int, int]] | None:
    """Where in `text` each mask between literal `parts` is (one or more characters), or None
    when `text` does not fit them.

    Taking each middle part at its first place leaves the most room for the rest, so one
    left-to-right pass decides (no backtracking, whatever the number of masks)."""
    first, *middle, last = parts
    if not text.startswith(first):
        return None
    at = len(first)
    spans = []
    for part in middle:
        found = text.find(part, at + 1)
        if found < 0:
            return None
        spans.append((at, found))
        at = found + len(part)
    if len(text) - len(last) < at + 1 or not text.endswith(last):
        return None
    spans.append((at, len(text) - len(last)))
    return spans


def _same_json(recorded: str, current: str) -> bool:
    if recorded.lstrip()[:1] not in ("{", "["):
        return False
    try:
        before, now = orjson.loads(recorded), orjson.loads(current)
    except orjson.JSONDecodeError:
        return False
    return fits(before, now)
