"""The report's case details as they travel in the page: deflated, then base64.

The details are the bulk of a report (every step of every case, for the page to build a
case's view when it is expanded) and repeat themselves a great deal (the same tools,
instructions and shapes in every case), so they are written deflated (raw DEFLATE, RFC 1951,
as `templates/inflate.js` reads it): about a tenth of their JSON. They are redacted before
they are packed (`html._page_pieces`), and packed piece by piece, so a report never holds
more than one trial's detail. `unpack` reads them back, for tests and tools that read a
report.
"""

from __future__ import annotations

import base64
import re
import zlib
from collections.abc import Iterable, Iterator

ENCODING = "deflate+base64"


def packed(pieces: Iterable[str]) -> Iterator[str]:
    """The pieces' UTF-8 text, deflated and in base64, as pieces of one base64 text."""
    compressor = zlib.compressobj(6, zlib.DEFLATED, -15)
    pending = b""
    for piece in pieces:
        pending += compressor.compress(piece.encode("utf-8"))
        whole = len(pending) - len(pending) % 3  # base64 by whole 3-byte groups
        if whole:
            yield base64.b64encode(pending[:whole]).decode("ascii")
            pending = pending[whole:]
    yield base64.b64encode(pending + compressor.flush()).decode("ascii")


def unpack(text: str) -> str:
    """The JSON text a `packed` text holds."""
    return zlib.decompress(base64.b64decode(text), -15).decode("utf-8")


_DETAILS = re.compile(r'<script [^>]*id="case-data"[^>]*>(.*?)</script>', re.DOTALL)


def report_details(page: str) -> str | None:
    """The case details of a report page, unpacked (None when the page has none)."""
    found = _DETAILS.search(page)
    return unpack(found.group(1)) if found else None
