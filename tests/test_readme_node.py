"""README's "Agents in other languages", done exactly as it says: its Node agent, suite and case
files, taken from the README itself, recorded live (the bundled server standing in for OpenAI),
replayed offline, failed by the prompt edit it shows, then answered by `agentbench proxy` as
its last block shows. Skipped, with why, without node or the openai npm package (the
TypeScript golden suite's `npm ci` brings it)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agentbench.testing.server import OpenAICompatibleServer
from tests.test_journeys import ROOT, agentbench

OPENAI_PACKAGE = ROOT / "golden" / "typescript_agent" / "node_modules" / "openai"
ANSWER = "Order A17 ships on Monday."

pytestmark = [
    pytest.mark.skipif(shutil.which("node") is None, reason="needs node on PATH"),
    pytest.mark.skipif(
        not OPENAI_PACKAGE.is_dir(),
        reason="needs the openai npm package: npm ci --prefix golden/typescript_agent",
    ),
]


def _section() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("## Agents in other languages")
    return text[start : text.index("\n## ", start + 1)]


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", _section(), flags=re.S)


def _files(root: Path) -> None:
    """Each file block names its path on its first line (a comment)."""
    for block in [*_blocks("js"), *_blocks("yaml")]:
        path = re.match(r"(?://|#) (suites/\S+)", block)
        assert path, f"a README file block without its path: {block[:60]!r}"
        target = root / path.group(1).rstrip(":")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(block, encoding="utf-8")
    modules = root / "suites" / "desk" / "node_modules"
    modules.mkdir()
    (modules / "openai").symlink_to(OPENAI_PACKAGE)  # what `npm install openai@6` brings


def test_the_readme_node_walkthrough_records_replays_fails_and_proxies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    commands = "\n".join(_blocks("bash"))
    _files(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-readme-walkthrough")

    assert "agentbench run suites/desk --live --record-mode all" in commands
    with OpenAICompatibleServer(responder=lambda request: ANSWER) as server:
        recorded = agentbench(
            tmp_path, "run", "suites/desk", "--live", "--record-mode", "all",
            "--base-url", server.base_url, "--no-report",
        )  # fmt: skip
    assert recorded.code == 0, recorded.out + recorded.err
    cassette = tmp_path / "replays" / "desk" / "where-is-a17.yaml"
    assert cassette.is_file()
    assert "sk-readme-walkthrough" not in cassette.read_text()

    offline = agentbench(tmp_path, "run", "suites/desk", "--no-report")
    assert offline.code == 0, offline.out + offline.err

    edit = re.search(r"sed -i 's/(.*?)/(.*?)/' (\S+)", commands)
    assert edit, "README's edit of the agent"
    agent = tmp_path / edit.group(3)
    agent.write_text(agent.read_text().replace(edit.group(1), edit.group(2)))
    changed = agentbench(tmp_path, "run", "suites/desk", "--no-report")
    assert changed.code == 1, changed.out + changed.err
    assert "gate: FAILED" in changed.out
    assert "request_drift" in changed.out and "messages[0].content" in changed.out

    agent.write_text(agent.read_text().replace(edit.group(2), edit.group(1)))
    _proxied(tmp_path, commands)


def _proxied(root: Path, commands: str) -> None:
    """The last block: the proxy replays the case's cassette to the agent started by hand."""
    asked = re.search(r"echo '(\{.*?\})'", commands)
    assert asked and "agentbench proxy --replay replays/desk/where-is-a17.yaml" in commands
    environment = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    proxy = subprocess.Popen(
        [sys.executable, "-m", "agentbench", "proxy", "--replay",
         "replays/desk/where-is-a17.yaml", "--port", "0"],
        cwd=root, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proxy.stdout is not None
        listening = proxy.stdout.readline()
        base_url = re.search(r"OPENAI_BASE_URL=(\S+?)[,)]", listening)
        assert base_url, listening
        agent = subprocess.run(
            ["node", "suites/desk/agent.mjs"],
            input=asked.group(1),
            cwd=root,
            env={**environment, "OPENAI_BASE_URL": base_url.group(1), "OPENAI_API_KEY": "unused"},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert agent.returncode == 0, agent.stderr
        assert agent.stdout.strip() == ANSWER
    finally:
        proxy.terminate()
        printed, warned = proxy.communicate(timeout=30)
    said = printed + warned
    assert proxy.returncode == 0, said
    assert "1 replayed" in said and "0 refused" in said, said
