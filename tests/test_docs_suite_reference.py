"""docs/reference/suite-files.md documents every key of suite.yaml and case files, and every
scorer with each of its parameters, as the schemas `agentbench schema` writes have them.

The schemas come from the models that validate the files, so a key added to a model (or a
scorer, or a scorer's parameter) without a row in the reference fails here, naming it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow  # a quarter-second or more a test: out of the quick loop

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "reference" / "suite-files.md"

# The page's section (its heading) that holds the table of each schema definition.
SECTIONS = {
    None: "## `suite.yaml`",  # the suite file itself
    "SuiteModel": "### `model`",
    "ToolsConfig": "### `tools`",
    "Serve": "### `serve`",
    "Fault": "### `serve`",
    "CommandAgent": "### Command agents",
    "Case": "## Cases",
}


@pytest.fixture(scope="module")
def schema(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("schema")
    subprocess.run(
        [sys.executable, "-m", "agentbench", "schema", "--out", str(out)],
        check=True,
        capture_output=True,
        cwd=ROOT,
    )
    return json.loads((out / "suite.schema.json").read_text(encoding="utf-8"))


def section(text: str, heading: str) -> str:
    """The page's text from `heading` to the next heading of the same or a higher level."""
    start = text.index(heading + "\n")
    level = heading.split(" ", 1)[0]
    rest = text[start + len(heading) :]
    higher = re.compile("^#{1," + str(len(level)) + "} ", re.M)
    ends = [m.start() for m in higher.finditer(rest)]
    return rest[: ends[0]] if ends else rest


def row(text: str, key: str) -> str | None:
    """The table row whose first cell is `key`, or None."""
    found = re.search(r"^\| `" + re.escape(key) + r"` \|.*$", text, re.M)
    return found.group(0) if found else None


def test_every_key_of_the_suite_and_case_files_has_a_row(schema: dict[str, Any]) -> None:
    text = PAGE.read_text(encoding="utf-8")
    missing = []
    for definition, heading in SECTIONS.items():
        model = schema if definition is None else schema["$defs"][definition]
        where = section(text, heading)
        missing += [
            f"{definition or 'suite.yaml'}.{key} (under {heading!r})"
            for key in model["properties"]
            if row(where, key) is None
        ]
    assert not missing, "keys without a row in docs/reference/suite-files.md: " + ", ".join(missing)


def test_model_settings_and_context_scopes_are_named(schema: dict[str, Any]) -> None:
    text = PAGE.read_text(encoding="utf-8")
    settings = row(section(text, "### `model`"), "settings") or ""
    context = row(section(text, "## Cases"), "context") or ""
    missing = [
        f"model.settings.{key}"
        for key in schema["$defs"]["ModelSettings"]["properties"]
        if f"`{key}`" not in settings
    ] + [
        f"context.{scope}"
        for scope in schema["$defs"]["CaseContext"]["properties"]
        if scope not in context
    ]
    assert not missing, "not named in docs/reference/suite-files.md: " + ", ".join(missing)


def test_every_scorer_and_parameter_has_its_row(schema: dict[str, Any]) -> None:
    text = section(PAGE.read_text(encoding="utf-8"), "## Scorers")
    missing = []
    for alternative in schema["$defs"]["Expectation"]["oneOf"]:
        for scorer in alternative.get("properties", {}):
            found = row(text, scorer)
            if found is None:
                missing.append(scorer)
                continue
            params = schema["$defs"].get(f"{scorer}_params", {}).get("properties", {})
            missing += [f"{scorer}.{p}" for p in params if f"`{p}`" not in found]
    assert not missing, "scorers or parameters missing from the Scorers table: " + ", ".join(
        missing
    )
