"""Verdicts under load: do the shipped suites give the same verdicts on a busy machine?

    python benchmarks/under_load.py [--runs 10] [--hog-factor 4] [--concurrency C]
                                    [--ref REF] [--no-ray] [--json]

The package, the golden suites and their cassettes are copied to a temporary directory (the
working tree, its store and its reports/ are never touched; with `--ref`, as committed at that
git ref rather than as they are in the working tree) and `agentbench run golden/` records a
baseline eval there on the machine as it is. Then a CPU hog starts — busy-loop Python
processes, `--hog-factor` times the cores — and the unchanged suites run `--runs` times with
the local executor and once with `--executor ray`, each against that baseline. Printed per
run: the exit code, every verdict change (a case whose status or comparison kind differs from
the baseline's, with the reasons) and every suite error; then the totals. The target is none
of either. Agent settings: each suite's agent as its suite defines it, unchanged.

It is a measurement: the exit code is 0 whatever it finds, 2 for a bad option, 3 when the
baseline itself cannot be recorded (nothing could be measured). The hog's processes end with
this script: they are killed by id when it finishes, and each one leaves by itself when its
parent is gone (a SIGKILLed script leaves no busy loop behind).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from detection_power import COPIED, REPO, _env, check_runs_copy, copy_tree

RUN_TIMEOUT_S = 1800  # one loaded run of every suite; Ray starts slowly beside a hog
# Each hog process loops here, and leaves as soon as the process that started it is gone.
_BUSY_LOOP = """
import os, sys
parent = int(sys.argv[1])
while os.getppid() == parent:
    for _ in range(200_000):
        pass
"""


@dataclass
class Change:
    """One case whose verdict differs from the baseline's."""

    case: str
    baseline: str  # its status in the baseline
    current: str  # its status in this run
    kind: str  # the comparison's kind for it ("unchanged" if only the status moved)
    reasons: list[str] = field(default_factory=list)

    def line(self) -> str:
        status = (
            f"{self.baseline} → {self.current}" if self.baseline != self.current else self.current
        )
        why = f": {'; '.join(self.reasons)}" if self.reasons else ""
        return f"{self.case} [{status}, {self.kind}]{why}"


@dataclass
class Run:
    """One loaded run of the suites against the baseline."""

    number: int
    executor: str
    exit_code: int | None  # None: it did not finish within RUN_TIMEOUT_S
    seconds: float
    changes: list[Change] = field(default_factory=list)
    suite_errors: list[str] = field(default_factory=list)
    failure: str | None = None  # no eval came out of it: why

    def line(self) -> str:
        code = "timed out" if self.exit_code is None else f"exit {self.exit_code}"
        head = (
            f"run {self.number} ({self.executor}, {self.seconds:.0f} s): {code}, "
            f"{len(self.changes)} verdict changes, {len(self.suite_errors)} suite errors"
        )
        details = [f"    change: {c.line()}" for c in self.changes]
        details += [f"    suite error: {e}" for e in self.suite_errors]
        if self.failure:
            details.append(f"    no result: {self.failure}")
        return "\n".join([head, *details])


class RunFailedError(RuntimeError):
    """The baseline run recorded no eval: nothing can be measured."""


class BadRefError(ValueError):
    """--ref names nothing git can archive."""


def run_golden(root: Path, db: Path, *extra: str) -> tuple[int | None, dict[str, Any] | None, str]:
    """`agentbench run golden/ --json` in the copy at `root`: exit code (None when it had to be
    stopped), the JSON document (None if it printed none), and the last line of its stderr."""
    command = [sys.executable, "-m", "agentbench", "run", "golden/", "--db", str(db), "--json"]
    command += ["--no-report", *extra]
    process = subprocess.Popen(
        command,
        cwd=root,
        env=_env(root),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a run stopped at the timeout takes its Ray processes along
    )
    try:
        out, err = process.communicate(timeout=RUN_TIMEOUT_S)
        code: int | None = process.returncode
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        code = None
    tail = (err.strip().splitlines() or ["no output"])[-1]
    try:
        return code, json.loads(out), tail
    except json.JSONDecodeError:
        return code, None, tail


def verdict_changes(baseline: dict[str, Any], current: dict[str, Any]) -> list[Change]:
    """Cases whose status or comparison kind differs from the baseline's."""
    before = _statuses(baseline)
    after = _statuses(current)
    compared_cases = (current.get("comparison") or {}).get("cases", ())
    kinds = {f"{c['suite']}/{c['case_id']}": c for c in compared_cases}
    changes = []
    for case in sorted(before.keys() | after.keys() | kinds.keys()):
        compared = kinds.get(case, {})
        kind = compared.get("kind", "unchanged")
        was, now = before.get(case, "absent"), after.get(case, "absent")
        if kind != "unchanged" or was != now:
            changes.append(Change(case, was, now, kind, list(compared.get("reasons", ()))))
    return changes


def judged(run: Run, baseline: dict[str, Any], document: dict[str, Any] | None, tail: str) -> Run:
    """`run` with what its JSON document shows against the baseline's."""
    if document is None or "results" not in document:
        # No eval to compare (exit 3, say): its error, not every case listed as absent.
        run.failure = (document or {}).get("error", {}).get("message", tail)
        return run
    run.changes = verdict_changes(baseline, document)
    run.suite_errors = [str(e) for e in document.get("suite_errors") or ()]
    return run


def _statuses(document: dict[str, Any]) -> dict[str, str]:
    """Each case's status; a case of several trials reads as the trials' statuses joined."""
    by_case: dict[str, list[str]] = {}
    for result in document.get("results", ()):
        by_case.setdefault(f"{result['suite']}/{result['case_id']}", []).append(result["status"])
    return {case: "/".join(statuses) for case, statuses in by_case.items()}


@contextmanager
def cpu_hog(processes: int) -> Iterator[list[int]]:
    """`processes` busy loops for the duration; their ids, killed by id at the end."""
    hogs: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(processes):
            hogs.append(
                subprocess.Popen(
                    [sys.executable, "-c", _BUSY_LOOP, str(os.getpid())],
                    stdin=subprocess.DEVNULL,
                    # A session each: where the kernel groups CPU time by session (autogroup),
                    # one session of hogs would weigh as much as one other process, not as N.
                    start_new_session=True,
                )
            )
        yield [hog.pid for hog in hogs]
    finally:
        for hog in hogs:
            hog.kill()
        for hog in hogs:
            hog.wait()


def copy_at(ref: str, dest: Path) -> Path:
    """The parts of the repository a golden run reads, as committed at git `ref`."""
    dest.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "archive", "--format=tar", ref, *COPIED], cwd=REPO, capture_output=True
    )
    if archive.returncode != 0:
        raise BadRefError(f"--ref {ref}: {archive.stderr.decode().strip()}")
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return dest


def measure(
    runs: int, hog_factor: int, concurrency: int | None, ray: bool, ref: str | None
) -> dict[str, Any]:
    """The baseline, then every loaded run against it."""
    extra = ("--concurrency", str(concurrency)) if concurrency else ()
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory(prefix="under-load-") as tmp:
        workdir = Path(tmp)
        root = copy_tree(workdir / "tree") if ref is None else copy_at(ref, workdir / "tree")
        check_runs_copy(root)
        base_db = workdir / "base.duckdb"
        code, baseline, tail = run_golden(root, base_db, *extra)
        if baseline is None or "eval_id" not in baseline:
            error = (baseline or {}).get("error", {}).get("message", tail)
            raise RunFailedError(f"the baseline run recorded no eval (exit {code}): {error}")
        report: dict[str, Any] = {
            "commit": _commit(ref),
            "cores": cores,
            "hog_processes": hog_factor * cores,
            "concurrency": concurrency,
            "baseline": {"eval_id": baseline["eval_id"], "exit_code": code},
            "runs": [],
        }
        plan = [("local", ())] * runs + ([("ray", ("--executor", "ray"))] if ray else [])
        with cpu_hog(hog_factor * cores):
            for number, (executor, flags) in enumerate(plan, start=1):
                db = workdir / f"run{number}.duckdb"
                shutil.copy2(base_db, db)
                started = time.monotonic()
                code, document, tail = run_golden(
                    root, db, "--baseline", baseline["eval_id"], *extra, *flags
                )
                run = Run(number, executor, code, time.monotonic() - started)
                report["runs"].append(judged(run, baseline, document, tail))
                print(run.line(), file=sys.stderr, flush=True)
                db.unlink(missing_ok=True)
                shutil.rmtree(db.with_name(db.name + ".spool"), ignore_errors=True)
    return report


def _commit(ref: str | None) -> str:
    """The commit measured; without a ref, whether the working tree (which was copied)
    differed from HEAD."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True)
        return done.stdout.strip()

    commit = git("rev-parse", "--short", f"{ref or 'HEAD'}^{{commit}}") or "unknown"
    if ref is None and git("status", "--porcelain", "--", *COPIED):
        return f"{commit} + the working tree's uncommitted changes"
    return commit


def totals(runs: Sequence[Run]) -> dict[str, int]:
    return {
        "runs": len(runs),
        "runs_with_exit_0": sum(1 for r in runs if r.exit_code == 0),
        "verdict_changes": sum(len(r.changes) for r in runs),
        "suite_errors": sum(len(r.suite_errors) for r in runs),
        "runs_without_result": sum(1 for r in runs if r.failure is not None),
    }


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="Loaded local runs (default 10).")
    parser.add_argument(
        "--hog-factor", type=int, default=4, help="Busy processes per core (default 4)."
    )
    parser.add_argument("--concurrency", type=int, metavar="C", help="agentbench run -n C.")
    parser.add_argument("--ref", help="Measure the tree as committed at this git ref.")
    parser.add_argument("--no-ray", action="store_true", help="Skip the --executor ray run.")
    parser.add_argument("--json", action="store_true", help="Print the results as JSON.")
    args = parser.parse_args(argv)
    for name, least in (("runs", 0), ("hog_factor", 1), ("concurrency", 1)):
        value = getattr(args, name)
        if value is not None and value < least:
            parser.error(f"--{name.replace('_', '-')} must be at least {least}, got {value}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    started = time.monotonic()
    try:
        report = measure(args.runs, args.hog_factor, args.concurrency, not args.no_ray, args.ref)
    except BadRefError as exc:
        print(f"under_load: {exc}", file=sys.stderr)
        return 2
    except RunFailedError as exc:
        print(f"under_load: {exc}", file=sys.stderr)
        return 3
    runs: list[Run] = report.pop("runs")
    report["totals"] = totals(runs)
    report["wall_s"] = round(time.monotonic() - started, 1)
    if args.json:
        print(json.dumps({**report, "runs": [asdict(r) for r in runs]}, indent=2))
        return 0
    print(
        f"commit {report['commit']}, {report['cores']} cores, hog of "
        f"{report['hog_processes']} busy processes, baseline {report['baseline']['eval_id']} "
        f"(exit {report['baseline']['exit_code']})"
    )
    for run in runs:
        print(run.line())
    t = report["totals"]
    print(
        f"totals over {t['runs']} runs: {t['verdict_changes']} verdict changes, "
        f"{t['suite_errors']} suite errors, {t['runs_with_exit_0']} exited 0, "
        f"{t['runs_without_result']} without a result ({report['wall_s']} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
