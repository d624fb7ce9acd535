"""What `agentbench traces import-otel` costs per megabyte, and whether that stays flat.

    python benchmarks/otel_import.py [--mb 5 20] [--shape agents|plain] [--keep DIR]

Writes OTLP/JSON files of the sizes given, as a collector's file exporter would (batches of
ten runs a line, content on the spans per the latest GenAI conventions), in a temporary
folder, and imports each with the CLI in a process of its own: CPU seconds and peak memory
(the process's maximum resident set) per megabyte, beyond what importing a one-run file
costs, and the ratio of the largest file's per-MB figures to the smallest's — about 1 when
the import is linear. Two shapes:

* `agents` — an `invoke_agent` span per run holding 3 model calls and 2 tool calls;
* `plain` — a plain program's calls, each in a trace of its own, which the import joins by
  conversation (what took hours for 277 MB before the joining was indexed).

Each import passes `--max-mb` just above its file's size. A measurement: the exit code is 0
whatever it finds (2 for a bad option).
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

WORDS = [
    "the",
    "agent",
    "asked",
    "for",
    "weather",
    "in",
    "paris",
    "and",
    "the",
    "tool",
    "answered",
    "with",
    "a",
    "forecast",
]


def _text(rnd: random.Random, words: int) -> str:
    return " ".join(rnd.choice(WORDS) for _ in range(words))


def _attribute(key: str, value: Any) -> dict[str, Any]:
    kind = "intValue" if isinstance(value, int) else "stringValue"
    return {"key": key, "value": {kind: str(value) if isinstance(value, int) else value}}


def _span(trace: str, span: str, parent: str | None, name: str, start: int, **attrs: Any) -> dict:
    body = {
        "traceId": trace,
        "spanId": span,
        "name": name,
        "kind": 1,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(start + 400_000_000),
        "attributes": [_attribute(k, v) for k, v in attrs.items()],
    }
    if parent:
        body["parentSpanId"] = parent
    return body


def _run(rnd: random.Random, number: int, plain: bool) -> list[dict[str, Any]]:
    trace = f"{rnd.getrandbits(128):032x}"
    root = f"{rnd.getrandbits(64):016x}"
    start = 1_700_000_000_000_000_000 + number * 2_000_000_000
    system = json.dumps([{"type": "text", "content": _text(rnd, 150)}])
    history: list[dict[str, Any]] = [
        {"role": "user", "parts": [{"type": "text", "content": _text(rnd, 40)}]}
    ]
    spans = (
        []
        if plain
        else [
            _span(
                trace,
                root,
                None,
                "invoke_agent weather",
                start,
                **{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "weather"},
            )
        ]
    )
    for step in range(3):
        call_id = f"call_{number}_{step}"
        if step < 2:
            part = {
                "type": "tool_call",
                "id": call_id,
                "name": "get_weather",
                "arguments": {"city": "Paris"},
            }
        else:
            part = {"type": "text", "content": _text(rnd, 60)}
        output = [{"role": "assistant", "parts": [part], "finish_reason": "stop"}]
        call_trace = f"{rnd.getrandbits(128):032x}" if plain else trace
        spans.append(
            _span(
                call_trace,
                f"{rnd.getrandbits(64):016x}",
                None if plain else root,
                "chat gpt-4o",
                start + step * 500_000_000,
                **{
                    "gen_ai.operation.name": "chat",
                    "gen_ai.request.model": "gpt-4o",
                    "gen_ai.system_instructions": system,
                    "gen_ai.input.messages": json.dumps(history),
                    "gen_ai.output.messages": json.dumps(output),
                    "gen_ai.usage.input_tokens": 300,
                    "gen_ai.usage.output_tokens": 20,
                },
            )
        )
        history = [*history, *output]
        if step < 2:
            result = json.dumps({"city": "Paris", "forecast": _text(rnd, 80)})
            history.append(
                {
                    "role": "tool",
                    "parts": [{"type": "tool_call_response", "id": call_id, "response": result}],
                }
            )
            if not plain:
                spans.append(
                    _span(
                        trace,
                        f"{rnd.getrandbits(64):016x}",
                        root,
                        "execute_tool get_weather",
                        start + step * 500_000_000 + 400_000_000,
                        **{
                            "gen_ai.operation.name": "execute_tool",
                            "gen_ai.tool.name": "get_weather",
                            "gen_ai.tool.call.id": call_id,
                            "gen_ai.tool.call.result": result,
                        },
                    )
                )
    return spans


def write_file(path: Path, megabytes: float, plain: bool) -> int:
    """An OTLP/JSON file of about `megabytes`; how many runs it holds."""
    rnd = random.Random(7)
    written, runs = 0, 0
    with path.open("w") as out:
        while written < megabytes * 2**20:
            batch = []
            for _ in range(10):
                runs += 1
                batch += _run(rnd, runs, plain)
            scope = {"scope": {"name": "opentelemetry.instrumentation.openai_v2"}, "spans": batch}
            line = json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [scope]}]})
            out.write(line + "\n")
            written += len(line) + 1
    return runs


def measure(path: Path, db: Path) -> dict[str, float]:
    """Import `path` with the CLI in a process of its own: wall and CPU seconds, peak MB."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    size_mb = path.stat().st_size / 2**20
    started = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentbench",
            "traces",
            "import-otel",
            str(path),
            "--db",
            str(db),
            "--max-mb",
            str(size_mb + 1),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"import of {path} failed ({done.returncode}): {done.stderr.strip()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"mb": size_mb, "wall_s": wall, "cpu_s": cpu, "peak_mb": after.ru_maxrss / 1024}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, nargs="+", default=[5.0, 20.0])
    parser.add_argument("--shape", choices=["agents", "plain"], default="agents")
    parser.add_argument("--keep", type=Path, help="write the files here and keep them")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        # What any import costs (starting Python, agentbench, DuckDB): taken off each figure.
        tiny = folder / f"{args.shape}-tiny.jsonl"
        write_file(tiny, 0.001, args.shape == "plain")
        base = measure(tiny, folder / f"{args.shape}-tiny.duckdb")
        print(f"fixed cost: cpu {base['cpu_s']:.1f} s, peak {base['peak_mb']:.0f} MB")
        rows = []
        for megabytes in sorted(args.mb):
            path = folder / f"{args.shape}-{megabytes:g}mb.jsonl"
            runs = write_file(path, megabytes, args.shape == "plain")
            row = measure(path, folder / f"{args.shape}-{megabytes:g}mb.duckdb")
            row["cpu_per_mb"] = (row["cpu_s"] - base["cpu_s"]) / row["mb"]
            row["peak_per_mb"] = (row["peak_mb"] - base["peak_mb"]) / row["mb"]
            rows.append(row)
            print(
                f"{args.shape} {row['mb']:7.1f} MB  {runs:6d} runs  wall {row['wall_s']:6.1f} s"
                f"  cpu {row['cpu_s']:6.1f} s ({row['cpu_per_mb']:.2f} s/MB)"
                f"  peak {row['peak_mb']:6.0f} MB ({row['peak_per_mb']:.1f} MB/MB)"
            )
    if len(rows) > 1:
        small, big = rows[0], rows[-1]
        print(
            f"per-MB cpu, largest / smallest: {big['cpu_per_mb'] / small['cpu_per_mb']:.2f} "
            f"(1 is linear); per-MB peak: {big['peak_per_mb'] / small['peak_per_mb']:.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
