"""SDK clients a test opens and its teardown closes (conftest's `_no_network`).

A test that makes an `openai.OpenAI(...)` it uses across several statements hands it to
`closed_after_test` rather than nest the test in a `with`: a client left unclosed keeps its
connection until the garbage collector frees it, and the socket's `ResourceWarning` (an error
in this suite) then lands in whichever test is running.
"""

from __future__ import annotations

from typing import Any, TypeVar

Client = TypeVar("Client")
_open: list[Any] = []


def closed_after_test(client: Client) -> Client:
    _open.append(client)
    return client


def close_all() -> None:
    while _open:
        _open.pop().close()
