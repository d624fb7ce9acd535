"""JSON Schemas for suite.yaml and case files, for editors (yaml-language-server, VS Code).

They come from the same pydantic models that validate the files, with every scorer's params
model included as one-key `oneOf` alternatives, so an editor completes scorer names and then
their parameters. Reference them from a file with
`# yaml-language-server: $schema=../../schema/suite.schema.json`.
"""

from __future__ import annotations

from typing import Any

from agentbench.evals.scorers.schema import EXPECTATION_DEF, expectation_defs
from agentbench.evals.suites.case_models import Case
from agentbench.evals.suites.expectations import EXPECTATION_MARKER
from agentbench.evals.suites.suite_models import Suite

DIALECT = "https://json-schema.org/draft/2020-12/schema"


def suite_json_schema() -> dict[str, Any]:
    """The schema of a `suite.yaml` file."""
    schema = Suite.model_json_schema()
    # The name defaults to the folder's name, which the model cannot know.
    schema["required"] = [field for field in schema.get("required", []) if field != "name"]
    _case_rules(schema["$defs"]["Case"])
    return _finish(schema, "agentbench suite (suite.yaml)")


def case_json_schema() -> dict[str, Any]:
    """The schema of a case file: one case, a list of cases, or `{cases: [...]}`."""
    case = Case.model_json_schema()
    defs = case.pop("$defs", {})
    _case_rules(case)
    defs["Case"] = case
    cases = {"type": "array", "items": {"$ref": "#/$defs/Case"}}
    schema = {
        "$defs": defs,
        "anyOf": [
            {"$ref": "#/$defs/Case"},
            cases,
            {
                "type": "object",
                "properties": {"cases": cases},
                "required": ["cases"],
                "additionalProperties": False,
            },
        ],
    }
    return _finish(schema, "agentbench case file (cases/*.yaml)")


def _case_rules(case: dict[str, Any]) -> None:
    """What the models check in code: one kind of input, and context's plain-mapping form."""
    case["oneOf"] = [{"required": ["input"]}, {"required": ["inputs"]}]
    context = case["properties"]["context"]
    case["properties"]["context"] = {
        "description": context.get("description", ""),
        "anyOf": [
            {"$ref": context["$ref"]},
            {"type": "object", "description": "Session variables."},
        ],
    }


def _finish(schema: dict[str, Any], title: str) -> dict[str, Any]:
    schema["$defs"] = {**schema.get("$defs", {}), **expectation_defs()}
    finished = _replace_marker(schema)
    return {"$schema": DIALECT, "title": title, **finished}


def _replace_marker(value: Any) -> Any:
    if value == EXPECTATION_MARKER:
        return {"$ref": f"#/$defs/{EXPECTATION_DEF}"}
    if isinstance(value, dict):
        return {key: _replace_marker(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_replace_marker(item) for item in value]
    return value
