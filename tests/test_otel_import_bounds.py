"""`agentbench traces import-otel` is bounded and total: whatever a file holds, the import ends
— stored, or refused in one line naming the file, where in it and what is wrong, exit 2 — with
nothing half-imported, in time and memory bounded by the file's size.

Issue 34, finding 4: a one-span file whose `invoke_agent` span was its own parent looped
forever; a 277 MB file ran past 180 s at 1.6 GB (a plain program's calls, each a trace of
its own, were joined by comparing every call with every earlier one); deep nesting and
integers beyond 64 bits ended in "unexpected … this is a bug"; a protobuf file was called
"not UTF-8"; duplicate span ids and parent cycles were taken as they came.
"""

from __future__ import annotations

import builtins
import gzip
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentbench.cli import main
from agentbench.otel import grouping
from agentbench.otel.grouping import group
from agentbench.otel.importer import import_files
from agentbench.otel.otlp_json import OtlpFileError, spans_of
from agentbench.otel.span_tree import checked
from agentbench.trace import RedactionRules, TraceStore, repairs

TRACE = "0af7651916cd43dd8448eb211c80319c"
AGENT, CHAT, TOOL, OTHER = "a" * 16, "b" * 16, "c" * 16, "d" * 16
HELLO = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "Hi"}]}])
ANSWER = json.dumps(
    [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "Hello"}],
            "finish_reason": "stop",
        }
    ]
)


def attribute(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value}}


def span(
    span_id: str,
    parent: str | None = None,
    operation: str = "chat",
    trace: str = TRACE,
    **attributes: Any,
) -> dict[str, Any]:
    found = {"gen_ai.operation.name": operation}
    if operation == "chat":
        found |= {
            "gen_ai.request.model": "gpt-4",
            "gen_ai.input.messages": HELLO,
            "gen_ai.output.messages": ANSWER,
        }
    found |= {key.replace("__", "."): value for key, value in attributes.items()}
    body = {
        "traceId": trace,
        "spanId": span_id,
        "name": operation,
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": "1700000000500000000",
        "attributes": [attribute(k, v) for k, v in found.items()],
    }
    if parent:
        body["parentSpanId"] = parent
    return body


def request(*spans: dict[str, Any]) -> dict[str, Any]:
    scope = {"scope": {"name": "probe"}, "spans": list(spans)}
    return {"resourceSpans": [{"resource": {}, "scopeSpans": [scope]}]}


def lines(*requests: dict[str, Any]) -> str:
    return "".join(json.dumps(r) + "\n" for r in requests)


def agent_run(trace: str = TRACE, **root: Any) -> dict[str, Any]:
    return request(span(AGENT, None, "invoke_agent", trace, **root), span(CHAT, AGENT, trace=trace))


def import_otel(
    capsys: pytest.CaptureFixture[str], file: Path, db: Path, *options: str
) -> tuple[int, str, str]:
    code = main(["traces", "import-otel", str(file), "--db", str(db), *options])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def stored_runs(db: Path) -> list[tuple[str, str]]:
    with TraceStore(db) as store:
        return sorted((run.run_id, run.status) for run in store.runs())


@pytest.fixture
def db(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A store holding one imported run already: a refused import must leave it as it is."""
    made = tmp_path / "t.duckdb"
    good = tmp_path / "good.jsonl"
    good.write_text(lines(agent_run("1" * 32)))
    assert import_otel(capsys, good, made)[0] == 0
    return made


# -- the corpus: (file content, what the one line says) --------------------------------------
def _deep_value(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {"stringValue": "x"}
    for _ in range(levels):
        value = {"arrayValue": {"values": [value]}}
    return value


def _with_raw_attribute(value: Any) -> str:
    body = span(CHAT)
    body["attributes"].append({"key": "deep", "value": value})
    return lines(request(body))


def _replaced(document: dict[str, Any], old: str, new: str) -> str:
    text = lines(document)
    assert old in text
    return text.replace(old, new, 1)


CORPUS: dict[str, tuple[Callable[[], str | bytes], str]] = {
    "an invoke_agent span that is its own parent": (
        lambda: lines(request(span(AGENT, AGENT, "invoke_agent"))),
        f":1 span 'invoke_agent' ({AGENT}): span {AGENT} is its own parent",
    ),
    "two agent spans each the other's parent": (
        lambda: lines(
            request(span(AGENT, CHAT, "invoke_agent"), span(CHAT, AGENT, "invoke_agent"))
        ),
        f"the parents of spans {AGENT} → {CHAT} → {AGENT}",
    ),
    "a cycle of three spans that are not agent spans, with a call below": (
        lambda: lines(
            request(
                span(AGENT, OTHER, "x"),
                span(TOOL, AGENT, "y"),
                span(OTHER, TOOL, "z"),
                span(CHAT, AGENT),
            )
        ),
        f"the parents of spans {AGENT} → {OTHER} → {TOOL} → {AGENT}",
    ),
    "two different spans under one id": (
        lambda: lines(request(span(AGENT, None, "invoke_agent"), span(AGENT))),
        f"span id {AGENT} of trace {TRACE} is also the id of another span",
    ),
    "a span without an id": (
        lambda: _replaced(request(span(CHAT)), f'"spanId": "{CHAT}", ', ""),
        ":1 span 'chat': no spanId",
    ),
    "JSON nested 100,000 levels deep": (
        lambda: '{"resourceSpans": ' + "[" * 100_000 + "]" * 100_000 + "}\n",
        ":1: nested deeper than 100 levels",
    ),
    "an attribute value nested 300 levels deep": (
        lambda: _with_raw_attribute(_deep_value(300)),
        "attribute deep[0][0][0]: nested deeper than 100 levels of values",
    ),
    "message content nested 5,000 levels deep": (
        lambda: lines(request(span(CHAT, **{"gen_ai__input__messages": "[" * 5000 + "]" * 5000}))),
        "attribute gen_ai.input.messages: nested deeper than 100 levels",
    ),
    "an intValue beyond 64 bits": (
        lambda: lines(request(span(CHAT, gen_ai__usage__input_tokens=2**70))),
        "attribute gen_ai.usage.input_tokens: intValue '1180591620717411303424' is not a 64-bit",
    ),
    "an integer beyond 64 bits as a JSON number": (
        lambda: _replaced(request(span(CHAT)), '"1700000000000000000"', str(2**80)),
        "startTimeUnixNano 1.2089258196146292e+24 is not nanoseconds since 1970 (64 bits)",
    ),
    "an integer of 5,000 digits in the message content": (
        lambda: lines(request(span(CHAT, gen_ai__output__messages="[" + "9" * 5000 + "]"))),
        "attribute gen_ai.output.messages: the integer 999999999999…999999 (5000 digits)",
    ),
    "a time beyond 64 bits": (
        lambda: _replaced(request(span(CHAT)), '"1700000000500000000"', f'"{2**64}"'),
        "endTimeUnixNano '18446744073709551616' is not nanoseconds since 1970",
    ),
    "UTF-16 with a byte-order mark": (
        lambda: lines(request(span(CHAT))).encode("utf-16"),
        "not UTF-8 text: it is UTF-16 (convert it: iconv -f UTF-16 -t UTF-8)",
    ),
    "UTF-16 without one": (
        lambda: lines(request(span(CHAT))).encode("utf-16-le"),
        "not UTF-8 text: it is UTF-16",
    ),
    "Latin-1 bytes on the third line": (
        lambda: (
            (lines(request(span(CHAT))) + "\n").encode()
            + lines(request(span(OTHER, gen_ai__agent__name="cafe")))
            .replace("cafe", "caf\xe9")
            .encode("latin-1")
        ),
        ":3: not UTF-8 text: byte 0xE9 at line 3, column",
    ),
    "a gzip-compressed file": (
        lambda: gzip.compress(lines(request(span(CHAT))).encode()),
        "gzip-compressed; decompress it first",
    ),
    "bytes that are neither JSON nor protobuf": (
        lambda: bytes(range(256)) * 4,
        ":1: not OTLP/JSON (it starts with '\\x00', not '{') nor OTLP protobuf",
    ),
    "spans as a string": (
        lambda: '{"resourceSpans": [{"scopeSpans": [{"spans": "many"}]}]}\n',
        ":1: spans: expected a list, got str",
    ),
    "attributes as a number": (
        lambda: _replaced(request(span(CHAT)), '"attributes": [', '"attributes": 3, "x": ['),
        "expected a list of attributes, got int",
    ),
    "a span name that is a list": (
        lambda: _replaced(request(span(CHAT)), '"name": "chat"', '"name": ["chat"]'),
        ":1: name: expected a string, got list",
    ),
    "a status code that is an object": (
        lambda: _replaced(
            request(span(CHAT)), '"attributes": [', '"status": {"code": {}}, "attributes": ['
        ),
        "status.code {} is not 0, 1 or 2",
    ),
    "a doubleValue that is a word": (
        lambda: _with_raw_attribute({"doubleValue": "lots"}),
        "doubleValue 'lots' is not a number",
    ),
    "a token count that is a word": (
        lambda: lines(request(span(CHAT, gen_ai__usage__input_tokens="many"))),
        "its message content cannot be read (invalid literal for int() with base 10: 'many')",
    ),
    "a message list that is an object": (
        lambda: lines(request(span(CHAT, gen_ai__input__messages='{"role": "user"}'))),
        "attribute gen_ai.input.messages: expected a list",
    ),
    "a stop reason no run has": (
        lambda: lines(agent_run(agentbench__stop_reason="bogus")),
        "'bogus' is not a valid StopReason",
    ),
}


@pytest.mark.parametrize("case", list(CORPUS), ids=list(CORPUS))
def test_a_malformed_file_is_refused_in_one_line_and_the_store_is_unchanged(
    case: str, db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make, fragment = CORPUS[case]
    content = make()
    bad = tmp_path / "bad.jsonl"
    if isinstance(content, bytes):
        bad.write_bytes(content)
    else:
        bad.write_text(content)
    before = stored_runs(db)
    code, out, err = import_otel(capsys, bad, db)
    assert code == 2, out + err
    [line] = err.strip().splitlines()
    assert line.startswith(f"error: {bad}"), line
    assert fragment in line, line
    assert "Traceback" not in err and "bug" not in err
    assert stored_runs(db) == before


def test_a_file_wrong_in_its_last_run_stores_none_of_its_runs(db: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(lines(agent_run("2" * 32), agent_run("3" * 32, agentbench__stop_reason="nope")))
    before = stored_runs(db)
    # A process of its own: a run it journaled is stored when it exits, whatever it said.
    done = subprocess.run(
        [sys.executable, "-m", "agentbench", "traces", "import-otel", str(bad), "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and ":2 span 'invoke_agent'" in done.stderr, done.stderr
    assert stored_runs(db) == before  # the first run is not stored without the second


def test_a_file_over_the_limit_is_refused_before_it_is_read(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    big = tmp_path / "big.jsonl"
    with open(big, "wb") as stream:  # 277 MB, sparse: it takes no room on the disk
        stream.truncate(277 * 2**20)
    real_open = builtins.open

    def never_big(file: Any, *args: Any, **kwargs: Any) -> Any:
        assert not (isinstance(file, str | os.PathLike) and Path(file) == big), "it was read"
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", never_big)
    before = stored_runs(db)
    code, _, err = import_otel(capsys, big, db)
    assert code == 2
    assert (
        f"{big}: 290,455,552 bytes, over the import's limit of 104,857,600 bytes (100 MB): "
        "raise it with --max-mb (or AGENTBENCH_OTEL_MAX_MB)" in err
    )
    monkeypatch.setenv("AGENTBENCH_OTEL_MAX_MB", "0.001")  # 1 KB, for all files together
    small = tmp_path / "small"
    small.mkdir()
    for number in (1, 2):
        (small / f"part{number}.jsonl").write_text(lines(agent_run(f"{number + 5}" * 32)))
    code, _, err = import_otel(capsys, small, db)
    assert code == 2 and f"{small}: 2 files of" in err and "limit of 1,048 bytes" in err
    assert stored_runs(db) == before
    code, _, _ = import_otel(capsys, small, db, "--max-mb", "1")
    assert code == 0 and len(stored_runs(db)) == len(before) + 2


def test_a_named_pipe_is_refused_not_waited_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pipe = tmp_path / "spans.jsonl"
    os.mkfifo(pipe)  # reading it would wait for a writer forever
    code, _, err = import_otel(capsys, pipe, tmp_path / "t.duckdb")
    assert code == 2 and "not a regular file (a named pipe)" in err


def _protobuf(document: dict[str, Any]) -> bytes:
    import base64

    from google.protobuf.json_format import ParseDict
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    def base64_ids(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                k: base64.b64encode(bytes.fromhex(v)).decode()
                if k in ("traceId", "spanId", "parentSpanId")
                else base64_ids(v)
                for k, v in node.items()
            }
        return [base64_ids(v) for v in node] if isinstance(node, list) else node

    return ParseDict(base64_ids(document), ExportTraceServiceRequest()).SerializeToString()


@pytest.mark.parametrize("framing", ["one message", "length-prefixed, twice"])
def test_otlp_protobuf_is_read_as_the_same_runs_as_its_json(
    framing: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = agent_run()
    as_json = tmp_path / "spans.jsonl"
    as_json.write_text(lines(document))
    message = _protobuf(document)
    as_protobuf = tmp_path / "spans.pb"
    if framing == "one message":  # an OTLP/HTTP body
        as_protobuf.write_bytes(message)
    else:  # the collector's file exporter, format: proto (a retried batch written twice)
        framed = len(message).to_bytes(4, "big") + message
        as_protobuf.write_bytes(framed * 2)
    code, out, err = import_otel(capsys, as_json, tmp_path / "json.duckdb")
    assert code == 0, err
    code, out_pb, err = import_otel(capsys, as_protobuf, tmp_path / "pb.duckdb")
    assert code == 0, err
    assert "2 span(s) read" in out_pb
    assert out_pb.splitlines()[0] == out.splitlines()[0]  # the same run, the same summary


def test_half_an_emoji_in_a_span_is_stored_repaired_and_flagged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cut = ANSWER.replace("Hello", "Hello \\ud83d")  # the JSON escape Python's json writes
    file = tmp_path / "spans.jsonl"
    file.write_text(lines(request(span(CHAT, gen_ai__output__messages=cut))))
    code, _, err = import_otel(capsys, file, tmp_path / "t.duckdb")
    assert code == 0, err
    with TraceStore(tmp_path / "t.duckdb") as store:
        [run] = store.runs()
        trace = store.run(run.run_id)
    assert json.loads(trace.run.output) == "Hello \ufffd"
    assert any(e.kind == repairs.KIND for e in trace.events)


def test_joining_a_plain_program_s_calls_looks_at_each_call_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A program that opened no span of its own leaves each call in a trace of its own; the
    calls of one conversation are joined by their messages. 300 conversations of 3 calls
    each: finding what each call continues must not compare it with every earlier one."""
    documents = []
    for conversation in range(300):
        messages: list[dict[str, Any]] = [
            {"role": "user", "parts": [{"type": "text", "content": f"question {conversation}"}]}
        ]
        for call in range(3):
            answer = {
                "role": "assistant",
                "parts": [{"type": "text", "content": f"answer {conversation}.{call}"}],
            }
            trace = f"{conversation:016x}{call:016x}"
            documents.append(
                request(
                    span(
                        CHAT,
                        trace=trace,
                        gen_ai__input__messages=json.dumps(messages),
                        gen_ai__output__messages=json.dumps([answer]),
                    )
                )
            )
            messages = [
                *messages,
                answer,
                {"role": "user", "parts": [{"type": "text", "content": f"more {call}"}]},
            ]
    looked = 0
    real = grouping._conversation_after

    def counted(run: Any) -> Any:
        nonlocal looked
        looked += 1
        return real(run)

    monkeypatch.setattr(grouping, "_conversation_after", counted)
    spans = [s for d in documents for s in _spans_of(d)]
    runs, _ = group(checked(spans), [])
    assert len(runs) == 300 and all(len(run.calls) == 3 for run in runs)
    assert looked <= 2 * 900  # each run's tail once when it opens, once when it moves on


def _spans_of(document: dict[str, Any]) -> list[Any]:
    return list(spans_of(document, "mem:1", "mem"))


# -- anything else: a stored run or an OtlpFileError, never another exception --------------------
_JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


def _paths(node: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [at]
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*at, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _paths(value, (*at, index))
    return found


def _replace_at(node: Any, at: tuple[Any, ...], value: Any) -> Any:
    if not at:
        return value
    copy = dict(node) if isinstance(node, dict) else list(node)
    copy[at[0]] = _replace_at(node[at[0]], at[1:], value)
    return copy


class _ListStore:
    """What an import needs of a store, keeping what it is given: the fuzz test runs the
    whole import, recording included, without a DuckDB file per example."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / "never-made.duckdb"
        self.redaction = RedactionRules()
        self.rows: list[Any] = []

    def run_started(self, row: dict[str, Any]) -> None:
        self.rows.append(row)

    def run_finished(self, rows: Any) -> None:
        self.rows.append(rows)

    def flush(self) -> None:
        pass


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_any_value_anywhere_is_read_or_refused_by_name(tmp_path: Path, data: st.DataObject) -> None:
    document = request(
        span(AGENT, None, "invoke_agent", gen_ai__agent__name="helper"),
        span(CHAT, AGENT, gen_ai__usage__input_tokens=3),
        span(
            TOOL,
            AGENT,
            "execute_tool",
            gen_ai__tool__name="lookup",
            gen_ai__tool__call__arguments='{"q": 1}',
            gen_ai__tool__call__result='{"a": [1, 2]}',
        ),
    )
    at = data.draw(st.sampled_from(_paths(document)))
    value = data.draw(_JSON_VALUES | _JSON_VALUES.map(json.dumps))  # or JSON in a string
    mutated = _replace_at(document, at, value)
    file = tmp_path / "fuzz.jsonl"
    file.write_text(json.dumps(mutated) + "\n")
    store = _ListStore(tmp_path)
    try:
        import_files(store, [file])  # type: ignore[arg-type]
    except OtlpFileError as exc:
        assert str(exc).startswith(str(file)), exc
        assert store.rows == []  # nothing half-imported


def test_half_an_emoji_in_an_agent_s_name_is_printed_as_stored(tmp_path: Path) -> None:
    """The summary line names each run's agent: printed raw, half an emoji made the command
    fail after storing (exit 3, 'this is a bug'); it is printed as stored, U+FFFD in its place."""
    file = tmp_path / "spans.jsonl"
    file.write_text(lines(agent_run(gen_ai__agent__name="AGENT")).replace("AGENT", "bot \\ud83d"))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentbench",
            "traces",
            "import-otel",
            str(file),
            "--db",
            str(tmp_path / "t.duckdb"),
        ],
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "  bot \ufffd  1 model call(s)" in done.stdout.decode()
