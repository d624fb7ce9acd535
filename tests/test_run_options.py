"""`agentbench run`'s flags that cannot work together are refused before anything runs.

The option objects (`commands.options`) check them as the flags are gathered: a usage error
(exit 2) naming the flags, told before the suites are read and before a store is opened. And
where the HTML report goes, which `run` and `gate` both ask `Outputs`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentbench.cli import main
from agentbench.commands.options import Execution, Outputs
from agentbench.errors import UsageError


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (
            ["--baseline", "latest", "--against", "main"],
            "--baseline and --against both name a baseline; give one",
        ),
        (["--shard", "1/2", "--baseline", "latest"], "--shard 1/2 with --baseline: a shard is"),
        (["--shard", "1/2", "--against", "main"], "--shard 1/2 with --against: a shard is"),
        (["--shard", "1/2", "--fail-on-change"], "--shard 1/2 with --fail-on-change: a shard"),
        (["--shard", "3/2"], "--shard 3/2: K must be between 1 and N"),
        (
            ["--resume", "eval_a", "--eval-id", "eval_b"],
            "--resume names the eval to continue; leave --eval-id out",
        ),
        (["--results", "lake/"], "--results 'lake/': expected parquet://DIR"),
    ],
)
def test_flags_that_cannot_work_together_are_a_usage_error_before_anything_runs(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    flags: list[str],
    said: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AGENTBENCH_DB", raising=False)
    # The folder holds no suite: the flags are what is told, not the missing suites.
    assert main(["run", str(tmp_path), *flags]) == 2
    err = capsys.readouterr().err
    assert said in err
    assert "no runnable suite" not in err
    assert not (tmp_path / ".agentbench").exists()


def test_resume_may_name_the_eval_its_eval_id_names() -> None:
    assert Execution(resume="eval_a", eval_id="eval_a").eval_id == "eval_a"
    with pytest.raises(UsageError, match="leave --eval-id out"):
        Execution(resume="eval_a", eval_id="eval_b")


def test_the_report_folder_is_the_one_given_from_where_the_command_was_typed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    repo_reports = tmp_path / "repo" / "reports"
    assert Outputs().report_folder(repo_reports) == repo_reports
    given = Outputs(report_dir=Path("site/reports"))
    assert given.report_folder(repo_reports) == tmp_path / "site" / "reports"
    assert Outputs(report_dir=Path("site"), no_report=True).report_folder(repo_reports) is None
