"""Error bodies in the OpenAI shape (`{"error": {"message", "type", "param", "code"}}`), so
the openai SDK raises its own typed errors with our message, and a malformed request is
answered 400/422 naming the field or the byte — never a 500 with a traceback, and never in
FastAPI's own `{"detail": ...}` shape (its answers are recast here too)."""

from __future__ import annotations

import re
from typing import Any

import orjson
from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException


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
        refused = unreadable_body(await request.body())
        if refused is not None:
            return refused
    path = field_path(first.get("loc", ()))
    # A union's branches fail at the same place: one message saying what each wanted.
    here = [e for e in errors if field_path(e.get("loc", ())) == path]
    message = "is required" if first.get("type") == "missing" else first.get("msg", "invalid")
    if len(here) > 1:
        message = " — or — ".join(dict.fromkeys(e.get("msg", "invalid") for e in here))
    more = len(errors) - len(here)
    tail = f" (and {more} more problems)" if more else ""
    return error_response(422, f"{path}: {message}{tail}", param=path)


def unreadable_body(body: bytes) -> JSONResponse | None:
    """400 saying why `body` is no JSON document: not UTF-8 (at which byte), or not JSON (at
    which line and column); None when it is one."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as bad:
        return error_response(
            400,
            f"the request body is not UTF-8: invalid UTF-8 at byte offset {bad.start} "
            f"({body[bad.start : bad.start + 1]!r}: {bad.reason}); JSON bodies are UTF-8",
            code="invalid_unicode",
        )
    try:
        orjson.loads(text.removeprefix("\ufeff"))  # a byte order mark, as FastAPI allows
    except orjson.JSONDecodeError as broken:
        where = f"line {broken.lineno}, column {broken.colno}"
        if "depth" in broken.msg or "recursion" in broken.msg:
            message = f"the request body nests arrays or objects too deeply (at {where})"
        else:
            message = f"the request body is not valid JSON at {where}: {broken.msg}"
        return error_response(400, message, code="invalid_json")
    return None


# What FastAPI answers when reading a JSON body failed other than by a JSON syntax error
# (bytes that are not UTF-8, nesting too deep for its parser).
_FASTAPI_BODY_ERROR = "There was an error parsing the body"


async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
    """FastAPI's and Starlette's own HTTP errors (a body it could not parse, an unknown route,
    a method a route does not take) in the OpenAI shape, saying what was wrong."""
    if exc.status_code == 400 and exc.detail == _FASTAPI_BODY_ERROR:
        refused = unreadable_body(await request.body())
        if refused is not None:
            return refused
        return error_response(400, "the request body could not be read as a JSON document")
    message = str(exc.detail)
    if exc.status_code in (404, 405):
        message = f"{message}: {request.method} {request.url.path[:200]}"
    return error_response(exc.status_code, message, headers=dict(exc.headers or {}))
