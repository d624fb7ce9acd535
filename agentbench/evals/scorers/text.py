"""How scorers show values in their reasons: short, in the flow style people write YAML in.

`{city: Paris, unit: c}` reads better in a CI log than `{'city': 'Paris', 'unit': 'c'}`, and a
long output is cut with a visible ellipsis so one reason never floods the log.
"""

from __future__ import annotations

import re
from typing import Any

import orjson
from pydantic import BaseModel

_PLAIN = re.compile(r"^[A-Za-z_][\w .@/+-]*$")


def brief(value: Any, limit: int = 120) -> str:
    """`{city: Paris, days: [1, 2]}`: a compact rendering of JSON-like data."""
    text = _flow(value)
    return clip(text, limit)


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def quoted(text: str, limit: int = 120) -> str:
    """A text in double quotes, cut to `limit` characters, newlines shown as ⏎."""
    return '"' + clip(text.replace("\n", "⏎"), limit) + '"'


def _flow(value: Any) -> str:
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_scalar(k)}: {_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    return _scalar(value)


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    text = str(value)
    if _PLAIN.match(text) and text.strip() == text and text not in ("true", "false", "null"):
        return text
    return orjson.dumps(text).decode()


def output_text(output: Any) -> str:
    """The final output as text: strings as they are, structured output as JSON."""
    if output is None:
        return ""
    if isinstance(output, str):
        return output
    if isinstance(output, BaseModel):
        return output.model_dump_json()
    try:
        return orjson.dumps(output).decode()
    except TypeError:
        return str(output)
