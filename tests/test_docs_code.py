"""Every code block in README.md and docs/**/*.md runs, so the docs cannot rot.

One test per page (its id is the page's path: `-k getting-started` picks pages by name). A page
runs in a fresh folder of its own holding a copy of the repository's golden/, replays/ (the
golden suites' cassettes) and examples/, so `agentbench run golden/` works as written; its
blocks run in page order (the convention is in tests/docs_blocks.py and docs/contributing.md):
python blocks in one namespace per page, bash blocks with `bash -e -o pipefail`, the venv's
commands first on PATH and no API keys or CI variables in the environment; yaml, json and toml
blocks are parsed, and a yaml suite (one with `cases:` or `agent:`) is loaded with the suite
loader. A failure names the page and line, and shows the block and what it printed.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.docs_blocks import ROOT, Block, ConventionError, blocks, page_id, pages, parse

# Generous: a block runs the real CLI, sometimes a whole suite, on a loaded 2-core machine.
BLOCK_TIMEOUT_S = 300
OUTPUT_LINES_SHOWN = 120
WORKER = Path(__file__).with_name("docs_worker.py")
NODE_MODULES = Path("golden/typescript_agent/node_modules")

# What a reader's shell would not have: keys and endpoints (a block must never reach a real
# model), this run's CI context (GITHUB_WORKSPACE moves where agentbench writes), and
# agentbench's own settings (AGENTBENCH_DB would point every block at one store).
_DROPPED_PREFIXES = ("OPENAI_", "ANTHROPIC_", "AGENTBENCH_", "GITHUB_", "PYTEST_", "PYTHON")


def reader_environment() -> dict[str, str]:
    env = {
        name: value
        for name, value in os.environ.items()
        if "API_KEY" not in name and not name.startswith(_DROPPED_PREFIXES)
    }
    venv_bin = Path(sys.prefix) / "bin"
    env["PATH"] = os.pathsep.join([str(venv_bin), env.get("PATH", os.defpath)])
    env["VIRTUAL_ENV"] = sys.prefix
    env["NO_COLOR"] = "1"
    return env


def prepare_folder(folder: Path) -> None:
    """A copy of golden/, replays/ and examples/ (node_modules linked, not copied: it is large)."""
    ignore = shutil.ignore_patterns("__pycache__", "node_modules", ".agentbench")
    for name in ("golden", "replays", "examples"):
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, folder / name, ignore=ignore, symlinks=True)
    if (ROOT / NODE_MODULES).is_dir():
        (folder / NODE_MODULES).symlink_to(ROOT / NODE_MODULES, target_is_directory=True)


class BlockError(AssertionError):
    def __init__(self, block: Block, problem: str, output: str = "") -> None:
        lines = output.splitlines()
        if len(lines) > OUTPUT_LINES_SHOWN:
            skipped = len(lines) - OUTPUT_LINES_SHOWN
            lines = [f"... ({skipped} lines before these)", *lines[-OUTPUT_LINES_SHOWN:]]
        shown = "\n".join(lines) if lines else "(nothing)"
        super().__init__(
            f"{block.where}: {problem}\n--- the {block.language} block ---\n{block.body}"
            f"--- what it printed ---\n{shown}"
        )


class PythonWorker:
    """The page's interpreter (tests/docs_worker.py): one namespace for all its python blocks."""

    def __init__(self, folder: Path, env: dict[str, str]) -> None:
        self.folder = folder
        answers, self._answer_end = os.pipe()
        self.process = subprocess.Popen(
            [sys.executable, str(WORKER), str(self._answer_end)],
            cwd=folder,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(self._answer_end,),
            start_new_session=True,
            text=True,
        )
        os.close(self._answer_end)
        self.answers = os.fdopen(answers, "r", encoding="utf-8")

    def run(self, block: Block, request: dict[str, object]) -> tuple[bool, str]:
        output = self.folder.parent / f"output-{block.line}.txt"
        request = {**request, "output": str(output)}
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            raise BlockError(block, "the page's Python interpreter had exited") from None
        ready, _, _ = select.select([self.answers], [], [], BLOCK_TIMEOUT_S)
        answer = self.answers.readline() if ready else ""
        printed = output.read_text(errors="replace") if output.exists() else ""
        if not ready:
            self.close()
            raise BlockError(block, f"still running after {BLOCK_TIMEOUT_S} s", printed)
        if not answer:
            raise BlockError(block, "the page's Python interpreter exited", printed)
        return json.loads(answer)["ok"], printed

    def close(self) -> None:
        _end_group(self.process)
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.answers.close()


def _end_group(process: subprocess.Popen[str] | subprocess.Popen[bytes]) -> None:
    """Ends the process and whatever it left running in its session (a server in background)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


class PageRun:
    """One page's blocks, in order, in one folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.env = reader_environment()
        self.worker: PythonWorker | None = None

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()

    def run(self, block: Block) -> None:
        if block.file is not None:
            target = self.folder / block.file
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block.body, encoding="utf-8")
        elif block.runs:
            getattr(self, f"_{block.language}")(block)

    def _python(self, block: Block) -> None:
        ok, printed = self._worker().run(
            block, {"kind": "code", "code": block.body, "line": block.line, "page": block.page}
        )
        if not ok:
            raise BlockError(block, "the python block failed", printed)

    def _bash(self, block: Block) -> None:
        log = self.folder.parent / f"output-{block.line}.txt"
        # Output to a file, not a pipe: a server the block leaves in background would hold a
        # pipe open, and waiting for it to close would wait for the server.
        with log.open("wb") as out:
            process = subprocess.Popen(
                ["bash", "-e", "-o", "pipefail", "-c", block.body],
                cwd=self.folder,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                code = process.wait(timeout=BLOCK_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                code = None
            finally:
                _end_group(process)
        printed = log.read_text(errors="replace")
        if code is None:
            raise BlockError(block, f"still running after {BLOCK_TIMEOUT_S} s", printed)
        if code != block.exit:
            expected = f"`<!-- exit: {block.exit} -->`" if block.exit else "0"
            raise BlockError(block, f"exit status {code}, expected {expected}", printed)

    def _yaml(self, block: Block) -> None:
        try:
            data = yaml.safe_load(block.body)
        except yaml.YAMLError as exc:
            raise BlockError(block, f"not valid YAML: {exc}") from None
        if isinstance(data, dict) and ("cases" in data or "agent" in data):
            suite = self.folder / f"suite-at-line-{block.line}"
            suite.mkdir()
            (suite / "suite.yaml").write_text(block.body, encoding="utf-8")
            ok, printed = self._worker().run(block, {"kind": "suite", "path": str(suite)})
            if not ok:
                raise BlockError(block, "the suite loader refused this suite", printed)

    def _json(self, block: Block) -> None:
        try:
            json.loads(block.body)
        except json.JSONDecodeError as exc:
            raise BlockError(block, f"not valid JSON: {exc}") from None

    def _toml(self, block: Block) -> None:
        try:
            tomllib.loads(block.body)
        except tomllib.TOMLDecodeError as exc:
            raise BlockError(block, f"not valid TOML: {exc}") from None

    def _worker(self) -> PythonWorker:
        if self.worker is None:
            self.worker = PythonWorker(self.folder, self.env)
        return self.worker


@pytest.fixture
def page_run(tmp_path: Path) -> Iterator[PageRun]:
    folder = tmp_path / "page"
    folder.mkdir()
    run = PageRun(folder)
    yield run
    run.close()


def run_page(page_blocks: list[Block], run: PageRun) -> None:
    if any(block.runs for block in page_blocks):
        prepare_folder(run.folder)
    for block in page_blocks:
        run.run(block)


@pytest.mark.slow
@pytest.mark.parametrize("page", pages(), ids=page_id)
def test_every_code_block_runs(page: Path, page_run: PageRun) -> None:
    failure = None
    try:
        run_page(blocks(page), page_run)
    except (ConventionError, BlockError) as exc:
        failure = str(exc)
    if failure is not None:  # failed outside the `except`: no "during handling" chain shown
        pytest.fail(failure, pytrace=False)


# The convention itself, on pages written here.


def run_text(text: str, folder: Path) -> None:
    run = PageRun(folder)
    try:
        run_page(parse(text, "guide.md"), run)
    finally:
        run.close()


def page_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "page"
    folder.mkdir(parents=True)
    return folder


def test_a_page_shares_its_folder_and_python_namespace_between_blocks(tmp_path: Path) -> None:
    text = (
        "<!-- file: desk/greeting.py -->\n```python\nGREETING = 'hello'\n```\n\n"
        "```python\nfrom desk.greeting import GREETING\nseen = GREETING\n```\n\n"
        "```python\nassert seen == 'hello'\nopen('from-python.txt', 'w').write(seen)\n```\n\n"
        '```bash\ntest "$(cat from-python.txt)" = hello\n'
        "test -d golden -a -d replays -a -d examples\n"
        'test "$(command -v agentbench)" = "$VIRTUAL_ENV/bin/agentbench"\n'
        "echo from-bash > from-bash.txt\n```\n\n"
        "```python\nassert open('from-bash.txt').read() == 'from-bash\\n'\n```\n"
    )
    run_text(text, page_folder(tmp_path))


def test_a_failing_block_is_named_with_its_line_and_output(tmp_path: Path) -> None:
    text = "# Guide\n\n```bash\necho before\nfalse\necho after\n```\n"
    with pytest.raises(BlockError) as failed:
        run_text(text, page_folder(tmp_path))
    message = str(failed.value)
    assert message.startswith("guide.md:3: exit status 1, expected 0")
    assert "echo before\nfalse\n" in message
    assert "--- what it printed ---\nbefore" in message
    assert "after\n" not in message.split("--- what it printed ---")[1]


def test_a_python_traceback_names_the_page_line(tmp_path: Path) -> None:
    text = "intro\n\n```python\nx = 1\nraise ValueError('no station for Oslo')\n```\n"
    with pytest.raises(BlockError) as failed:
        run_text(text, page_folder(tmp_path))
    assert 'File "guide.md", line 5' in str(failed.value)
    assert "ValueError: no station for Oslo" in str(failed.value)


def test_an_expected_exit_status_is_checked_both_ways(tmp_path: Path) -> None:
    run_text("<!-- exit: 1 -->\n```bash\nexit 1\n```\n", page_folder(tmp_path))
    with pytest.raises(BlockError, match=r"guide.md:2: exit status 0, expected `<!-- exit: 1"):
        run_text("<!-- exit: 1 -->\n```bash\ntrue\n```\n", page_folder(tmp_path / "again"))


def test_a_bash_block_sees_no_api_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-for-docs")
    monkeypatch.setenv("MY_API_KEY", "secret")
    text = '```bash\ntest -z "${OPENAI_API_KEY:-}" && test -z "${MY_API_KEY:-}"\n```\n'
    run_text(text, page_folder(tmp_path))


def test_blocks_not_run_and_text_are_skipped(tmp_path: Path) -> None:
    text = (
        "<!-- not run: needs OPENAI_API_KEY -->\n```bash\nexit 3\n```\n\n"
        "```text\nnot code at all\n```\n"
    )
    run_text(text, page_folder(tmp_path))


def test_data_blocks_are_parsed_and_suites_loaded(tmp_path: Path) -> None:
    run_text('```json\n{"a": 1}\n```\n\n```toml\n[x]\ny = 1\n```\n', page_folder(tmp_path))
    with pytest.raises(BlockError, match=r"guide\.md:1: not valid JSON"):
        run_text("```json\n{a: 1}\n```\n", page_folder(tmp_path / "json"))
    suite = (
        "```yaml\nname: desk\nagent: agents.desk:agent\ncases:\n  - id: one\n    inptu: hi\n```\n"
    )
    with pytest.raises(BlockError, match="the suite loader refused this suite") as failed:
        run_text(suite, page_folder(tmp_path / "suite"))
    assert "inptu" in str(failed.value)
    run_text(suite.replace("inptu", "input"), page_folder(tmp_path / "good"))


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("a\n\n```\nls\n```\n", "guide.md:3: a fenced block without a language"),
        ("```sh\nls\n```\n", "guide.md:1: unknown language 'sh'"),
        ("<!-- not run: -->\n```bash\nls\n```\n", "guide.md:2: `<!-- not run: -->` needs a reason"),
        ("<!-- not-run: net -->\n```bash\nls\n```\n", "guide.md:1: unknown directive"),
        ("<!-- exit: 1 -->\n```python\nx = 1\n```\n", "guide.md:2: `<!-- exit: N -->` is for bash"),
        ("<!-- file: ../x.py -->\n```python\nx\n```\n", "guide.md:2: `<!-- file: ../x.py -->`"),
        ("```bash\nls\n", "guide.md:1: this fence is never closed"),
    ],
)
def test_a_page_that_breaks_the_convention_is_told_where(text: str, complaint: str) -> None:
    with pytest.raises(ConventionError) as broken:
        parse(text, "guide.md")
    assert str(broken.value).startswith(complaint)


def test_fences_in_lists_and_longer_fences() -> None:
    text = (
        "1. Run it:\n\n   ```bash\n   agentbench run golden/\n   ```\n\n"
        "````text\n```python\nnot a block\n```\n````\n\n"
        "<!-- file: agent.ts -->\n```typescript\nexport {}\n```\n"
    )
    found = parse(text, "guide.md")
    assert [(b.line, b.language, b.body) for b in found] == [
        (3, "bash", "agentbench run golden/\n"),
        (7, "text", "```python\nnot a block\n```\n"),
        (14, "typescript", "export {}\n"),
    ]
    assert [b.runs for b in found] == [True, False, False]
