"""Readers beyond the suite loader are bounded too: a file that is no regular file (a named
pipe would block its reader forever) or is over the size limit is never read.

Issue 34, finding 4 asks this of every reader the CLI offers. Suite, case and cassette files
go through `yaml_source.read_source` (tests/test_malformed_inputs.py); `traces import-otel`
through `otel.otlp_files` (tests/test_otel_import_bounds.py). These read cassettes and
snapshots on the side: `run --shard` weighing each case by its recorded calls (a named pipe
there hung the run before any case ran), the cassette cache deciding whether to prefetch,
and an MCP server's tool snapshot.
"""

from __future__ import annotations

import builtins
import io
import os
from pathlib import Path
from typing import Any

import pytest

from agentbench.errors import ToolDefinitionError
from agentbench.evals.running.shards import recorded_calls
from agentbench.replay import cassette_cache
from agentbench.runtime.mcp.tools import read_snapshot


@pytest.fixture
def never_opened(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A named pipe that nothing may open: opening it for reading waits for a writer forever."""
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    real_open, real_io_open = builtins.open, io.open

    def guarded(opener: Any) -> Any:
        def open_(file: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(file, str | os.PathLike) and Path(file) == pipe:
                raise AssertionError(f"{pipe} was opened: its reader would wait forever")
            return opener(file, *args, **kwargs)

        return open_

    monkeypatch.setattr(builtins, "open", guarded(real_open))
    monkeypatch.setattr(io, "open", guarded(real_io_open))  # what Path.read_bytes calls
    return pipe


def test_planning_shards_weighs_a_cassette_that_is_a_named_pipe_as_one_call(
    never_opened: Path, tmp_path: Path
) -> None:
    assert recorded_calls(never_opened) == 1
    cassette = tmp_path / "two.yaml"
    cassette.write_text("interactions:\n- request: {}\n- request: {}\n")
    assert recorded_calls(cassette) == 2


def test_a_cassette_over_the_limit_weighs_one_call_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTBENCH_MAX_FILE_MB", "0.001")
    cassette = tmp_path / "big.yaml"
    cassette.write_text("interactions:\n" + "- request: {}\n" * 200)
    assert recorded_calls(cassette) == 1


def test_the_cassette_cache_does_not_read_a_named_pipe(never_opened: Path, tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    folder.mkdir()
    assert cassette_cache._cached(folder, [never_opened]) is True  # nothing to prefetch there


def test_an_mcp_tool_snapshot_that_is_a_named_pipe_is_named_not_waited_on(
    never_opened: Path,
) -> None:
    with pytest.raises(ToolDefinitionError, match="not a regular file \\(a named pipe\\)"):
        read_snapshot(never_opened)
