"""Canaries: secrets planted in every field a run carries reach no byte agentbench writes.

A suite is recorded live (through the openai SDK, against the bundled server), run as a golden
suite from its cassette, replayed, run again with a changed prompt (so request drift quotes the
current requests), diffed, reported, exported (Parquet, OpenTelemetry), a stored run replayed,
and a run promoted to a case whose cassette is replayed; then every file under the test's
folder, every text cell of every DuckDB store and Parquet file, every byte written to a
journal, the console and the log are searched for each canary and for every 10-character piece
of one (half a secret left at a cut is a leak too). The canaries: the values of secret-named
environment variables, `Authorization` / `api-key` headers, secret-named keys at any depth,
`sk-…` and `Bearer …` tokens, and secrets straddling the runtime's 2,000-character tool-result
cut — in the input, context variables, tool arguments, tool results, model text, and a tool's
error — and a password that only its tool argument's name (`password`) says is secret, also in
the input (recorded before that argument), a tool's error, a tool's result and the answer; it
holds a quote and a backslash, so JSON text writes it escaped (`\\"`, `\\\\`), and every
spelling of it is searched for (once and twice JSON-escaped), as every piece of one.

`scan` searches a folder, the journals, the console and the log: another path that writes
(`serve`'s answers, say) plants the same canaries, runs, and asserts `scan(...)` finds nothing.
"""

from __future__ import annotations

import logging
import os
import random
import stat
import string
import sys
from collections.abc import Iterator
from pathlib import Path

import duckdb
import orjson
import pytest

from agentbench import ToolCall
from agentbench.cli import main
from agentbench.report.packing import report_details
from agentbench.testing import OpenAICompatibleServer
from agentbench.trace.redaction.secret_forms import spellings

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

_RANDOM = random.Random(12)  # fixed: a failure names the same canary every run


def _token(prefix: str = "") -> str:
    return prefix + "".join(_RANDOM.choices(string.ascii_letters + string.digits, k=24))


# Planted through the environment (the agent reads them by name) or by the responder.
CANARIES = {
    "env OPENAI_API_KEY": _token("sk-"),
    "env ACME_SERVICE_TOKEN (matches no pattern)": _token(),
    "api-key header in the model settings": _token(),
    "Authorization header in tool arguments": _token(),
    "password in tool arguments, the input, a tool's error and result, the answer": (
        _token()[:12] + '"\\' + _token()[:12]
    ),
    "access_token in a tool result": _token(),
    "sk- token straddling the tool-result cut": _token("sk-"),
    "sk- token in a tool's error": _token("sk-"),
    "Bearer token in the model's text": _token(),
    "sk- token in the model's text": _token("sk-"),
    "sk- token in the input": _token("sk-"),
    "api_key context variable": _token(),
    "client_secret deep in a context variable": _token(),
}
C = CANARIES
PASSWORD = C["password in tool arguments, the input, a tool's error and result, the answer"]
MARKER = "visible-marker-7e7e"  # not secret: proves the scans read real content
WINDOW = 10  # any piece of a canary this long found anywhere is a leak

AGENT = '''
import os

from agentbench import Agent, ModelSettings, tool


@tool(effect="read_only")
def login(user: str, password: str, headers: dict) -> dict:
    """Log a user in.

    Args:
        user: The user.
        password: Their password.
        headers: HTTP headers to send.
    """
    return {
        "session": {"access_token": os.environ["CANARY_RESULT"], "user": user},
        "note": "connected with " + os.environ["ACME_SERVICE_TOKEN"] + " (visible-marker-7e7e)",
        "greeting": "welcome back, " + password + " still works",
    }


@tool(effect="read_only")
def fetch_log(part: int) -> str:
    """A long log; the runtime cuts it at 2,000 characters, in the middle of a secret.

    Args:
        part: Which log.
    """
    secret = os.environ["CANARY_STRADDLE"] if part == 1 else os.environ["ACME_SERVICE_TOKEN"]
    return "x" * 1984 + " " + secret + " " + "y" * 100


@tool(effect="read_only")
def check(reason: str) -> str:
    """Always fails, quoting a key.

    Args:
        reason: Why.
    """
    raise RuntimeError("upstream rejected " + os.environ["CANARY_ERROR"] + " for " + reason)


agent = Agent(
    name="vault",
    instructions="Answer briefly for {{ user }}.",
    tools=[login, fetch_log, check],
    model_settings=ModelSettings(
        stream=True, extra_body={"extra_headers": {"api-key": os.environ["CANARY_API_HEADER"]}}
    ),
)
'''

SUITE = """
name: vault
agent: agent.py:agent
model: {name: vault-model}
cassettes: cassettes
scorers:
  - stop_reason: completed
"""


def cases() -> str:
    context = {
        "user": "ada",
        "api_key": C["api_key context variable"],
        "deep": {"nested": [{"client_secret": C["client_secret deep in a context variable"]}]},
    }
    case = {
        "input": f"log me in; my key is {C['sk- token in the input']}, my password {PASSWORD}",
        "context": context,
        "expect": [{"tool_called": {"name": "login"}}],
    }
    # An expected failure quotes the output (and its secrets) in its reason.
    leaky = {**case, "xfail": "reasons quote the output", "expect": [{"output_contains": "nope"}]}
    return orjson.dumps([{"id": "login", **case}, {"id": "leaky", **leaky}]).decode()


def respond(request: dict) -> object:
    """The model: log in with a password and a bearer header, read two long logs, call a
    failing tool, then answer with secrets in its text."""
    done = sum(m["role"] == "tool" for m in request["messages"])
    if done == 0:
        headers = {"Authorization": f"Bearer {C['Authorization header in tool arguments']}"}
        return ToolCall("login", {"user": "ada", "password": PASSWORD, "headers": headers})
    if done == 1:
        return [ToolCall("fetch_log", {"part": 1}), ToolCall("fetch_log", {"part": 2})]
    if done == 3:
        return ToolCall("check", {"reason": f"verify {PASSWORD}"})
    bearer, key = C["Bearer token in the model's text"], C["sk- token in the model's text"]
    return f"Logged in ({MARKER}). Use Bearer {bearer} and the key {key}; {PASSWORD} works."


def printed_json(out: str) -> dict:
    """The `--json` document (GitHub annotations, printed on GitHub Actions, come first)."""
    return orjson.loads(out[out.index("\n{") + 1 :] if not out.startswith("{") else out)


def pieces(secret: str) -> list[bytes]:
    """Every `WINDOW` characters of each way `secret` is written: as it is, and JSON-escaped
    once and twice."""
    return [
        form[i : i + WINDOW].encode()
        for form in spellings([secret])
        for i in range(len(form) - WINDOW + 1)
    ]


def found_in(blob: bytes) -> list[str]:
    """The canaries of which any piece occurs in `blob`."""
    return [name for name, secret in CANARIES.items() if any(p in blob for p in pieces(secret))]


def text_cells(connection: duckdb.DuckDBPyConnection, query: str) -> bytes:
    rows = connection.execute(query).fetchall()
    return "\n".join(str(value) for row in rows for value in row).encode()


def store_cells(path: Path) -> bytes:
    with duckdb.connect(str(path), read_only=True) as conn:
        tables = [r[0] for r in conn.execute("SELECT table_name FROM duckdb_tables()").fetchall()]
        return b"\n".join(text_cells(conn, f'SELECT * FROM "{table}"') for table in tables)


def parquet_cells(path: Path) -> bytes:
    with duckdb.connect() as conn:
        return text_cells(conn, f"SELECT * FROM read_parquet('{path}')")


def html_details(path: Path) -> bytes:
    """A report page's case details, unpacked (nothing for a page without them)."""
    return (report_details(path.read_text(encoding="utf-8")) or "").encode()


def files_under(folder: Path, inputs: set[Path]) -> Iterator[Path]:
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path not in inputs:
            yield path


@pytest.fixture(params=["0", "1"], ids=["recorded_here", "recording_process"])
def planted(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> list[bytes]:
    """Every canary in place; returns the list every os.write of the test to a file is copied
    to (the journals, written and deleted while the test runs). `agentbench run` records in
    this process, then in its recording process: a pipe to that process carries a run's
    events as they are, to be redacted there, so writes to pipes are not copied (that
    process's journal is written there; its rows are those recorded here, see
    tests/test_recording_process.py, and are scanned in the store)."""
    monkeypatch.setenv("AGENTBENCH_RECORDING_PROCESS", request.param)
    monkeypatch.setenv("OPENAI_API_KEY", CANARIES["env OPENAI_API_KEY"])
    monkeypatch.setenv(
        "ACME_SERVICE_TOKEN", CANARIES["env ACME_SERVICE_TOKEN (matches no pattern)"]
    )
    monkeypatch.setenv("CANARY_API_HEADER", C["api-key header in the model settings"])
    monkeypatch.setenv("CANARY_RESULT", C["access_token in a tool result"])
    monkeypatch.setenv("CANARY_STRADDLE", C["sk- token straddling the tool-result cut"])
    monkeypatch.setenv("CANARY_ERROR", C["sk- token in a tool's error"])
    monkeypatch.setenv("GITHUB_ACTIONS", "true")  # annotations are printed too
    monkeypatch.delenv("AGENTBENCH_DB", raising=False)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # agent.py's .pyc is Python's, not ours
    written: list[bytes] = []
    real_write = os.write

    def spy(fd: int, data: bytes) -> int:
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            written.append(bytes(data))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", spy)
    return written


def test_no_canary_reaches_any_byte_written(
    tmp_path: Path,
    planted: list[bytes],
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.DEBUG, logger="agentbench")
    suite = tmp_path / "suites" / "vault"
    (suite / "cases").mkdir(parents=True)
    inputs = {suite / "agent.py", suite / "suite.yaml", suite / "cases" / "login.yaml"}
    (suite / "agent.py").write_text(AGENT)
    (suite / "suite.yaml").write_text(SUITE)
    (suite / "cases" / "login.yaml").write_text(cases())
    out = tmp_path / "out"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(out / "step-summary.md"))
    out.mkdir()
    recording, golden = out / "record.duckdb", out / "golden.duckdb"
    reports = ["--report-dir", str(out / "reports")]

    def agentbench(*args: str) -> int:
        code = main(list(args))
        console.append(capsys.readouterr())
        return code

    console: list[object] = []
    # 1. Record live: the openai SDK, HTTP, a streaming model, the recording model, cassettes.
    with OpenAICompatibleServer(responder=respond) as server:
        live = ["--live", "--record-mode", "all", "--base-url", server.base_url]
        assert agentbench("run", str(suite), *live, "--db", str(recording), *reports) == 0
    cassette = suite / "cassettes" / "login.yaml"
    assert cassette.is_file()
    # 2. The golden run replays the cassette unchanged: redaction causes no drift, no verdict.
    ci = ["--junit", str(out / "junit.xml"), "--summary-md", str(out / "summary.md")]
    assert agentbench("run", str(suite), "--json", "--db", str(golden), *reports, *ci) == 0
    first = printed_json(console[-1].out)  # type: ignore[attr-defined]
    assert all(not r["drifts"] and not r["divergences"] for r in first["results"]), first
    # 3. Replay the cassette on its own, strictly: unchanged.
    assert agentbench("replay", str(cassette), "--strict", "--db", str(golden)) == 0
    assert "verdict: unchanged" in console[-1].out  # type: ignore[attr-defined]
    # 4. A changed prompt: request drift now quotes the current requests (the old leak).
    agent = suite / "agent.py"
    agent.write_text(AGENT.replace("Answer briefly", "Answer in one line"))
    assert agentbench("run", str(suite), "--json", "--db", str(golden), *reports, *ci) == 1
    second = printed_json(console[-1].out)  # type: ignore[attr-defined]
    assert any(r["drifts"] for r in second["results"])
    # 5. Diff, report, show, export.
    assert agentbench("diff", first["eval_id"], second["eval_id"], "--db", str(golden), *reports)
    assert agentbench("report", "latest", "--db", str(golden), *reports) == 0
    run_id = second["results"][0]["run_id"]
    assert agentbench("traces", "show", run_id, "--db", str(golden)) == 0
    assert agentbench("traces", "show", run_id, "--json", "--db", str(golden)) == 0
    assert agentbench("traces", "export", str(out / "lake"), "--db", str(golden)) == 0
    dated = ["--partition-by", "date", "--db", str(recording)]
    assert agentbench("traces", "export", str(out / "lake-by-date"), *dated) == 0
    spans = out / "spans.jsonl"
    otel = ["--content", "--out", str(spans), "--db", str(golden)]
    assert agentbench("traces", "export-otel", *otel) == 0
    # 6. A stored run replayed (the changed prompt drifts, not a divergence), then promoted to
    # a case: its cassette and case come from the store; that cassette replayed.
    login_run = next(r["run_id"] for r in first["results"] if r["case_id"] == "login")
    replay = ["--suite", str(suite), "--db", str(golden)]
    assert agentbench("replay", login_run, *replay) == 0
    promote = ["--suite", str(suite), "--id", "promoted", "--db", str(golden)]
    assert agentbench("promote", login_run, *promote) == 0
    promoted = suite / "cassettes" / "promoted.yaml"
    assert agentbench("replay", str(promoted), "--db", str(golden)) == 0

    printed = "".join(c.out + c.err for c in console)  # type: ignore[attr-defined]
    scanned, files = scan(tmp_path, inputs, planted, printed, caplog.text)
    # The scans read real content: the marker is everywhere the run's data went.
    kinds = {p.suffix for p in files}
    assert {".duckdb", ".yaml", ".html", ".parquet", ".xml", ".md", ".json", ".jsonl"} <= kinds
    assert MARKER.encode() in cassette.read_bytes() and MARKER.encode() in store_cells(golden)
    # The straddling secrets were cut by the runtime, and their halves masked at the marker.
    assert "[REDACTED]\\n…[truncated".encode() in store_cells(golden)
    if os.environ["AGENTBENCH_RECORDING_PROCESS"] == "0":
        assert any(MARKER.encode() in blob for blob in planted)  # a journal held the run
    assert MARKER.encode() in promoted.read_bytes() and MARKER.encode() in spans.read_bytes()
    # A report's case details are read unpacked: the run's data is in them.
    pages = [p for p in files if p.suffix == ".html"]
    assert any(MARKER.encode() in html_details(p) for p in pages)
    leaks = {where: names for where, names in scanned.items() if names}
    print(
        f"canaries: {len(CANARIES)} planted, {len(files)} files scanned "
        f"({len(scanned)} sources with cells, journals, console and log), "
        f"{sum(len(v) for v in leaks.values())} found; the password "
        f"{sum(count_of(PASSWORD, p) for p in files)} times in the files"
    )
    assert not leaks


def scan(
    folder: Path, inputs: set[Path], planted: list[bytes], printed: str, log: str
) -> tuple[dict[str, list[str]], list[Path]]:
    """Which canaries each source holds (pieces of them too): every file under `folder` but
    the test's own `inputs` (DuckDB stores and Parquet files cell by cell as well), what
    `planted` saw written, the console and the log; and the files scanned."""
    scanned: dict[str, list[str]] = {}
    files = list(files_under(folder, inputs))
    for path in files:
        scanned[str(path)] = found_in(path.read_bytes())
        if path.suffix == ".duckdb":
            scanned[f"{path} (cells)"] = found_in(store_cells(path))
        elif path.suffix == ".parquet":
            scanned[f"{path} (cells)"] = found_in(parquet_cells(path))
        elif path.suffix == ".html":  # a report's case details travel deflated: unpacked
            scanned[f"{path} (details)"] = found_in(html_details(path))
    scanned["journals and every other os.write"] = found_in(b"".join(planted))
    scanned["console"] = found_in(printed.encode())
    scanned["log"] = found_in(log.encode())
    return scanned, files


def count_of(secret: str, path: Path) -> int:
    """How often `secret` is in the file's bytes (and in a store's cells), in any spelling."""
    blob = path.read_bytes()
    if path.suffix == ".duckdb":
        blob += store_cells(path)
    elif path.suffix == ".html":
        blob += html_details(path)
    return sum(blob.count(form.encode()) for form in spellings([secret]))
