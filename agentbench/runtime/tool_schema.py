"""A tool's JSON Schema and argument validator, built from its Python signature.

The signature becomes a pydantic model through `pydantic.create_model`; its
`model_json_schema()` is what the model sees and `model_validate()` is what checks the model's
arguments, so the two can never disagree. Docstring parameter lines become field descriptions.
A parameter annotated `RunContext` is injected by the runner and left out of the schema.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model

from agentbench.errors import ToolDefinitionError
from agentbench.runtime.context import RunContext
from agentbench.runtime.docstrings import parse_docstring

# Keys whose values are data, not schemas: never strip "title" inside them.
_DATA_KEYS = frozenset({"default", "enum", "const", "examples"})


@dataclass(frozen=True)
class FunctionSchema:
    """Everything the runtime needs to expose and call one Python function as a tool."""

    description: str
    parameters: dict[str, Any]
    args_model: type[BaseModel]
    context_param: str | None


def build_function_schema(
    fn: Callable[..., Any], *, name: str, description: str | None = None
) -> FunctionSchema:
    """Build the schema of `fn`, raising ToolDefinitionError for what a tool cannot express."""
    try:
        signature = inspect.signature(fn)
        # RunContext resolves even when imported inside a function under postponed annotations.
        hints = typing.get_type_hints(fn, localns={"RunContext": RunContext}, include_extras=True)
    except NameError as exc:
        raise ToolDefinitionError(
            f"tool {name!r}: cannot resolve the annotation {exc.name!r}; import or define it at "
            "module level so its type (and so the tool's schema) can be read"
        ) from exc
    except (TypeError, ValueError) as exc:
        raise ToolDefinitionError(f"tool {name!r}: cannot read the signature: {exc}") from exc

    doc = parse_docstring(inspect.getdoc(fn))
    fields: dict[str, Any] = {}
    context_param: str | None = None
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolDefinitionError(
                f"tool {name!r}: parameter {param.name!r} is *args/**kwargs; tools need "
                "named parameters so the model knows what to send"
            )
        annotation = hints.get(param.name, Any)
        if _is_run_context(annotation):
            context_param = param.name
            continue
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (
            annotation,
            Field(default, description=doc.params.get(param.name) or None),
        )

    try:
        args_model = create_model(  # type: ignore[call-overload]
            f"{_camel(name)}Arguments",
            __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=False),
            **fields,
        )
        parameters = args_model.model_json_schema()
    except Exception as exc:  # pydantic raises several types for unsupported annotations
        raise ToolDefinitionError(
            f"tool {name!r}: its parameters cannot be expressed as JSON Schema: {exc}"
        ) from exc

    parameters = strip_titles(parameters)
    parameters.setdefault("properties", {})
    summary = description if description is not None else doc.summary
    return FunctionSchema(
        description=summary.strip(),
        parameters=parameters,
        args_model=args_model,
        context_param=context_param,
    )


def _is_run_context(annotation: Any) -> bool:
    if annotation is RunContext:
        return True
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _is_run_context(typing.get_args(annotation)[0])
    return isinstance(annotation, type) and issubclass(annotation, RunContext)


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.replace("-", "_").split("_"))


def strip_titles(schema: Any) -> Any:
    """Drop pydantic's auto-generated titles: they cost tokens and tell the model nothing."""
    if isinstance(schema, dict):
        out: dict[str, Any] = {}
        for key, value in schema.items():
            if key == "title" and isinstance(value, str):
                continue
            if key in _DATA_KEYS:
                out[key] = value
            elif key == "properties" and isinstance(value, dict):
                out[key] = {prop: strip_titles(sub) for prop, sub in value.items()}
            else:
                out[key] = strip_titles(value)
        return out
    if isinstance(schema, list):
        return [strip_titles(item) for item in schema]
    return schema
