"""The report's inflater (templates/inflate.js) against Python's zlib, under node: every kind
of DEFLATE block (stored, fixed and dynamic codes, long matches), and what it refuses. The
browser tests exercise it in Chromium on real reports; this covers the blocks they may miss."""

from __future__ import annotations

import base64
import json
import os
import random
import shutil
import subprocess
import zlib
from pathlib import Path

import pytest

from agentbench.report.packing import packed, unpack

pytestmark = pytest.mark.slow  # a node process

INFLATE = Path(__file__).resolve().parent.parent / "agentbench/report/templates/inflate.js"
NODE = shutil.which("node")

RUNNER = """
const inflate = require(process.argv[1]);
const cases = JSON.parse(require("fs").readFileSync(0, "utf8"));
const out = {};
for (const [name, packed] of Object.entries(cases)) {
  try {
    out[name] = Buffer.from(inflate(Buffer.from(packed, "base64"))).toString("base64");
  } catch (e) { out[name] = "error: " + e.message; }
}
process.stdout.write(JSON.stringify(out));
"""


def deflated(data: bytes, level: int) -> str:
    compressor = zlib.compressobj(level, zlib.DEFLATED, -15)
    return base64.b64encode(compressor.compress(data) + compressor.flush()).decode()


@pytest.mark.skipif(NODE is None, reason="needs node")
def test_the_inflater_reads_what_zlib_writes_and_refuses_what_is_cut_short() -> None:
    rng = random.Random(7)
    text = json.dumps([{"kind": "llm", "text": "left at the door " * rng.randint(1, 40), "n": n}
                       for n in range(2000)]).encode()  # fmt: skip
    noise = os.urandom(50_000)
    inputs = {"json": text, "noise": noise, "mixed": text[:30_000] + noise + text, "one": b"a"}
    cases = {f"{name}-{level}": deflated(data, level)
             for name, data in inputs.items() for level in (0, 1, 6, 9)}  # fmt: skip
    cases["cut"] = deflated(text, 6)[:400]
    done = subprocess.run(
        [NODE or "node", "-e", RUNNER, str(INFLATE)],
        input=json.dumps(cases), capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    got = json.loads(done.stdout)
    for name in cases:
        if name == "cut":
            assert got[name] == "error: the details are cut short"
            continue
        expected = inputs[name.rsplit("-", 1)[0]]
        assert base64.b64decode(got[name]) == expected, name


def test_packed_pieces_are_one_text_that_unpacks_to_the_pieces() -> None:
    pieces = ["[", '{"a": 1}', ",", '{"b": "é ✓"}' * 500, "]"]
    text = "".join(packed(pieces))
    assert unpack(text) == "".join(pieces)
    assert len(text) < len("".join(pieces)) / 5
