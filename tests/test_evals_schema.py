"""JSON Schemas for editors: valid, in step with the loader, and written by `agentbench schema`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator

from agentbench.cli import main
from agentbench.evals.suites.dataset import case_json_schema, suite_json_schema
from tests.test_evals_dataset import CASES_YAML, SUITE

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def suite_validator() -> Draft202012Validator:
    schema = suite_json_schema()
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


@pytest.fixture(scope="module")
def case_validator() -> Draft202012Validator:
    schema = case_json_schema()
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def errors(validator: Draft202012Validator, document) -> list[str]:
    return ["/".join(str(p) for p in e.absolute_path) for e in validator.iter_errors(document)]


def test_files_the_loader_accepts_validate(suite_validator, case_validator) -> None:
    assert errors(suite_validator, yaml.safe_load(SUITE)) == []
    assert errors(case_validator, yaml.safe_load(CASES_YAML)) == []
    assert errors(case_validator, {"id": "one", "input": "hi"}) == []
    assert errors(case_validator, {"cases": [{"id": "one", "inputs": ["a", "b"]}]}) == []


def test_every_scorer_is_a_one_key_alternative(suite_validator) -> None:
    defs = suite_json_schema()["$defs"]
    keys = {
        next(iter(alternative["properties"]))
        for alternative in defs["Expectation"]["oneOf"]
        if alternative.get("type") == "object"
    }
    assert {"tool_called", "trajectory", "llm_judge", "custom", "output_json_schema"} <= keys
    tool_called = defs["tool_called_params"]
    assert tool_called["properties"]["args"]["description"].startswith("Arguments the call")


@pytest.mark.parametrize(
    ("expectation", "accepted"),
    [
        ({"output_contains": "Paris"}, True),  # shorthand
        ({"output_contains": ["a", "b"]}, True),
        ("stop_reason", True),  # a bare name: no required parameters
        ("tool_called", False),  # needs a name
        ({"tool_called": {"name": "x", "args": {"city": "Paris"}}}, True),
        ({"tool_called": {"nam": "x"}}, False),
        ({"tool_caled": "x"}, False),
        ({"output_equals": {"city": "Paris"}}, False),  # a mapping is the parameters
        ({"output_equals": {"value": {"city": "Paris"}}}, True),
        ({"stop_reason": "finished"}, False),
        ({"tool_called": "x", "args": {}}, False),  # two keys
    ],
)
def test_expectations_in_the_schema(suite_validator, expectation, accepted) -> None:
    document = {"agent": "a:b", "scorers": [expectation]}
    assert (errors(suite_validator, document) == []) is accepted


def test_a_case_needs_exactly_one_kind_of_input(case_validator) -> None:
    assert errors(case_validator, {"id": "x"}) != []
    assert errors(case_validator, {"id": "x", "input": "a", "inputs": ["b"]}) != []


def test_schema_command_writes_both_files(tmp_path: Path, capsys) -> None:
    assert main(["schema", "--out", str(tmp_path / "schema")]) == 0
    written = sorted(p.name for p in (tmp_path / "schema").iterdir())
    assert written == ["case.schema.json", "suite.schema.json"]
    suite = json.loads((tmp_path / "schema" / "suite.schema.json").read_text())
    assert suite == suite_json_schema()
    assert "wrote" in capsys.readouterr().out


def test_schema_command_defaults_to_schema_in_the_current_folder(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["schema"]) == 0
    assert (tmp_path / "schema" / "case.schema.json").is_file()


def test_shipped_schemas_are_what_the_schema_command_writes(tmp_path: Path) -> None:
    """schema/*.json follow the models; after changing one, run `agentbench schema`."""
    # A fresh interpreter: scorers registered by other tests must not leak into the files.
    written = tmp_path / "schema"
    done = subprocess.run(
        [sys.executable, "-m", "agentbench", "schema", "--out", str(written)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    for name in ("suite.schema.json", "case.schema.json"):
        shipped = json.loads((ROOT / "schema" / name).read_text())
        assert shipped == json.loads((written / name).read_text()), f"regenerate schema/{name}"
    suite = json.loads((written / "suite.schema.json").read_text())
    assert suite["properties"]["plugins"]["items"]["type"] == "string"


def test_plugins_in_the_schema_and_plugin_scorers_with_schema_plugin(
    tmp_path: Path, suite_validator, monkeypatch
) -> None:
    document = {"agent": "a:b", "plugins": ["checks.scorers", "local.py"], "scorers": []}
    assert errors(suite_validator, document) == []
    assert errors(suite_validator, {**document, "plugins": ["checks.scorers:polite"]}) != []
    # Editors learn a project's own scorers from `agentbench schema --plugin`.
    (tmp_path / "schema_plugin_checks.py").write_text(
        "from agentbench.evals import scorer\n\n\n@scorer\n"
        "def polite(ctx, min_words: int = 1) -> bool:\n    return True\n"
    )
    monkeypatch.chdir(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "agentbench", "schema", "--plugin", "schema_plugin_checks"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    with_plugin = Draft202012Validator(
        json.loads((tmp_path / "schema" / "suite.schema.json").read_text())
    )
    assert errors(with_plugin, {"agent": "a:b", "scorers": [{"polite": {"min_words": 2}}]}) == []
    assert errors(with_plugin, {"agent": "a:b", "scorers": [{"polite": {"min_word": 2}}]}) != []
    broken = subprocess.run(
        [sys.executable, "-m", "agentbench", "schema", "--plugin", "no_such_plugin_module"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert broken.returncode == 2
    assert (
        "--plugin 'no_such_plugin_module': importing it raised ModuleNotFoundError" in broken.stderr
    )
