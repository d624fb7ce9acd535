"""Detection power: do the golden suites catch a behaviour change, and name it at its root?

    python benchmarks/detection_power.py [--only ID]... [--suite NAME]... [--list] [--json]
                                         [--workers 2]
    python benchmarks/detection_power.py --unchanged N [--concurrency C] [--load] [--json]

The package, the golden suites and their cassettes are copied to a temporary directory (the
working tree is never touched) and `agentbench run golden/` records a baseline eval there,
with PYTHONPATH pointing at the copy (the copy's code is checked to be the code that runs).
Each mutation of `benchmarks/mutations.py` is then applied to a copy of its own (an exact
substitution that fails loudly when its text is gone), the suites are run against that
baseline with `--baseline EVAL --json`, the file is restored, and the comparison is scored:

* caught — a behaviour-changing mutation made any case other than `unchanged` (newly failing,
  behaviour changed, a score or budget change…), or the run could not complete;
* localised — caught, and every expected case's first divergence has the expected class and
  step;
* false positive — an equivalent rewrite flagged anything.

Also printed: how many were caught at the right step whatever the class named there.

Agent settings: each suite's agent as its suite defines it; only a mutation changes one.

`--suite NAME` runs only those suites of `golden/` (every one by default): a quicker check of
the mutations that touch them; a chosen mutation expected to flag a case of another suite is
refused (exit 2), since it could only be missed.

`--unchanged N` runs the unmodified suites N times against the baseline instead (with
`--concurrency C`, and with `--load` two CPU burners alongside: stress-ng when installed) and
lists every run that flagged a case, with the case, its kind and the reason. It is a
measurement: the exit code is 0 whatever it finds (2 for a bad option or a broken mutation).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from queue import Queue
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mutation_model import (
    Flag,
    Mutation,
    MutationNotApplicableError,
    Outcome,
    apply,
    flags,
    write_source,
)
from mutations import MUTATIONS

REPO = Path(__file__).resolve().parent.parent
GOLDEN = REPO / "golden"
COPIED = ("agentbench", "golden", "replays", "pyproject.toml")
RUN_TIMEOUT_S = 600


def copy_tree(dest: Path) -> Path:
    """The parts of the repository a golden run reads, without compiled files or stores."""
    dest.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.duckdb.spool", "*.duckdb.wal")
    for name in COPIED:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, dest / name, ignore=ignore)
        else:
            shutil.copy2(source, dest / name)
    return dest


def _env(root: Path) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(root))
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY"):
        env.pop(name, None)  # replay only; and no CI summary written by a measurement
    return env


def check_runs_copy(root: Path) -> None:
    """The installed (editable) agentbench must not be what runs: the copy's package and
    golden suites have to be the ones imported."""
    probe = "import agentbench, golden; print(agentbench.__file__); print(golden.__file__)"
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=root,
        env=_env(root),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for module_file in out:
        if not Path(module_file).resolve().is_relative_to(root.resolve()):
            raise RuntimeError(f"{module_file} is imported instead of the copy under {root}")


def run_golden(root: Path, db: Path, suites: Sequence[str], *extra: str) -> dict[str, Any]:
    """`agentbench run golden/ --json` in the copy at `root` (only `golden/NAME` for each of
    `suites`, when any are named); the JSON document it printed."""
    paths = [f"golden/{name}" for name in suites] or ["golden/"]
    command = [sys.executable, "-m", "agentbench", "run", *paths, "--db", str(db), "--json"]
    command += ["--no-report", *extra]
    done = subprocess.run(
        command,
        cwd=root,
        env=_env(root),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )
    try:
        return json.loads(done.stdout)
    except json.JSONDecodeError:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RunFailedError(f"exit {done.returncode}: {tail}") from None


class RunFailedError(RuntimeError):
    """`agentbench run` printed no JSON document."""


class Baseline:
    """A copy of the tree with a recorded baseline eval; the store is copied for each run so
    every run compares with the same, untouched baseline."""

    def __init__(self, workdir: Path, suites: Sequence[str] = ()) -> None:
        self.workdir = workdir
        self.suites = tuple(suites)
        self.root = copy_tree(workdir / "base")
        check_runs_copy(self.root)
        self.db = workdir / "base.duckdb"
        document = run_golden(self.root, self.db, self.suites)
        self.eval_id: str = document["eval_id"]
        self.summary: dict[str, Any] = document["summary"]

    def compare(self, root: Path, name: str, *extra: str) -> dict[str, Any]:
        db = self.workdir / f"{name}.duckdb"
        shutil.copy2(self.db, db)
        try:
            return run_golden(root, db, self.suites, "--baseline", self.eval_id, *extra)
        finally:
            db.unlink(missing_ok=True)
            shutil.rmtree(db.with_name(db.name + ".spool"), ignore_errors=True)


def check_mutations(mutations: Sequence[Mutation]) -> None:
    """Every mutation applies to the current tree (in memory), before anything runs."""
    for mutation in mutations:
        path = REPO / mutation.file
        text = path.read_text() if path.is_file() else None
        count = text.count(mutation.old) if text is not None else None
        if count != 1:
            found = "no such file" if count is None else f"found {count} times"
            raise MutationNotApplicableError(
                f"mutation {mutation.id}: {mutation.file}: the text to replace is {found} "
                f"(must be exactly once): {mutation.old!r}"
            )


def measure(base: Baseline, mutations: Sequence[Mutation], workers: int) -> list[Outcome]:
    """Each mutation in one of `workers` copies of the tree: applied, run, restored."""
    slots: Queue[Path] = Queue()
    for number in range(workers):
        root = copy_tree(base.workdir / f"worker{number}")
        check_runs_copy(root)
        slots.put(root)

    def one(mutation: Mutation) -> Outcome:
        root = slots.get()
        original = apply(mutation, root)
        try:
            try:
                document = base.compare(root, f"{root.name}-{mutation.id}")
            except RunFailedError as failure:
                return Outcome(mutation, [], error=str(failure))
            return Outcome(mutation, flags(document), gate_failed=document.get("gate_failed"))
        finally:
            write_source(root / mutation.file, original)
            slots.put(root)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, mutations))


def rates(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    changing = [o for o in outcomes if not o.mutation.equivalent]
    equivalent = [o for o in outcomes if o.mutation.equivalent]
    caught = [o for o in changing if o.caught]
    localised = [o for o in caught if o.localised]
    right_step = [o for o in caught if o.right_step]
    false_positives = [o for o in equivalent if o.caught]

    def pct(part: list[Outcome], whole: list[Outcome]) -> float | None:
        return round(100 * len(part) / len(whole), 1) if whole else None

    return {
        "behaviour_changing": len(changing),
        "caught": len(caught),
        "caught_pct": pct(caught, changing),
        "localised": len(localised),
        "localised_pct": pct(localised, changing),
        "right_step": len(right_step),
        "right_step_pct": pct(right_step, changing),
        "equivalent": len(equivalent),
        "false_positives": len(false_positives),
        "false_positive_pct": pct(false_positives, equivalent),
    }


def misses(outcomes: Sequence[Outcome]) -> list[str]:
    found = []
    for o in outcomes:
        m = o.mutation
        if m.equivalent and o.caught:
            seen = o.error or ", ".join(f.describe() for f in o.flagged)
            found.append(f"{m.id}: equivalent rewrite flagged: {seen} ({m.why})")
        elif not m.equivalent and not o.caught:
            found.append(f"{m.id}: not caught; no case flagged ({m.why})")
        elif not m.equivalent and not o.localised:
            wrong = "; ".join(
                f"{e.case}: expected {e.describe()}, got {o.got(e.case)}" for e in m.expect
            )
            place = "right step, other class" if o.right_step else "wrong step"
            found.append(f"{m.id}: caught, not localised ({place}): {wrong} ({m.why})")
    return found


@contextmanager
def cpu_load(enabled: bool) -> Iterator[str | None]:
    """Two CPU burners for the duration (stress-ng when installed, else busy Python loops);
    ended by their own process ids."""
    if not enabled:
        yield None
        return
    stress = shutil.which("stress-ng")
    if stress:
        burners = [subprocess.Popen([stress, "--cpu", "2", "--quiet"])]
        how = "stress-ng --cpu 2"
    else:
        loop = "while True: pass"
        burners = [subprocess.Popen([sys.executable, "-c", loop]) for _ in range(2)]
        how = "2 busy-loop processes"
    try:
        yield how
    finally:
        for burner in burners:
            burner.terminate()
        for burner in burners:
            try:
                burner.wait(timeout=10)
            except subprocess.TimeoutExpired:
                burner.kill()


def unchanged_runs(base: Baseline, runs: int, concurrency: int | None) -> list[dict[str, Any]]:
    """`runs` runs of the unmodified suites against the baseline: what each flagged."""
    root = copy_tree(base.workdir / "unchanged")
    check_runs_copy(root)
    extra = ("--concurrency", str(concurrency)) if concurrency else ()
    found = []
    for number in range(1, runs + 1):
        started = time.monotonic()
        try:
            document = base.compare(root, f"unchanged{number}", *extra)
            flagged, error, eval_id = flags(document), None, document["eval_id"]
        except RunFailedError as failure:
            flagged, error, eval_id = [], str(failure), None
        found.append(
            {
                "run": number,
                "eval_id": eval_id,
                "seconds": round(time.monotonic() - started, 1),
                "error": error,
                "flagged": [_flag_dict(f) for f in flagged],
            }
        )
        print(f"run {number}/{runs}: {_run_line(found[-1])}", file=sys.stderr, flush=True)
    return found


def _flag_dict(flag: Flag) -> dict[str, Any]:
    return {"case": flag.case, "kind": flag.kind, "first": flag.first, "reasons": flag.reasons}


def _run_line(run: dict[str, Any]) -> str:
    if run["error"]:
        return f"run failed: {run['error']}"
    if not run["flagged"]:
        return f"nothing flagged ({run['seconds']} s)"
    parts = []
    for flag in run["flagged"]:
        first = f" first {flag['first'][0]}@{flag['first'][1]}" if flag["first"] else ""
        parts.append(f"{flag['case']} {flag['kind']}{first}: {'; '.join(flag['reasons'])}")
    return " | ".join(parts)


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", action="append", metavar="ID", help="Only this mutation.")
    parser.add_argument(
        "--suite",
        action="append",
        default=[],
        metavar="NAME",
        help="Only this suite of golden/ (repeatable; default: all).",
    )
    parser.add_argument("--list", action="store_true", help="List the mutations and stop.")
    parser.add_argument("--json", action="store_true", help="Print the results as JSON.")
    parser.add_argument("--workers", type=int, default=2, help="Mutations run at once.")
    parser.add_argument("--unchanged", type=int, metavar="N", help="N runs of unchanged code.")
    parser.add_argument("--concurrency", type=int, metavar="C", help="agentbench run -n C.")
    parser.add_argument("--load", action="store_true", help="Burn 2 CPUs meanwhile.")
    return parser.parse_args(argv)


def _suites_problem(suites: Sequence[str], chosen: Sequence[Mutation]) -> str | None:
    """Why `--suite` cannot measure these mutations (an unknown suite, or a mutation expected
    to flag a case of a suite left out), or None."""
    unknown = sorted(s for s in suites if not (GOLDEN / s / "suite.yaml").is_file())
    if unknown:
        return f"no suite named {', '.join(unknown)} in golden/"
    outside = sorted(
        m.id for m in chosen for e in m.expect if e.case.split("/", 1)[0] not in suites
    )
    if outside:
        return f"{', '.join(outside)} expect cases of suites left out by --suite"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    chosen = list(MUTATIONS)
    if args.only:
        known = {m.id for m in MUTATIONS}
        unknown = sorted(set(args.only) - known)
        if unknown:
            print(f"no mutation named {', '.join(unknown)} (see --list)", file=sys.stderr)
            return 2
        chosen = [m for m in MUTATIONS if m.id in args.only]
    if args.suite:
        problem = _suites_problem(args.suite, chosen)
        if problem:
            print(problem, file=sys.stderr)
            return 2
    if args.list:
        for m in chosen:
            what = (
                "equivalent"
                if m.equivalent
                else ", ".join(f"{e.case} {e.describe()}" for e in m.expect)
            )
            print(f"{m.id:<28} {m.file}: {m.why} [{what}]")
        return 0
    check_mutations(chosen)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="detection-power-") as tmp:
        base = Baseline(Path(tmp), args.suite)
        if args.unchanged:
            with cpu_load(args.load) as load:
                runs = unchanged_runs(base, args.unchanged, args.concurrency)
            report = {
                "mode": "unchanged",
                "runs": len(runs),
                "concurrency": args.concurrency,
                "load": load,
                "runs_flagging": sum(1 for r in runs if r["flagged"] or r["error"]),
                "flagged": [r for r in runs if r["flagged"] or r["error"]],
                "wall_s": round(time.monotonic() - started, 1),
            }
            _show_unchanged(report, args.json)
            return 0
        outcomes = measure(base, chosen, max(1, args.workers))
    wall = round(time.monotonic() - started, 1)
    if args.json:
        document = {
            "baseline": base.summary,
            "mutations": [o.as_dict() for o in outcomes],
            "rates": rates(outcomes),
            "misses": misses(outcomes),
            "wall_s": wall,
        }
        print(json.dumps(document, indent=2))
        return 0
    for outcome in outcomes:
        print(outcome.line())
    r = rates(outcomes)
    print()
    print(f"caught:         {r['caught']}/{r['behaviour_changing']} = {r['caught_pct']}%")
    print(f"localised:      {r['localised']}/{r['behaviour_changing']} = {r['localised_pct']}%")
    print(
        f"  at the right step, whatever the class: {r['right_step']}/"
        f"{r['behaviour_changing']} = {r['right_step_pct']}%"
    )
    print(f"false positive: {r['false_positives']}/{r['equivalent']} = {r['false_positive_pct']}%")
    print(f"wall time:      {wall} s")
    found = misses(outcomes)
    print(f"\nmisses ({len(found)}):" if found else "\nno misses")
    for line in found:
        print(f"  {line}")
    return 0


def _show_unchanged(report: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(report, indent=2))
        return
    print(
        f"{report['runs_flagging']} of {report['runs']} unchanged runs flagged a case "
        f"(concurrency {report['concurrency'] or 'default'}, load: {report['load'] or 'none'}, "
        f"{report['wall_s']} s)"
    )
    for run in report["flagged"]:
        print(f"  run {run['run']} ({run['eval_id']}): {_run_line(run)}")


if __name__ == "__main__":
    sys.exit(main())
