"""A stdio MCP server that is a proxy running elsewhere: `python bridge.py URL`.

A client that starts its MCP servers as commands (the OpenAI Agents SDK's and pydantic-ai's
`MCPServerStdio`, Claude Desktop) is handed this command by the harness; each line it writes
is POSTed to the proxy's Streamable HTTP address (`mcp_proxy.http_front`), and each answer
written back as a line. Requests go out at once, each on its own connection, so a slow call
holds up no other. When the proxy drops a connection (an injected crash) the bridge exits at
once, as a crashed server does; when the client closes its input, it exits after the answers
still on their way.

Standard library only, run as a file (not `-m`): it starts in a few milliseconds.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import sys
import threading
import urllib.parse

_WRITE = threading.Lock()
MAX_LINE = 64 << 20


def _post(url: urllib.parse.SplitResult, line: bytes) -> None:
    try:
        connection = http.client.HTTPConnection(url.hostname, url.port, timeout=None)
        connection.request(
            "POST",
            url.path or "/",
            body=line,
            headers={
                "content-type": "application/json",
                "accept": "application/json, text/event-stream",
            },
        )
        response = connection.getresponse()
        body = response.read(MAX_LINE + 1)
        connection.close()
    except (OSError, http.client.HTTPException):
        _crash()
        return
    if response.status == 202 or not body.strip():
        return
    if response.status >= 400:
        _answer_error(line, f"the proxy answered HTTP {response.status}: {body[:300]!r}")
        return
    try:
        data = json.loads(body)
    except ValueError:
        _answer_error(line, "the proxy answered with something not JSON")
        return
    for message in data if isinstance(data, list) else [data]:
        _write(message)


def _answer_error(line: bytes, text: str) -> None:
    try:
        request = json.loads(line)
    except ValueError:
        return
    if isinstance(request, dict) and "id" in request and "method" in request:
        _write({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32603, "message": text}})


def _write(message: object) -> None:
    data = json.dumps(message, separators=(",", ":")).encode() + b"\n"
    with _WRITE:
        try:
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        except (OSError, ValueError):
            os._exit(0)  # the client is gone


def _crash() -> None:
    """The server went away: so does this process, output closed, as a crashed server's is."""
    with _WRITE:
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.buffer.flush()
        os._exit(1)


def main() -> None:
    if len(sys.argv) != 2:
        sys.stderr.write("usage: bridge.py URL\n")
        raise SystemExit(2)
    url = urllib.parse.urlsplit(sys.argv[1])
    threads = []
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        thread = threading.Thread(target=_post, args=(url, line), daemon=True)
        thread.start()
        threads.append(thread)
        threads = [t for t in threads if t.is_alive()]
    for thread in threads:
        thread.join(timeout=30)


if __name__ == "__main__":
    main()
