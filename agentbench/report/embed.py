"""Putting data and code inside one HTML file safely: JSON in script tags, CSP hashes.

The report is a single file opened from disk, so everything it shows travels inside it. Model
and tool text may hold anything, including `</script>`: JSON placed in a `<script>` block has
`<`, `>` and `&` written as `\\u` escapes (still the same JSON to `JSON.parse`), and U+2028 /
U+2029 too, which older parsers treat as line ends. The inline CSS and JS are allowed by the
Content-Security-Policy through their SHA-256 hashes, so nothing else inline can run.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import orjson
from markupsafe import Markup

_SCRIPT_UNSAFE = {
    b"<": b"\\u003c",
    b">": b"\\u003e",
    b"&": b"\\u0026",
    "\u2028".encode(): b"\\u2028",
    "\u2029".encode(): b"\\u2029",
}


def _fallback(value: Any) -> Any:
    return str(value)  # dates, paths, decimals: shown as their text


def script_json(value: Any) -> Markup:
    """JSON text safe to place between `<script type="application/json">` and `</script>`."""
    data = orjson.dumps(value, default=_fallback, option=orjson.OPT_NON_STR_KEYS)
    for raw, escaped in _SCRIPT_UNSAFE.items():
        data = data.replace(raw, escaped)
    return Markup(data.decode())


def csp_source(code: str) -> str:
    """The CSP source expression (`'sha256-…'`) that allows exactly this inline code."""
    digest = hashlib.sha256(code.encode()).digest()
    return f"'sha256-{base64.b64encode(digest).decode()}'"


def content_security_policy(styles: list[str], scripts: list[str]) -> str:
    """Nothing from anywhere, except these inline styles and scripts and data: images."""
    style_src = " ".join(csp_source(s) for s in styles) or "'none'"
    script_src = " ".join(csp_source(s) for s in scripts) or "'none'"
    return (
        "default-src 'none'; "
        f"style-src {style_src}; script-src {script_src}; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )
