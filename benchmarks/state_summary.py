"""What the state summary costs: tokens it adds to requests, and drift it adds to replays.

    python benchmarks/state_summary.py [--suite NAME]... [--json]

`Agent(state_summary=True)` appends a "## State so far" block to the system message of every
request once a tool has answered: one line per tool result (its call and the head of its
result), which the conversation already carries as a tool message. This measures both sides on
the golden suites that run on agentbench's own runtime. The package, the golden suites and
`scripts/record_golden.py` are copied twice to a temporary directory (the working tree is never
touched); in one copy `Agent`'s default is `state_summary=True`, in the other `False` (an agent
that sets it keeps its own: `golden/memory` sets True, `golden/memory_defaults` False). Each
copy records its suites anew through the real record path (the reference policies served by
the bundled OpenAI-compatible server) and is then measured on what it recorded:

* tokens — for every recorded chat request: its size (characters of the JSON body sent, and
  ~tokens, the runtime's estimate of four characters a token), and the state block's size;
  printed per request and per case (all of a case's requests, every turn), with the share of
  the request the block is. The difference between the two copies is what the summary adds.
* drift noise — each case is replayed (`agentbench replay CASSETTE --json --tools recorded
  --tool NAME=stub:VALUE`) with one tool's result changed: the first tool the case called
  that is not a handoff (one called once is preferred), every call of it returning its first
  recorded result with one value changed. Counted are the request-drift findings (model calls
  that drifted) and their diff lines, by where they land: the system message (`messages[0]`)
  or elsewhere (the tool message that carries the result, mostly).

Everything it measures is deterministic; no timing is taken. Exit 0 unless a copy could not be
recorded or a replay printed no report.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
COPIED = ("agentbench", "golden", "scripts", "pyproject.toml")
# The golden suites whose agent is an agentbench `Agent` (the others are boundary targets:
# their requests are their framework's, and the state summary is not in them).
RUNTIME_SUITES = (
    "brakes",
    "customer_service",
    "mcp_live",
    "mcp_time",
    "mechanisms",
    "memory",
    "memory_defaults",
    "negative_controls",
    "resilience",
    "sql_analyst",
    "sre",
)
HANDOFF_TOOLS = re.compile(r"^(transfer_to_.+|dispatch_to_agent)$")
STATE_HEADING = "\n\n## State so far\n"
AFTER_STATE = "\n\nWhen you give your final answer"
DEFAULT = re.compile(r"state_summary: bool = (True|False)")
TIMEOUT_S = 600


def _env(root: Path) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(root))
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        env.pop(name, None)
    env.pop("GITHUB_STEP_SUMMARY", None)
    return env


def make_copy(dest: Path, summary: bool) -> Path:
    """The committed package and suites (HEAD: other work in the tree may be half done),
    with `Agent` defaulting to `state_summary=summary`."""
    dest.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "archive", "HEAD", *COPIED], cwd=REPO, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    agent_py = dest / "agentbench" / "runtime" / "agent.py"
    text = agent_py.read_text()
    changed, count = DEFAULT.subn(f"state_summary: bool = {summary}", text)
    if count != 1:
        raise RuntimeError(f"{agent_py}: the state_summary default was not found once")
    agent_py.write_text(changed)
    probe = "import agentbench; print(agentbench.__file__)"
    imported = subprocess.run(
        [sys.executable, "-c", probe], cwd=dest, env=_env(dest), capture_output=True, text=True
    ).stdout.strip()
    if not imported or not Path(imported).resolve().is_relative_to(dest.resolve()):
        raise RuntimeError(f"{imported or 'nothing'} is imported instead of the copy in {dest}")
    return dest


def record(root: Path, suites: Sequence[str]) -> None:
    command = [sys.executable, "scripts/record_golden.py", *(f"golden/{s}" for s in suites)]
    command += ["--db", str(root / "record.duckdb"), "--no-report"]
    done = subprocess.run(
        command, cwd=root, env=_env(root), capture_output=True, text=True, timeout=TIMEOUT_S
    )
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        raise RuntimeError(f"recording in {root} exited {done.returncode}:\n{tail}")


def cassettes(root: Path, suites: Sequence[str]) -> list[Path]:
    return sorted(p for s in suites for p in (root / "replays" / s).glob("*.yaml"))


def _load(path: Path) -> dict[str, Any]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(path.read_text(), Loader=loader)  # a safe loader (C when built)


def state_block(system: str) -> str:
    """The "## State so far" block of a system message ('' when it has none)."""
    start = system.find(STATE_HEADING)
    if start < 0:
        return ""
    end = system.find(AFTER_STATE, start)
    return system[start : end if end >= 0 else len(system)]


def tokens(chars: int) -> int:
    """~tokens of `chars` characters of JSON and English: the runtime's four a token."""
    return -(-chars // 4)


def case_sizes(path: Path) -> dict[str, Any]:
    """Characters of every chat request a cassette recorded, and of their state blocks."""
    requests = []
    for interaction in _load(path)["interactions"]:
        body = json.loads(interaction["request"]["body"])
        messages = body.get("messages")
        if not messages:
            continue
        first = messages[0]
        system = first.get("content") if first.get("role") == "system" else ""
        block = state_block(system if isinstance(system, str) else "")
        body_text = interaction["request"]["body"]
        requests.append({"chars": len(body_text), "state_chars": len(block)})
    return {"case": f"{path.parent.name}/{path.stem}", "requests": requests}


def changed(value: Any) -> tuple[Any, bool]:
    """`value` with its first scalar changed (a number +1, a string marked, a bool flipped)."""
    if isinstance(value, bool):
        return not value, True
    if isinstance(value, int | float):
        return value + 1, True
    if isinstance(value, str):
        return value + " (changed)", True
    if isinstance(value, dict):
        for key, item in value.items():
            new, done = changed(item)
            if done:
                return {**value, key: new}, True
    if isinstance(value, list):
        for index, item in enumerate(value):
            new, done = changed(item)
            if done:
                return [*value[:index], new, *value[index + 1 :]], True
    return value, False


def tool_change(path: Path) -> tuple[str, Any] | None:
    """The tool whose result the drift measurement changes, and the value it returns then."""
    results = _load(path)["metadata"]["agentbench"].get("tool_results") or []
    calls = [r for r in results if not HANDOFF_TOOLS.match(r.get("tool", ""))]
    calls = [r for r in calls if (r.get("result") or {}).get("kind") == "ok"]
    if not calls:
        return None
    names = [r["tool"] for r in calls]
    once = [r for r in calls if names.count(r["tool"]) == 1]
    chosen = (once or calls)[0]
    new, done = changed(chosen["result"]["data"])
    return (chosen["tool"], new) if done else None


def replay_drift(root: Path, cassette: Path) -> dict[str, Any] | None:
    """Replay `cassette` with one tool's result changed; its drift findings by where."""
    change = tool_change(cassette)
    if change is None:
        return None
    tool, value = change
    stub = value if isinstance(value, str) else json.dumps(value)
    command = [sys.executable, "-m", "agentbench", "replay", str(cassette), "--json"]
    command += ["--tools", "recorded", "--tool", f"{tool}=stub:{stub}"]
    command += ["--db", str(root / "replay.duckdb")]
    done = subprocess.run(
        command, cwd=root, env=_env(root), capture_output=True, text=True, timeout=TIMEOUT_S
    )
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"replay of {cassette} printed no report: {tail}") from None
    found = {"system_only": 0, "elsewhere_only": 0, "both": 0, "system_lines": 0, "lines": 0}
    for drift in report.get("drifts") or []:
        paths = [c["path"] for c in drift["changes"]]
        system = sum(p.startswith("messages[0]") for p in paths)
        found["system_lines"] += system
        found["lines"] += len(paths)
        where = "both" if 0 < system < len(paths) else "system_only" if system else None
        found[where or "elsewhere_only"] += 1
    found["findings"] = found["system_only"] + found["elsewhere_only"] + found["both"]
    return {"case": f"{cassette.parent.name}/{cassette.stem}", "tool": tool, **found}


def measure_side(root: Path, suites: Sequence[str]) -> dict[str, Any]:
    record(root, suites)
    paths = cassettes(root, suites)
    sizes = [case_sizes(p) for p in paths]
    drifts = [d for p in paths if (d := replay_drift(root, p)) is not None]
    return {"sizes": sizes, "drifts": drifts}


def _sum(rows: Sequence[dict[str, Any]], key: str) -> int:
    return sum(int(r[key]) for r in rows)


def summarize(side: dict[str, Any]) -> dict[str, Any]:
    requests = [r for case in side["sizes"] for r in case["requests"]]
    with_block = [r for r in requests if r["state_chars"]]
    cases = len(side["sizes"])
    chars, state = _sum(requests, "chars"), _sum(requests, "state_chars")
    drifts = side["drifts"]
    return {
        "cases": cases,
        "requests": len(requests),
        "requests_with_state": len(with_block),
        "request_chars": chars,
        "state_chars": state,
        "state_tokens": sum(tokens(r["state_chars"]) for r in requests),
        "state_chars_per_request_with_state": round(state / len(with_block)) if with_block else 0,
        "state_chars_max": max((r["state_chars"] for r in requests), default=0),
        "state_chars_per_case": round(state / cases) if cases else 0,
        "state_share": round(state / chars, 4) if chars else 0.0,
        "replayed_cases": len(drifts),
        "drift_findings": _sum(drifts, "findings"),
        "drift_system_only": _sum(drifts, "system_only"),
        "drift_both": _sum(drifts, "both"),
        "drift_elsewhere_only": _sum(drifts, "elsewhere_only"),
        "drift_lines": _sum(drifts, "lines"),
        "drift_system_lines": _sum(drifts, "system_lines"),
    }


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", action="append", choices=RUNTIME_SUITES, default=[])
    parser.add_argument("--json", action="store_true", help="print every figure as JSON")
    parser.add_argument("--keep", type=Path, help="work in this (new) folder and keep it")
    return parser.parse_args(argv)


def _print(on: dict[str, Any], off: dict[str, Any]) -> None:
    rows = [
        ("cases (suites on agentbench's runtime)", "cases"),
        ("chat requests recorded", "requests"),
        ("  of which carry a state block", "requests_with_state"),
        ("request body characters, all requests", "request_chars"),
        ("state block characters, all requests", "state_chars"),
        ("state block ~tokens, all requests", "state_tokens"),
        ("state block chars per request that has one", "state_chars_per_request_with_state"),
        ("largest state block (chars)", "state_chars_max"),
        ("state block chars per case", "state_chars_per_case"),
        ("state block share of request characters", "state_share"),
        ("cases replayed with one tool result changed", "replayed_cases"),
        ("request-drift findings (model calls drifted)", "drift_findings"),
        ("  in the system message only", "drift_system_only"),
        ("  in the system message and elsewhere", "drift_both"),
        ("  elsewhere only", "drift_elsewhere_only"),
        ("drift diff lines", "drift_lines"),
        ("  of which in the system message", "drift_system_lines"),
    ]
    print(f"{'':48} {'summary on':>12} {'summary off':>12}")
    for label, key in rows:
        print(f"{label:48} {on[key]:>12} {off[key]:>12}")
    added = on["request_chars"] - off["request_chars"]
    cases = on["cases"] or 1
    print(
        f"\nrequests with the summary on are {added:,} characters (~{tokens(added):,} "
        f"tokens) larger in all: {added / (on['requests'] or 1):.0f} chars a request, "
        f"{added / cases:.0f} a case; x{on['request_chars'] / (off['request_chars'] or 1):.3f}"
    )
    ratio = on["drift_lines"] / (off["drift_lines"] or 1)
    print(
        f"drift lines with a tool result changed: x{ratio:.2f} with the summary on "
        f"({on['drift_system_lines']} of {on['drift_lines']} in the system message)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    suites = args.suite or list(RUNTIME_SUITES)
    work = args.keep or Path(tempfile.mkdtemp(prefix="state-summary-"))
    try:
        sides = {}
        for name, summary in (("on", True), ("off", False)):
            root = make_copy(work / name, summary)
            sides[name] = measure_side(root, suites)
    except RuntimeError as exc:
        print(f"state_summary: {exc}", file=sys.stderr)
        return 3
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    figures = {name: summarize(side) for name, side in sides.items()}
    if args.json:
        print(json.dumps({"figures": figures, "cases": sides}, indent=2))
    else:
        _print(figures["on"], figures["off"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
