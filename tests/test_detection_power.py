"""The detection-power benchmark: its mutations apply to today's tree, a mutation whose text is
gone fails loudly, and one real run through the CLI scores a caught change and a silent rewrite.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))

from detection_power import check_mutations, copy_tree  # noqa: E402
from mutation_model import (  # noqa: E402
    Expect,
    Flag,
    Mutation,
    MutationNotApplicableError,
    Outcome,
    apply,
    flags,
)
from mutations import MUTATIONS  # noqa: E402

pytestmark = pytest.mark.slow  # mutated suites run through the real CLI, seconds each


def test_every_mutation_applies_to_the_tree() -> None:
    check_mutations(MUTATIONS)
    changing = [m for m in MUTATIONS if not m.equivalent]
    assert len(changing) >= 40 and len(MUTATIONS) - len(changing) >= 8


def test_a_mutation_whose_text_is_gone_names_itself_and_its_file(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("x = 1\nx = 1\n")
    gone = Mutation("gone", "m.py", "y = 2", "y = 3", "why", equivalent=True)
    twice = Mutation("twice", "m.py", "x = 1", "x = 2", "why", equivalent=True)
    with pytest.raises(MutationNotApplicableError, match=r"mutation gone: m.py .* 0 times"):
        apply(gone, tmp_path)
    with pytest.raises(MutationNotApplicableError, match=r"mutation twice: m.py .* 2 times"):
        apply(twice, tmp_path)
    assert (tmp_path / "m.py").read_text() == "x = 1\nx = 1\n"


def test_a_mutation_must_say_what_it_expects() -> None:
    with pytest.raises(ValueError, match="mutation vague"):
        Mutation("vague", "m.py", "a", "b", "why")


def test_localised_needs_every_expected_case_at_its_class_and_step() -> None:
    mutation = Mutation(
        "m",
        "f.py",
        "a",
        "b",
        "why",
        (Expect("s/one", "tool_result_changed", 1), Expect("s/two", "request_drift", 2)),
    )
    right = [
        Flag("s/one", "newly_failing", ("tool_result_changed", 1)),
        Flag("s/two", "behaviour_changed", ("request_drift", 2)),
    ]
    assert Outcome(mutation, right).localised
    late = [right[0], Flag("s/two", "behaviour_changed", ("request_drift", 3))]
    assert Outcome(mutation, late).caught and not Outcome(mutation, late).localised
    renamed = [right[0], Flag("s/two", "behaviour_changed", ("extra_step", 2))]
    assert Outcome(mutation, renamed).right_step and not Outcome(mutation, renamed).localised
    assert not Outcome(mutation, []).caught


def test_flags_reads_the_run_json_and_counts_suite_errors() -> None:
    document = {
        "comparison": {
            "cases": [
                {"suite": "s", "case_id": "a", "kind": "unchanged", "divergences": []},
                {
                    "suite": "s",
                    "case_id": "b",
                    "kind": "behaviour_changed",
                    "divergences": [{"class": "tool_args_changed", "step": 1}],
                    "reasons": [],
                },
            ]
        },
        "suite_errors": ["golden/x/suite.yaml: bad"],
    }
    found = flags(document)
    assert [(f.case, f.kind, f.first) for f in found] == [
        ("s/b", "behaviour_changed", ("tool_args_changed", 1)),
        ("suite", "suite_error", None),
    ]


def test_the_copy_leaves_out_compiled_files_and_stores(tmp_path: Path) -> None:
    root = copy_tree(tmp_path / "copy")
    assert (root / "agentbench" / "__init__.py").is_file()
    assert (root / "replays").is_dir() and (root / "golden").is_dir()
    assert not list(root.rglob("__pycache__"))


def detection_power(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`benchmarks/detection_power.py ARGS` as a user runs it."""
    command = [sys.executable, str(BENCH / "detection_power.py"), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


def test_one_caught_mutation_and_one_silent_rewrite_through_the_cli() -> None:
    """The whole journey: copy, baseline, mutate, `agentbench run --baseline`, restore, score."""
    done = detection_power(
        *("--only", "refund-tier-threshold", "--only", "eq-rename-cut"),
        # The suite the caught one changes: the journey, not every suite.
        *("--suite", "customer_service", "--json"),
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    by_id = {m["id"]: m for m in document["mutations"]}
    caught = by_id["refund-tier-threshold"]
    assert caught["caught"] and caught["localised"], caught
    assert caught["expected"][0]["got"] == "tool_result_changed@2"
    assert not by_id["eq-rename-cut"]["caught"]
    assert document["rates"]["caught_pct"] == 100.0
    assert document["rates"]["false_positive_pct"] == 0.0


def test_a_mutation_expected_in_a_suite_left_out_is_refused() -> None:
    mutation = ("--only", "refund-tier-threshold")
    done = detection_power(*mutation, "--suite", "sre", "--suite", "no_such")
    assert done.returncode == 2 and "no suite named no_such in golden/" in done.stderr
    done = detection_power(*mutation, "--suite", "sre", "--list")
    assert done.returncode == 2
    assert "refund-tier-threshold expect cases of suites left out by --suite" in done.stderr


def test_unknown_mutation_is_refused() -> None:
    done = detection_power("--only", "no-such", "--list")
    assert done.returncode == 2 and "no mutation named no-such" in done.stderr
