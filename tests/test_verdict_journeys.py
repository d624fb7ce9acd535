"""One verdict, everywhere: each path a gate can take, through the real CLI, and every output.

For each path — a pass and a regression against a baseline, no baseline at all, a suite that
cannot be imported, an expected failure that passes under --strict-xfail, an eval killed
before it finished (gated, reported, resumed), `--resume`, `--against`, one shard run on its
own, a merged eval lacking a shard, an unmerged shard's store gated, a case that could not
run, a live eval in an outage and a one-suite eval that must not be the baseline — the
command runs twice on identical copies of one checkout: once as a person reads it (terminal,
JUnit, --summary-md, $GITHUB_STEP_SUMMARY, the HTML report), once with --json. All six outputs
and the exit code must say the same thing: the same status (passed, failed, error), and the
reason that decided it in each of them.
"""

from __future__ import annotations

import html
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from tests.test_journeys import ROOT, _generated, agentbench, apply, edit, git

pytestmark = pytest.mark.slow  # journeys through the real CLI, seconds each

SUITE = "sre"
REGRESSION = (edit('"cpu_pct": 78', '"cpu_pct": 79'),)
LENIENT_XFAIL = (
    edit('output_contains: "forecast: "', "output_contains: forecast", "cases/arithmetic.yaml"),
)
BROKEN_IMPORT = (
    edit(
        "from agentbench import", "raise RuntimeError('broken on purpose')\nfrom agentbench import"
    ),
)
# The process kills itself (as a CI job killed mid-eval) when its agent first reads latencies:
# the 5th of the suite's 14 trials, run one at a time.
KILL_SWITCH = (
    edit("from __future__ import annotations\n",
         "from __future__ import annotations\n\nimport os\nimport signal\n"),
    edit("    values = LATENCIES_MS.get(service)\n",
         '    if os.environ.get("KILL_AT_LATENCIES"):\n'
         "        os.kill(os.getpid(), signal.SIGKILL)\n"
         "    values = LATENCIES_MS.get(service)\n"),
)  # fmt: skip
PLANNED = 14  # the sre suite's trials
UNFINISHED = re.compile(
    r"The eval did not finish \(it was killed or interrupted, or is still running\): (\d+) of "
    r"its 14 planned trials have no result; run the rest with `([^`]+)`\."
)
HEADINGS = {"passed": "✅ passed", "failed": "❌ gate failed", "error": "⛔ error"}
TERMINAL = {"passed": "gate: passed (", "failed": "gate: FAILED", "error": "gate: ERROR (exit "}
BANNER = {"passed": "Gate passed", "failed": "Gate FAILED", "error": "Gate ERROR"}


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A committed checkout of the sre suite, with one (passing) baseline eval in its store."""
    repo = tmp_path_factory.mktemp("verdicts") / "repo"
    shutil.copytree(ROOT / "golden" / SUITE, repo / "golden" / SUITE, ignore=_generated)
    for name in ("__init__.py", "_reference.py"):
        shutil.copy(ROOT / "golden" / name, repo / "golden" / name)
    shutil.copytree(ROOT / "replays" / SUITE, repo / "replays" / SUITE)
    shutil.copytree(ROOT / "schema", repo / "schema")
    (repo / ".gitignore").write_text(".agentbench/\nreports/\n__pycache__/\n*.duckdb\nout/\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "suite")
    first = agentbench(repo, "run", f"golden/{SUITE}", "--no-report")
    assert first.code == 0, first.err + first.out
    return repo


@dataclass
class Seen:
    """What each output said."""

    code: int
    terminal: str  # the `gate: …` block of the terminal
    json_code: int
    verdict: dict  # --json's "verdict"
    gate_failed: bool  # --json's "gate_failed"
    junit: str  # the gate testcase: passed, failed or error
    junit_text: str
    summary_md: str
    step_summary: str
    banner: str  # the report's verdict section, as text
    out: str


def _gate_block(out: str) -> str:
    start = out.rfind("\ngate: ")
    assert start >= 0, f"no gate: line in\n{out}"
    return out[start + 1 :]


def _junit_gate(path: Path) -> tuple[str, str]:
    top = ET.parse(path).getroot()
    suite = next(s for s in top if s.get("name") == "agentbench.gate")
    (case,) = list(suite)
    kinds = [child.tag for child in case if child.tag in ("failure", "error")]
    status = {"failure": "failed", "error": "error"}[kinds[0]] if kinds else "passed"
    return status, path.read_text()


def _banner(report: Path) -> str:
    page = report.read_text()
    section = re.search(r'<section id="verdict".*?</section>', page, re.DOTALL)
    assert section, report
    return html.unescape(re.sub(r"<[^>]+>", " ", section[0]))


def observe(work: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> Seen:
    """The command in `work` as a person runs it, and in an identical copy with --json."""
    twin = work.parent / f"{work.name}-json"
    shutil.copytree(work, twin, symlinks=True)
    step = work / "out" / "step-summary.md"
    step.parent.mkdir(exist_ok=True)
    step.write_text("")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    outputs = ["--junit", "out/junit.xml", "--summary-md", "out/summary.md"]
    shown = agentbench(work, *args, *outputs, "--report-dir", "out/reports")
    assert "Traceback" not in shown.out + shown.err, shown.err
    monkeypatch.delenv("GITHUB_STEP_SUMMARY")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")  # annotations must not spoil the document
    read = agentbench(twin, *args, "--json", "--no-report")
    monkeypatch.delenv("GITHUB_ACTIONS")
    document = orjson.loads(read.out)
    report = re.search(r"^report: (.+)$", shown.out, re.MULTILINE)
    assert report, shown.out + shown.err
    junit, junit_text = _junit_gate(work / "out" / "junit.xml")
    return Seen(
        code=shown.code,
        terminal=_gate_block(shown.out),
        json_code=read.code,
        verdict=document["verdict"],
        gate_failed=document["gate_failed"],
        junit=junit,
        junit_text=junit_text,
        summary_md=(work / "out" / "summary.md").read_text(),
        step_summary=step.read_text(),
        banner=_banner(Path(report[1])),
        out=shown.out + shown.err,
    )


def agree(seen: Seen, status: str, code: int, *said: str) -> None:
    """Every output says `status`, the command exits `code`, and each names what decided it."""
    context = seen.out
    assert seen.code == seen.json_code == code, context
    assert seen.terminal.startswith(TERMINAL[status]), seen.terminal
    assert (seen.verdict["status"], seen.verdict["exit_code"]) == (status, code)
    assert seen.gate_failed is (status != "passed")
    assert seen.junit == status
    for text in (seen.summary_md, seen.step_summary):
        assert text.startswith(f"## agentbench: {HEADINGS[status]}\n"), text[:200]
    assert BANNER[status] in seen.banner, seen.banner
    if status == "error":
        assert f"exit code {code}" in seen.banner
    for words in said:
        reasons = " ".join(seen.verdict["reasons"] + [seen.verdict["basis"]])
        for where, text in (
            ("terminal", seen.terminal),
            ("json", reasons),
            ("junit", seen.junit_text),
            ("markdown", seen.summary_md),
            ("step summary", seen.step_summary),
            ("html", seen.banner),
        ):
            assert words in " ".join(text.split()), f"{where} does not say {words!r}:\n{text}"


@pytest.fixture
def work(checkout: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(checkout, tmp_path / "repo", symlinks=True))


def test_a_pass_against_the_baseline(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = observe(work, monkeypatch, "run", f"golden/{SUITE}")
    agree(seen, "passed", 0, "compared with baseline eval_")


def test_a_regression_against_the_baseline(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    apply(work, SUITE, REGRESSION)
    seen = observe(work, monkeypatch, "run", f"golden/{SUITE}")
    agree(seen, "failed", 1, "passed in the baseline and fails now")


def test_no_baseline(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    apply(work, SUITE, REGRESSION)
    seen = observe(work, monkeypatch, "run", f"golden/{SUITE}", "--db", "fresh.duckdb")
    agree(seen, "failed", 1, "no baseline compared: every counted trial must pass", " fails: ")
    # and without the regression, a pass: the gate line is printed all the same
    apply(work, SUITE, tuple((f, new, old) for f, old, new in REGRESSION))
    clean = agentbench(work, "run", f"golden/{SUITE}", "--db", "other.duckdb", "--no-report")
    assert clean.code == 0
    assert "gate: passed (no baseline compared: every counted trial must pass)" in clean.out


def test_a_suite_that_cannot_be_imported(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    apply(work, SUITE, BROKEN_IMPORT)
    seen = observe(work, monkeypatch, "run", f"golden/{SUITE}")
    agree(seen, "error", 2, "suite error:", "broken on purpose")
    assert "gate: passed" not in seen.out


def test_an_xpass_under_strict_xfail(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    apply(work, SUITE, LENIENT_XFAIL)
    lax = agentbench(work, "run", f"golden/{SUITE}", "--no-report", "--db", "lax.duckdb")
    assert lax.code == 0 and "XPASS, passed unexpectedly (reported;" in lax.out
    seen = observe(work, monkeypatch, "run", f"golden/{SUITE}", "--strict-xfail")
    agree(seen, "failed", 1, "sre/forecast-not-available", "(XPASS, strict)")
    assert "XPASS: marked xfail, and passed (gating in a suite with strict_xfail: true" in seen.out


def killed_run(work: Path, *args: str) -> None:
    """`agentbench run` of the suite in a process of its own, killed part way (KILL_SWITCH)."""
    environment = {k: v for k, v in os.environ.items() if k != "AGENTBENCH_DB"}
    done = subprocess.run(
        [sys.executable, "-m", "agentbench", "run", f"golden/{SUITE}", "--concurrency", "1",
         "--no-report", *args],
        cwd=work, env={**environment, "KILL_AT_LATENCIES": "1"}, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == -signal.SIGKILL, done.stdout + done.stderr


def test_an_eval_that_did_not_finish(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    apply(work, SUITE, KILL_SWITCH)
    git(work, "commit", "-qam", "a kill switch")  # a resumed eval is one version of the code
    killed_run(work)
    # reported before anything judged it: no verdict was kept, and the page does not pass it
    later = agentbench(work, "report", "latest", "--report-dir", "out/later")
    assert later.code == 0, later.err
    banner = " ".join(_banner(Path(later.out.strip().rsplit(": ", 1)[1])).split())
    assert "Gate ERROR" in banner and "exit code 3" in banner and UNFINISHED.search(banner)
    assert "no verdict was kept with this eval" in banner
    seen = observe(work, monkeypatch, "gate", "latest")
    agree(seen, "error", 3, "The eval did not finish", "planned trials have no result",
          "--resume eval_")  # fmt: skip
    found = UNFINISHED.search(seen.terminal)
    assert found, seen.terminal
    held = int(re.search(r"^eval \S+: \d+ cases, (\d+) trials", seen.out, re.MULTILINE)[1])
    assert int(found[1]) == PLANNED - held and 0 < held < PLANNED
    command = shlex.split(found[2])
    eval_id = command[command.index("--resume") + 1]
    # resumed, it runs the selection it started with, or nothing
    for option, said in (
        (("--filter", "status-*"), "it ran with no --filter; this is --filter 'status-*'"),
        (("--trials", "2"), "it ran with no --trials (each suite's own); this is --trials 2"),
    ):
        refused = agentbench(work, "run", f"golden/{SUITE}", "--resume", eval_id, *option)
        assert refused.code == 2 and f"--resume {eval_id}: {said} (" in refused.err, refused.err
    # never the baseline found on its own
    fresh = agentbench(work, "run", f"golden/{SUITE}", "--no-report")
    assert fresh.code == 0 and f"passed over {eval_id} (it did not finish)" in fresh.out
    # the command the verdict named runs the rest: one eval of every planned trial, passing
    done = agentbench(work, *command[1:], "--no-report")
    assert done.code == 0 and f"{held} resumed" in done.out, done.out + done.err
    gated = agentbench(work, "gate", eval_id, "--no-report")
    assert gated.code == 0 and f"eval {eval_id}: {PLANNED} cases, {PLANNED} trials" in gated.out


def test_a_resumed_eval(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    apply(work, SUITE, (*REGRESSION, *KILL_SWITCH))
    git(work, "commit", "-qam", "regression")  # a resumed eval is one version of the code
    killed_run(work, "--eval-id", "eval_resumable")
    seen = observe(work, monkeypatch, "run", f"golden/{SUITE}", "--resume", "eval_resumable")
    agree(seen, "failed", 1, "passed in the baseline and fails now")
    assert "resumed" in seen.out


def test_against_a_ref(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    apply(work, SUITE, REGRESSION)
    git(work, "commit", "-qam", "regression")
    seen = observe(work, monkeypatch, "run", f"golden/{SUITE}", "--against", "HEAD~1")
    agree(seen, "failed", 1, "passed in the baseline and fails now")
    assert "(--against: the suites run at that ref)" in seen.out


def test_one_shard_run_on_its_own(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = observe(
        work, monkeypatch, "run", f"golden/{SUITE}", "--shard", "1/2", "--db", "s.duckdb"
    )
    agree(seen, "passed", 0, "shard 1/2 alone", "`agentbench gate`")
    refused = agentbench(work, "run", f"golden/{SUITE}", "--shard", "1/2", "--baseline", "latest")
    assert refused.code == 2 and "`agentbench gate EVAL_ID --baseline …`" in refused.err


def test_a_merged_eval_lacking_a_shard(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for k in (1, 3):
        done = agentbench(work, "run", f"golden/{SUITE}", "--shard", f"{k}/3", "--no-report",
                          "--db", f"s{k}.duckdb")  # fmt: skip
        assert done.code == 0, done.err
    merged = agentbench(work, "merge", "s1.duckdb", "s3.duckdb", "--into", "m.duckdb")
    assert merged.code == 0 and "missing 2/3" in merged.out
    # reported before it is gated (a merge drops the shards' verdicts): not "Gate passed"
    later = agentbench(work, "report", "latest", "--db", "m.duckdb", "--report-dir", "out/later")
    assert later.code == 0, later.err
    banner = " ".join(_banner(Path(later.out.strip().rsplit(": ", 1)[1])).split())
    assert "Gate FAILED" in banner and "it lacks shard(s) 2/3 (it holds 1/3, 3/3)" in banner
    seen = observe(work, monkeypatch, "gate", "latest", "--db", "m.duckdb")
    agree(seen, "failed", 1, "The eval is partial: it lacks shard(s) 2/3 (it holds 1/3, 3/3)")


def test_an_unmerged_shard_store_gated(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    done = agentbench(work, "run", f"golden/{SUITE}", "--shard", "2/3", "--no-report",
                      "--db", "s2.duckdb")  # fmt: skip
    assert done.code == 0, done.err
    seen = observe(work, monkeypatch, "gate", "latest", "--db", "s2.duckdb")
    agree(seen, "failed", 1, "it lacks shard(s) 1/3, 3/3 (it holds 2/3)")
    # a report made later opens with the verdict the eval was last judged with
    later = agentbench(work, "report", "latest", "--db", "s2.duckdb", "--report-dir", "later")
    assert later.code == 0, later.err
    banner = _banner(Path(later.out.strip().rsplit(": ", 1)[1]))
    assert "Gate FAILED" in banner and "it lacks shard(s) 1/3, 3/3" in banner
    assert "this is the verdict `agentbench run` or `agentbench gate` reached at" in banner


def test_no_runnable_suite_still_says_the_verdict(work: Path) -> None:
    bad = work / "golden" / "bad"
    bad.mkdir()
    (bad / "suite.yaml").write_text("name: bad\nagent: nope\n")
    ran = agentbench(work, "run", "golden/bad")
    assert ran.code == 2
    assert "gate: ERROR (exit 2)\n  - suite error: suite golden/bad" in ran.err, ran.err


def test_a_case_that_could_not_run_is_not_called_failing(
    work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (work / "replays" / SUITE / "status-prod-eu.yaml").unlink()  # it passed in the baseline
    seen = observe(work, monkeypatch, "run", f"golden/{SUITE}")
    gone = "sre/status-prod-eu (golden/sre/cases/status.yaml:2) could not run (trial 1)"
    agree(seen, "error", 3, gone)
    reasons = " ".join(seen.verdict["reasons"])
    for text in (seen.out, reasons, seen.junit_text, seen.summary_md, seen.banner):
        assert "fails now" not in text and "regressed" not in text, text
    assert reasons.count("sre/status-prod-eu (") == 1  # said once, as an error
    assert "\ncould not run (1):\n  sre/status-prod-eu trial 1" in seen.out
    assert "\nfailing (" not in seen.out
    assert re.search(r"suite +cases +passed +failed +errors +xfail", seen.out), seen.out
    assert "could not run now (not judged) (1):" in seen.out  # the comparison's word
    assert "### Could not run (1)" in seen.summary_md and "### Failing" not in seen.summary_md


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_live_outage_is_never_the_baseline(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dead = f"http://127.0.0.1:{closed_port()}/v1"
    outage = agentbench(work, "run", f"golden/{SUITE}", "--live", "--base-url", dead, "--model",
                        "m", "--concurrency", "16", "--fail-under", "0", "--no-report")  # fmt: skip
    # --fail-under 0 does not absorb it: the live model failed, so nothing was judged
    assert outage.code == 3, outage.out + outage.err
    assert "gate: ERROR (exit 3)\n  - sre/" in outage.out and "the live model failed" in outage.out
    live = re.search(r"^eval (\S+):", outage.out, re.MULTILINE)[1]
    apply(work, SUITE, REGRESSION)
    seen = observe(work, monkeypatch, "run", f"golden/{SUITE}")
    # judged against the replayed baseline, never against the cases the outage could not run
    agree(seen, "failed", 1, "passed in the baseline and fails now")
    assert f"passed over {live} (a live eval, and this one is replayed)" in seen.out


def test_a_one_suite_eval_is_not_the_baseline_of_two(
    work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = "customer_service"
    shutil.copytree(ROOT / "golden" / other, work / "golden" / other, ignore=_generated)
    shutil.copytree(ROOT / "replays" / other, work / "replays" / other)
    git(work, "add", "-A")
    git(work, "commit", "-qm", "a second suite")
    whole = agentbench(work, "run", "golden/", "--no-report")
    assert whole.code == 0, whole.out + whole.err
    one = agentbench(work, "run", f"golden/{SUITE}", "--no-report")  # newer, of the same code
    assert one.code == 0, one.out + one.err
    one_id = re.search(r"^eval (\S+):", one.out, re.MULTILINE)[1]
    apply(work, other, (edit('"A17": {"total": 42.5', '"A17": {"total": 45.0'),))
    seen = observe(work, monkeypatch, "run", "golden/")
    agree(seen, "failed", 1, "customer_service/refund", "passed in the baseline and fails now")
    assert f"passed over {one_id} (it ran 1 of this eval's 2 suites, not {other})" in seen.out


def test_summary_md_naming_the_step_summary_writes_it_once(
    work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    step = work / "out" / "step.md"
    step.parent.mkdir()
    step.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    ran = agentbench(work, "run", f"golden/{SUITE}", "--no-report", "--summary-md", "out/step.md")
    assert ran.code == 0, ran.out + ran.err
    text = step.read_text()
    assert text.startswith("earlier step\n## agentbench: ✅ passed\n")
    assert text.count("## agentbench") == 1
