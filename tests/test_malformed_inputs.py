"""A corpus of malformed inputs, each run through the real CLI (`agentbench.cli.main`).

Every entry plants one bad file — a suite or case file, a cassette, a damaged Parquet export —
beside good ones and asserts what issue 12 promises: the documented exit code (2 for a suite or
case file, 3 for a cassette or an import), a message naming the file (and the line, where there
is one), no traceback, and nothing else lost: the other suite and the victim's other cases still
run, and a refused import leaves the store as it was. The bounds themselves (file size, nesting
depth, alias expansion) live in `agentbench.yaml_source`.
"""

from __future__ import annotations

import builtins
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pytest
import yaml

from agentbench import yaml_source
from agentbench.cli import main
from agentbench.replay.cassette import Cassette
from agentbench.trace.schema import TABLES
from agentbench.yaml_source import MAX_ALIAS_VALUES, YamlSyntaxError, load_yaml

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

ROOT = Path(__file__).resolve().parent.parent
CHOSEN = ("status-prod-eu", "status-staging-quiet")  # two cases of each suite run
VICTIM_CASSETTE = Path("replays/victim/status-prod-eu.yaml")
SMALL_LIMIT_MB = "0.05"  # 52 KB: every shipped sre file is under 15 KB


# -- the checkout: two copies of the sre suite, one of them the victim ---------------------
@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("template") / "repo"
    skip = shutil.ignore_patterns("__pycache__")
    for name in ("sre", "victim"):
        shutil.copytree(ROOT / "golden" / "sre", folder / "golden" / name, ignore=skip)
        shutil.copytree(ROOT / "replays" / "sre", folder / "replays" / name)
    suite = folder / "golden" / "victim" / "suite.yaml"
    suite.write_text(suite.read_text().replace("name: sre", "name: victim"))
    for name in ("__init__.py", "_reference.py"):
        shutil.copy(ROOT / "golden" / name, folder / "golden" / name)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=folder, check=True)
    (folder / ".gitignore").write_text(".agentbench/\nreports/\n__pycache__/\n")
    subprocess.run([*git, "add", "-A"], cwd=folder, check=True)
    subprocess.run([*git, "commit", "-qm", "suites"], cwd=folder, check=True)
    return folder


@pytest.fixture
def repo(template: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "repo"
    shutil.copytree(template, folder, symlinks=True)
    return folder


def run_suites(repo: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any], str]:
    args = ["run", str(repo / "golden"), "--no-report", "--json"]
    for case in CHOSEN:
        args += ["--filter", case]
    code = main(args)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    return code, orjson.loads(captured.out), captured.err


def at(file: Path, line: int | None) -> str:
    return f"{file}:{line}:" if line is not None else f"{file}:"


def line_of(file: Path, text: str) -> int:
    return file.read_text().splitlines().index(text) + 1


def billion_laughs(levels: int = 7) -> str:
    """The classic: each level a list of nine aliases of the one before (~400 bytes)."""
    lines = ["a0: &a0 [" + ",".join(['"lol"'] * 9) + "]"]
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def deny_reading(monkeypatch: pytest.MonkeyPatch, denied: Path) -> None:
    """Permission denied for one file: tests run as root, where chmod 000 denies nothing."""
    real_open = builtins.open

    def guarded(file: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(file, str | os.PathLike) and Path(file) == denied:
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", guarded)


# -- suites and cases: exit 2, the other suite runs ----------------------------------------
@dataclass(frozen=True)
class Planted:
    file: Path
    line: int | None  # None: the problem is the whole file; -1: some line, not fixed here
    fragment: str


Plant = Callable[[Path, pytest.MonkeyPatch], Planted]


def _case_file(repo: Path, name: str, content: str | bytes) -> Path:
    file = repo / "golden" / "victim" / "cases" / name
    if isinstance(content, bytes):
        file.write_bytes(content)
    else:
        file.write_text(content)
    return file


def alias_bomb_in_a_case_file(repo: Path, mp: pytest.MonkeyPatch) -> Planted:
    file = _case_file(repo, "bomb.yaml", billion_laughs())
    # a1..a3 expand to 8,289 values; the first alias of a4 (line 5) passes 10,000
    return Planted(file, 5, "refused before expanding them")


def alias_bomb_in_suite_yaml(repo: Path, mp: pytest.MonkeyPatch) -> Planted:
    file = repo / "golden" / "victim" / "suite.yaml"
    before = len(file.read_text().splitlines())
    file.write_text(file.read_text() + billion_laughs())
    return Planted(file, before + 5, "an alias bomb?")


def deep_flow_nesting_in_yaml(repo: Path, mp: pytest.MonkeyPatch) -> Planted:
    file = _case_file(repo, "deep.yaml", "- id: deep\n  input: " + "[" * 50_000 + "]" * 50_000)
    return Planted(file, 2, "nested deeper than 100 levels")


def deep_block_nesting_in_yaml(repo: Path, mp: pytest.MonkeyPatch) -> Planted:
    nested = "".join("  " * level + "k:\n" for level in range(2, 300))
    file = _case_file(repo, "deep.yaml", "- id: deep\n  input: hi\n  context:\n" + nested)
    return Planted(file, -1, "nested deeper than 100 levels")


def deep_nesting_in_jsonl(repo: Path, mp: pytest.MonkeyPatch) -> Planted:
    row = '{"id": "deep", "input": ' + "[" * 50_000 + "]" * 50_000 + "}"
    file = _case_file(repo, "deep.jsonl", '{"id": "fine", "input": "hi"}\n' + row + "\n")
    return Planted(file, 2, "nested deeper than 100 levels")


def oversized_case_file(repo: Path, mp: pytest.MonkeyPatch) -> Planted:
    mp.setenv("AGENTBENCH_MAX_FILE_MB", SMALL_LIMIT_MB)
    file = _case_file(repo, "big.yaml", "# padding\n" * 6_000 + "- id: big\n  input: hi\n")
    return Planted(file, None, "over the limit of 52,428 bytes")


def not_utf8_yaml(repo: Path, mp: pytest.MonkeyPatch) -> Planted:
    file = _case_file(repo, "latin1.yaml", "- id: cafe\n  input: caf\xe9\n".encode("latin-1"))
    return Planted(file, 2, "not UTF-8 text")


def not_utf8_jsonl(repo: Path, mp: pytest.MonkeyPatch) -> Planted:
    rows = '{"id": "a", "input": "hi"}\n{"id": "b", "input": "caf\xe9"}\n'
    return Planted(_case_file(repo, "latin1.jsonl", rows.encode("latin-1")), 2, "not UTF-8")


def not_utf8_suite_yaml(repo: Path, mp: pytest.MonkeyPatch) -> Planted:
    file = repo / "golden" / "victim" / "suite.yaml"
    line = len(file.read_text().splitlines()) + 1
    file.write_bytes(file.read_bytes() + "tags: [caf\xe9]\n".encode("latin-1"))
    return Planted(file, line, "not UTF-8 text")


def utf16_yaml(repo: Path, mp: pytest.MonkeyPatch) -> Planted:
    file = _case_file(repo, "utf16.yaml", "- id: wide\n  input: hi\n".encode("utf-16"))
    return Planted(file, 1, "not UTF-8 text: it is UTF-16 (convert it: iconv -f UTF-16")


def utf16_jsonl_without_a_byte_order_mark(repo: Path, mp: pytest.MonkeyPatch) -> Planted:
    rows = '{"id": "wide", "input": "hi"}\n'.encode("utf-16-le")  # UTF-8 decoding takes it
    return Planted(_case_file(repo, "utf16.jsonl", rows), 1, "not UTF-8 text: it is UTF-16")


def case_file_linked_to_itself(repo: Path, mp: pytest.MonkeyPatch) -> Planted:
    file = repo / "golden" / "victim" / "cases" / "loop.yaml"
    file.symlink_to("loop.yaml")
    return Planted(file, None, "a loop of symbolic links")


def case_files_linked_to_each_other(repo: Path, mp: pytest.MonkeyPatch) -> Planted:
    cases = repo / "golden" / "victim" / "cases"
    (cases / "ping.yaml").symlink_to("pong.yaml")
    (cases / "pong.yaml").symlink_to("ping.yaml")
    return Planted(cases / "ping.yaml", None, "a loop of symbolic links")


def case_file_linked_to_nothing(repo: Path, mp: pytest.MonkeyPatch) -> Planted:
    file = repo / "golden" / "victim" / "cases" / "gone.yaml"
    file.symlink_to("moved-away.yaml")
    return Planted(file, None, "a symbolic link to moved-away.yaml, which does not exist")


def suite_yaml_linked_to_itself(repo: Path, mp: pytest.MonkeyPatch) -> Planted:
    file = repo / "golden" / "victim" / "suite.yaml"
    file.unlink()
    file.symlink_to("suite.yaml")
    return Planted(file, None, "a loop of symbolic links")


def unreadable_case_file(repo: Path, mp: pytest.MonkeyPatch) -> Planted:
    file = repo / "golden" / "victim" / "cases" / "status.yaml"
    deny_reading(mp, file)
    return Planted(file, None, "cannot read the file: Permission denied")


def unreadable_suite_yaml(repo: Path, mp: pytest.MonkeyPatch) -> Planted:
    file = repo / "golden" / "victim" / "suite.yaml"
    deny_reading(mp, file)
    return Planted(file, None, "cannot read the file: Permission denied")


def case_file_that_is_a_named_pipe(repo: Path, mp: pytest.MonkeyPatch) -> Planted:
    file = repo / "golden" / "victim" / "cases" / "pipe.yaml"
    os.mkfifo(file)  # reading it would wait for a writer forever
    return Planted(file, None, "not a regular file (a named pipe)")


def huge_integer_in_yaml(repo: Path, mp: pytest.MonkeyPatch) -> Planted:
    file = _case_file(repo, "huge.yaml", "- id: huge\n  input: hi\n  trials: " + "9" * 5_000)
    return Planted(file, 3, "the int '9999")


def huge_integer_in_jsonl(repo: Path, mp: pytest.MonkeyPatch) -> Planted:
    file = _case_file(repo, "huge.jsonl", '{"id": "huge", "trials": ' + "9" * 5_000 + "}\n")
    return Planted(file, 1, "not valid JSON: Exceeds the limit")


def impossible_date_in_yaml(repo: Path, mp: pytest.MonkeyPatch) -> Planted:
    file = _case_file(repo, "date.yaml", "- id: dated\n  input: hi\n  description: 2024-13-45\n")
    return Planted(file, 3, "the timestamp '2024-13-45' cannot be read: month must be in 1..12")


def control_character_in_yaml(repo: Path, mp: pytest.MonkeyPatch) -> Planted:
    file = _case_file(repo, "nul.yaml", "- id: nul\n  input: a\x00b\n")
    return Planted(file, 2, "unacceptable character #x0000")


def recursive_alias_in_yaml(repo: Path, mp: pytest.MonkeyPatch) -> Planted:
    file = _case_file(repo, "self.yaml", "- id: self\n  input: hi\n  context: &me {me: *me}\n")
    return Planted(file, 3, "a recursive alias refers to itself")


SUITE_CORPUS = [
    alias_bomb_in_a_case_file,
    alias_bomb_in_suite_yaml,
    deep_flow_nesting_in_yaml,
    deep_block_nesting_in_yaml,
    deep_nesting_in_jsonl,
    oversized_case_file,
    not_utf8_yaml,
    not_utf8_jsonl,
    not_utf8_suite_yaml,
    utf16_yaml,
    utf16_jsonl_without_a_byte_order_mark,
    case_file_linked_to_itself,
    case_files_linked_to_each_other,
    case_file_linked_to_nothing,
    suite_yaml_linked_to_itself,
    unreadable_case_file,
    unreadable_suite_yaml,
    case_file_that_is_a_named_pipe,
    huge_integer_in_yaml,
    huge_integer_in_jsonl,
    impossible_date_in_yaml,
    control_character_in_yaml,
    recursive_alias_in_yaml,
]


@pytest.mark.parametrize("plant", SUITE_CORPUS, ids=lambda plant: plant.__name__)
def test_a_malformed_suite_file_is_its_suites_error(
    plant: Plant, repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    planted = plant(repo, monkeypatch)
    code, output, err = run_suites(repo, capsys)
    assert code == 2
    [error] = output["suite_errors"]
    assert error.startswith(f"suite {repo / 'golden' / 'victim'}:")
    [problem] = [line for line in error.splitlines() if str(planted.file) in line]
    if planted.line == -1:
        assert problem.strip().startswith(f"{planted.file}:") and problem.split(":")[1].isdigit()
    else:
        assert problem.strip().startswith(at(planted.file, planted.line))
    assert planted.fragment in problem
    assert problem in err  # also said on stderr, where a person reads it
    # nothing else lost: the other suite ran, every chosen case of it
    assert sorted((r["suite"], r["case_id"], r["status"]) for r in output["results"]) == [
        ("sre", case, "passed") for case in CHOSEN
    ]


def test_an_alias_bomb_is_refused_before_anything_is_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_composing(*args: object) -> None:
        raise AssertionError("the bomb reached PyYAML's composer")

    monkeypatch.setattr(yaml.SafeLoader, "get_single_node", no_composing)
    with pytest.raises(YamlSyntaxError, match=f"more than {MAX_ALIAS_VALUES:,} values"):
        load_yaml(billion_laughs(levels=30))  # 9**30 values, were it expanded


def test_shared_blocks_within_the_budget_still_load() -> None:
    text = (
        "defaults: &defaults {stop_reason: completed, max_steps: 5}\n"
        + "".join(f"case{i}: {{<<: *defaults, id: c{i}}}\n" for i in range(200))
        + "deep: "
        + "[" * (yaml_source.MAX_DEPTH - 1)  # the document's mapping is a level too
        + "]" * (yaml_source.MAX_DEPTH - 1)
        + "\n"
    )
    data = load_yaml(text).data
    assert data["case199"] == {"stop_reason": "completed", "max_steps": 5, "id": "c199"}


def test_a_byte_order_mark_is_not_an_error(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _case_file(repo, "bom.jsonl", '\ufeff{"id": "status-prod-eu-bom", "input": "hi"}\n')
    code, output, _ = run_suites(repo, capsys)
    assert code == 0 and output["suite_errors"] == []


def test_a_wrong_size_limit_is_a_usage_error(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("AGENTBENCH_MAX_FILE_MB", "lots")
    assert main(["run", str(repo / "golden"), "--no-report"]) == 2
    assert "AGENTBENCH_MAX_FILE_MB='lots': expected a positive number of megabytes" in (
        capsys.readouterr().err
    )


# -- cassettes: exit 3, the case errors, every other case runs -----------------------------
def _replace_line(file: Path, old: str, new: str) -> int:
    lines = file.read_text().splitlines(keepends=True)
    index = [line.rstrip("\n") for line in lines].index(old)
    lines[index] = new + "\n"
    file.write_text("".join(lines))
    return index + 1


def _as_json_cassette(repo: Path) -> Path:
    """The victim case's cassette as vcrpy JSON, which the case is pointed at."""
    source = repo / VICTIM_CASSETTE
    target = source.with_suffix(".json")
    Cassette.load(source).save(target)
    source.unlink()
    cases = repo / "golden" / "victim" / "cases" / "status.yaml"
    cases.write_text(
        cases.read_text().replace(
            "- id: status-prod-eu\n", "- id: status-prod-eu\n  cassette: status-prod-eu.json\n"
        )
    )
    return target


def unknown_vcr_format_version(repo: Path, mp: pytest.MonkeyPatch) -> Planted:
    file = repo / VICTIM_CASSETTE
    line = _replace_line(file, "version: 1", "version: 2")
    return Planted(
        file, line, "cassette format version 2 is not one this agentbench reads (known: 1"
    )


def vcr_format_version_not_a_number(repo: Path, mp: pytest.MonkeyPatch) -> Planted:
    file = repo / VICTIM_CASSETTE
    line = _replace_line(file, "version: 1", "version: one")
    return Planted(file, line, "cassette format version 'one' is not one")


def newer_agentbench_cassette_format(repo: Path, mp: pytest.MonkeyPatch) -> Planted:
    file = repo / VICTIM_CASSETTE
    _replace_line(file, "    format: 1", "    format: 99")
    return Planted(file, None, "cassette format 99 is newer than this agentbench understands")


def agentbench_cassette_format_not_a_number(repo: Path, mp: pytest.MonkeyPatch) -> Planted:
    file = repo / VICTIM_CASSETTE
    _replace_line(file, "    format: 1", "    format: first")
    return Planted(file, None, "metadata.agentbench.format 'first' is not a cassette format")


def alias_bomb_in_a_cassette(repo: Path, mp: pytest.MonkeyPatch) -> Planted:
    file = repo / VICTIM_CASSETTE
    before = len(file.read_text().splitlines())
    file.write_text(file.read_text() + billion_laughs())
    return Planted(file, before + 5, "refused before expanding them")


def deep_nesting_in_a_cassette(repo: Path, mp: pytest.MonkeyPatch) -> Planted:
    file = repo / VICTIM_CASSETTE
    before = len(file.read_text().splitlines())
    file.write_text(file.read_text() + "deep: " + "[" * 50_000 + "]" * 50_000 + "\n")
    return Planted(file, before + 1, "nested deeper than 100 levels")


def deep_nesting_in_a_json_cassette(repo: Path, mp: pytest.MonkeyPatch) -> Planted:
    file = _as_json_cassette(repo)
    text = file.read_text()
    file.write_text(text[:-2] + ', "deep": ' + "[" * 50_000 + "]" * 50_000 + "}\n")
    return Planted(file, text.count("\n"), "nested deeper than 100 levels")


def broken_json_cassette(repo: Path, mp: pytest.MonkeyPatch) -> Planted:
    file = _as_json_cassette(repo)
    lines = file.read_text().splitlines()
    file.write_text("\n".join(lines[: len(lines) // 2]))
    return Planted(file, -1, "the file is not valid JSON")


def oversized_cassette(repo: Path, mp: pytest.MonkeyPatch) -> Planted:
    mp.setenv("AGENTBENCH_MAX_FILE_MB", SMALL_LIMIT_MB)
    file = repo / VICTIM_CASSETTE
    file.write_text(file.read_text() + "# padding\n" * 6_000)
    return Planted(file, None, "over the limit of 52,428 bytes")


def not_utf8_cassette(repo: Path, mp: pytest.MonkeyPatch) -> Planted:
    file = repo / VICTIM_CASSETTE
    line = _replace_line(file, "version: 1", "version: 1 # caf")
    file.write_bytes(file.read_bytes().replace(b"# caf", b"# caf\xe9"))
    return Planted(file, line, "not UTF-8 text")


def truncated_cassette(repo: Path, mp: pytest.MonkeyPatch) -> Planted:
    file = repo / VICTIM_CASSETTE
    text = file.read_text()
    file.write_text(text[: len(text) // 2])
    return Planted(file, -1, "is not valid YAML")


def unreadable_cassette(repo: Path, mp: pytest.MonkeyPatch) -> Planted:
    file = repo / VICTIM_CASSETTE
    deny_reading(mp, file)
    return Planted(file, None, "cannot read the file: Permission denied")


def cassette_linked_to_itself(repo: Path, mp: pytest.MonkeyPatch) -> Planted:
    file = repo / VICTIM_CASSETTE
    file.unlink()
    file.symlink_to(file.name)
    # The case runner finds no file there before the cassette is read.
    return Planted(file, None, "no cassette at")


def cassette_of_vcrpy_before_1_0(repo: Path, mp: pytest.MonkeyPatch) -> Planted:
    file = repo / VICTIM_CASSETTE
    file.write_text("- request: {method: POST}\n  response: {status: 200}\n")
    return Planted(file, None, "not a vcrpy cassette")


def cassette_interactions_not_a_list(repo: Path, mp: pytest.MonkeyPatch) -> Planted:
    file = repo / VICTIM_CASSETTE
    file.write_text("version: 1\ninteractions: {request: {}, response: {}}\n")
    return Planted(file, None, "not a vcrpy cassette")


CASSETTE_CORPUS = [
    unknown_vcr_format_version,
    vcr_format_version_not_a_number,
    newer_agentbench_cassette_format,
    agentbench_cassette_format_not_a_number,
    alias_bomb_in_a_cassette,
    deep_nesting_in_a_cassette,
    deep_nesting_in_a_json_cassette,
    broken_json_cassette,
    oversized_cassette,
    not_utf8_cassette,
    truncated_cassette,
    unreadable_cassette,
    cassette_linked_to_itself,
    cassette_of_vcrpy_before_1_0,
    cassette_interactions_not_a_list,
]


@pytest.mark.parametrize("plant", CASSETTE_CORPUS, ids=lambda plant: plant.__name__)
def test_a_malformed_cassette_is_its_cases_error(
    plant: Plant, repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    planted = plant(repo, monkeypatch)
    code, output, _ = run_suites(repo, capsys)
    assert code == 3
    assert output["suite_errors"] == []
    outcomes = {(r["suite"], r["case_id"]): r for r in output["results"]}
    broken = outcomes.pop(("victim", "status-prod-eu"))
    assert broken["status"] == "error"
    message = broken["error"]
    if planted.line == -1:
        assert f"{planted.file}:" in message
        assert message.split(f"{planted.file}:")[1].split(":")[0].isdigit()
    elif planted.line is None:
        assert str(planted.file) in message
    else:
        assert at(planted.file, planted.line) in message
    assert planted.fragment in message
    # nothing else lost: every other chosen case ran, the victim suite's other one included
    assert sorted((key, r["status"]) for key, r in outcomes.items()) == [
        (("sre", case), "passed") for case in CHOSEN
    ] + [(("victim", "status-staging-quiet"), "passed")]


# -- Parquet imports: exit 3, the store unchanged ------------------------------------------
@pytest.fixture(scope="module")
def exports(template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`source.duckdb` exported flat (`export/`) and by date (`lake/`), and `target.duckdb`,
    a store with runs of its own that every damaged import must leave as it was."""
    folder = tmp_path_factory.mktemp("exports")
    sre = str(template / "golden" / "sre")
    for db, case in (("source", "status-prod-eu"), ("target", "status-staging-quiet")):
        store = str(folder / f"{db}.duckdb")
        assert main(["run", sre, "--filter", case, "--no-report", "--db", store]) == 0
    source = str(folder / "source.duckdb")
    assert main(["traces", "export", str(folder / "export"), "--db", source]) == 0
    lake = ["traces", "export", str(folder / "lake"), "--partition-by", "date", "--db", source]
    assert main(lake) == 0
    return folder


@pytest.fixture
def target(exports: Path, tmp_path: Path) -> Path:
    for name in ("target.duckdb", "export", "lake"):
        copy = shutil.copytree if (exports / name).is_dir() else shutil.copy
        copy(exports / name, tmp_path / name)
    return tmp_path / "target.duckdb"


def snapshot(db: Path) -> dict[str, Any]:
    """Every table's rows, as text: what must not change."""
    conn = duckdb.connect(str(db), read_only=True)
    try:
        tables = [row[0] for row in conn.execute("SHOW TABLES").fetchall()]
        return {
            table: sorted(map(str, conn.execute(f"SELECT * FROM {table}").fetchall()))
            for table in tables
        }
    finally:
        conn.close()


def _manifest(folder: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    file = folder / "manifest.json"
    manifest = orjson.loads(file.read_bytes())
    change(manifest)
    file.write_bytes(orjson.dumps(manifest))
    return file


def no_manifest(folder: Path) -> tuple[Path, str]:
    (folder / "manifest.json").unlink()
    return folder, "has no manifest.json"


def manifest_of_a_newer_format(folder: Path) -> tuple[Path, str]:
    file = _manifest(folder, lambda m: m.update(format_version=2))
    return file, "export format 2 is newer than this agentbench reads (1)"


def manifest_of_an_unknown_format(folder: Path) -> tuple[Path, str]:
    file = _manifest(folder, lambda m: m.update(format_version="1"))
    return file, "format_version '1' is not an export format this agentbench reads (known: 1"


def manifest_not_json(folder: Path) -> tuple[Path, str]:
    file = folder / "manifest.json"
    file.write_bytes(file.read_bytes()[:40])
    return file, "is not valid JSON"


def manifest_tables_not_a_mapping(folder: Path) -> tuple[Path, str]:
    file = _manifest(folder, lambda m: m.update(tables=["runs"]))
    return file, "tables: expected a mapping"


def manifest_path_outside_the_folder(folder: Path) -> tuple[Path, str]:
    file = _manifest(folder, lambda m: m["tables"]["runs"].update(path="../target.duckdb"))
    return file, "tables.runs.path '../target.duckdb' is outside the export folder"


def parquet_file_missing(folder: Path) -> tuple[Path, str]:
    (folder / "llm_calls.parquet").unlink()
    return folder / "llm_calls.parquet", "missing; the manifest lists 2 llm_calls row(s) there"


def parquet_file_truncated(folder: Path) -> tuple[Path, str]:
    file = folder / "llm_calls.parquet"
    file.write_bytes(file.read_bytes()[: file.stat().st_size // 2])
    return file, "not a readable Parquet file"


def parquet_file_of_other_columns(folder: Path) -> tuple[Path, str]:
    shutil.copy(folder / "events.parquet", folder / "runs.parquet")
    return folder / "runs.parquet", "its columns are not those of the store's runs table"


def parquet_rows_not_as_the_manifest_says(folder: Path) -> tuple[Path, str]:
    _manifest(folder, lambda m: m["tables"]["tool_calls"].update(rows=999))
    return folder / "tool_calls.parquet", "tool_calls has 1 rows but the manifest says 999"


def partition_file_truncated(folder: Path) -> tuple[Path, str]:
    lake = folder.parent / "lake"
    [file] = sorted((lake / "runs").glob("**/*.parquet"))
    file.write_bytes(file.read_bytes()[:100])
    return file, "not a readable Parquet file"


def partition_file_that_is_a_named_pipe(folder: Path) -> tuple[Path, str]:
    lake = folder.parent / "lake"
    [file] = sorted((lake / "runs").glob("**/*.parquet"))
    pipe = file.with_name("extra.parquet")
    os.mkfifo(pipe)  # DuckDB would wait for a writer forever
    return pipe, "not a regular file (a named pipe); expected Parquet"


LAKE_DAMAGE = ("partition_file_truncated", "partition_file_that_is_a_named_pipe")
IMPORT_CORPUS = [
    no_manifest,
    manifest_of_a_newer_format,
    manifest_of_an_unknown_format,
    manifest_not_json,
    manifest_tables_not_a_mapping,
    manifest_path_outside_the_folder,
    parquet_file_missing,
    parquet_file_truncated,
    parquet_file_of_other_columns,
    parquet_rows_not_as_the_manifest_says,
    partition_file_truncated,
    partition_file_that_is_a_named_pipe,
]


@pytest.mark.parametrize("damage", IMPORT_CORPUS, ids=lambda damage: damage.__name__)
def test_a_damaged_export_is_refused_and_the_store_is_unchanged(
    damage: Callable[[Path], tuple[Path, str]], target: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = snapshot(target)
    folder = target.parent / ("lake" if damage.__name__ in LAKE_DAMAGE else "export")
    file, fragment = damage(target.parent / "export")
    code = main(["traces", "import", str(folder), "--db", str(target)])
    err = capsys.readouterr().err
    assert code == 3
    assert "Traceback" not in err
    assert str(file) in err and fragment in err
    assert snapshot(target) == before


def test_an_intact_export_does_change_the_store(target: Path, capsys) -> None:
    """The check above can see a change: the same export, undamaged, adds its run."""
    before = snapshot(target)
    assert main(["traces", "import", str(target.parent / "export"), "--db", str(target)]) == 0
    after = snapshot(target)
    assert len(after["runs"]) == len(before["runs"]) + 1
    assert set(TABLES) <= set(after)
