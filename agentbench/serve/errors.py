"""Error bodies in the OpenAI shape (`{"error": {"message", "type", "param", "code"}}`), so
the openai SDK raises its own typed errors with our message, and a malformed request is
answered 400/422 naming the field — never a 500 with a traceback."""

from __future__ import annotations

import re
from typing import Any

import orjson
from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse


def error_response(
    status: int,
    message: str,
    *,
    kind: str = "invalid_request_error",
    param: str | None = None,
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return JSONResponse(body, status_code=status, headers=headers)


# pydantic names the branch of a union it tried as a step of the location ("str",
# "list[ChatMessage]"): not a field the client wrote.
_BRANCH = re.compile(r"^(str|int|float|bool|dict|list|none|[\w-]+\[.*\])$")


def field_path(location: tuple[Any, ...] | list[Any]) -> str:
    """`("body", "messages", 0, "role")` → `messages[0].role`."""
    path = ""
    for part in location:
        if part == "body" and not path:
            continue
        if isinstance(part, str) and _BRANCH.match(part):
            continue
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path or "body"


async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    errors = exc.errors()
    first = errors[0] if errors else {"loc": ("body",), "msg": "invalid request"}
    if first.get("type") == "lone_surrogate":  # not Unicode: a bad request, not a bad field
        return error_response(400, first["msg"], code="invalid_unicode")
    if first.get("type") == "json_invalid" or tuple(first.get("loc", ())) == ("body",):
        # Not JSON at all (FastAPI only parses bodies labelled as JSON): say where it broke.
        try:
            orjson.loads(await request.body())
        except orjson.JSONDecodeError as broken:
            return error_response(
                400,
                f"the request body is not valid JSON at line {broken.lineno}, column "
                f"{broken.colno}: {broken.msg}",
            )
    path = field_path(first.get("loc", ()))
    # A union's branches fail at the same place: one message saying what each wanted.
    here = [e for e in errors if field_path(e.get("loc", ())) == path]
    message = "is required" if first.get("type") == "missing" else first.get("msg", "invalid")
    if len(here) > 1:
        message = " — or — ".join(dict.fromkeys(e.get("msg", "invalid") for e in here))
    more = len(errors) - len(here)
    tail = f" (and {more} more problems)" if more else ""
    return error_response(422, f"{path}: {message}{tail}", param=path)
