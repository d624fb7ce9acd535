"""JSON Schema of one expectation (`{scorer_name: params}`), from the registered params models.

Every scorer becomes a one-key object alternative under `oneOf`, so an editor completes the
scorer names and then that scorer's parameters; a scorer with a shorthand also accepts the bare
value (`output_contains: Paris`), and one without required parameters its bare name.
"""

from __future__ import annotations

import copy
from typing import Any

from agentbench.evals.scorers.registry import SCORERS, ScorerType

EXPECTATION_DEF = "Expectation"


def expectation_defs() -> dict[str, Any]:
    """`$defs` entries: one per scorer's params, their nested models, and `Expectation`."""
    defs: dict[str, Any] = {}
    alternatives: list[dict[str, Any]] = []
    bare_names: list[str] = []
    for name, kind in sorted(SCORERS.items()):
        params_schema = kind.params.model_json_schema(ref_template="#/$defs/{model}")
        defs.update(params_schema.pop("$defs", {}))
        params_schema["title"] = name
        if kind.description:
            params_schema["description"] = kind.description
        key = f"{name}_params"
        defs[key] = params_schema
        forms: list[dict[str, Any]] = [{"$ref": f"#/$defs/{key}"}]
        forms += _shorthand_forms(kind, params_schema)
        if not params_schema.get("required"):
            forms.append({"type": "null"})
            bare_names.append(name)
        alternatives.append(
            {
                "type": "object",
                "description": kind.description,
                "properties": {name: forms[0] if len(forms) == 1 else {"anyOf": forms}},
                "required": [name],
                "additionalProperties": False,
            }
        )
    if bare_names:
        alternatives.append(
            {
                "type": "string",
                "enum": bare_names,
                "description": "A scorer that needs no parameters, by name.",
            }
        )
    defs[EXPECTATION_DEF] = {
        "description": "One expectation: {scorer_name: parameters}.",
        "oneOf": alternatives,
    }
    return defs


def _shorthand_forms(kind: ScorerType, params_schema: dict[str, Any]) -> list[dict[str, Any]]:
    field = kind.params.shorthand
    if field is None:
        return []
    schema = copy.deepcopy(params_schema["properties"][field])
    schema.pop("default", None)
    schema["title"] = f"{kind.name} ({field})"
    # A mapping is always read as the parameters, never as the shorthand value.
    members = schema.get("anyOf", [schema])
    if any(m.get("type") == "object" for m in members) or not any("type" in m for m in members):
        schema = {"not": {"type": "object"}, **({"title": schema["title"]})}
    return [schema]
