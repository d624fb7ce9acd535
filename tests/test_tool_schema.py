"""Tool schemas come from signatures through pydantic, and the same model validates arguments."""

from __future__ import annotations

import enum
from typing import Literal, Optional

import pytest
from pydantic import BaseModel, ValidationError

from agentbench import RunContext, Tool, ToolDefinitionError, ToolRegistry, tool


class Unit(enum.Enum):
    CELSIUS = "c"
    FAHRENHEIT = "f"


class Address(BaseModel):
    street: str
    zip_code: str | None = None


def params(t: Tool) -> dict:
    return t.openai_schema()["function"]["parameters"]


def test_scalars_required_and_defaults() -> None:
    @tool
    def f(name: str, count: int, ratio: float, flag: bool = False) -> None:
        """Do f."""

    p = params(f)
    assert p["type"] == "object"
    assert p["required"] == ["name", "count", "ratio"]
    assert {k: v["type"] for k, v in p["properties"].items()} == {
        "name": "string",
        "count": "integer",
        "ratio": "number",
        "flag": "boolean",
    }
    assert p["properties"]["flag"]["default"] is False
    assert p["additionalProperties"] is False
    assert f.openai_schema()["function"]["description"] == "Do f."


def test_optional_literal_enum() -> None:
    @tool
    def f(
        mode: Literal["fast", "slow"],
        unit: Unit = Unit.CELSIUS,
        note: Optional[str] = None,  # noqa: UP045 - the spelling under test
        limit: int | None = None,
    ) -> None: ...

    p = params(f)
    assert p["properties"]["mode"] == {"enum": ["fast", "slow"], "type": "string"}
    unit_ref = p["properties"]["unit"]["$ref"].split("/")[-1]
    assert p["$defs"][unit_ref]["enum"] == ["c", "f"]
    assert p["properties"]["unit"]["default"] == "c"
    assert {"type": "null"} in p["properties"]["note"]["anyOf"]
    assert {"type": "integer"} in p["properties"]["limit"]["anyOf"]
    assert p["required"] == ["mode"]
    assert f.validate({"mode": "fast", "unit": "f"})["unit"] is Unit.FAHRENHEIT
    with pytest.raises(ValidationError):
        f.validate({"mode": "medium"})


def test_containers_and_nested_models() -> None:
    @tool
    def f(tags: list[str], weights: dict[str, float], address: Address) -> None: ...

    p = params(f)
    assert p["properties"]["tags"] == {"items": {"type": "string"}, "type": "array"}
    assert p["properties"]["weights"]["additionalProperties"] == {"type": "number"}
    ref = p["properties"]["address"]["$ref"].split("/")[-1]
    assert p["$defs"][ref]["required"] == ["street"]
    kwargs = f.validate({"tags": ["a"], "weights": {"x": 1}, "address": {"street": "Main"}})
    assert isinstance(kwargs["address"], Address)
    assert kwargs["weights"] == {"x": 1.0}
    with pytest.raises(ValidationError):
        f.validate({"tags": "a", "weights": {}, "address": {"street": "Main"}})


def test_property_called_title_survives_title_stripping() -> None:
    @tool
    def f(title: str) -> None: ...

    assert params(f)["properties"] == {"title": {"type": "string"}}


def test_google_docstring_descriptions() -> None:
    @tool
    def f(city: str, days: int = 3) -> None:
        """Forecast the weather.

        Longer explanation here.

        Args:
            city: The city, e.g. "Paris".
            days (int): How many days,
                at most 10.

        Returns:
            A forecast.
        """

    p = params(f)
    assert p["properties"]["city"]["description"] == 'The city, e.g. "Paris".'
    assert p["properties"]["days"]["description"] == "How many days, at most 10."
    assert f.description == "Forecast the weather.\n\nLonger explanation here."


def test_numpy_docstring_descriptions() -> None:
    @tool
    def f(city: str, days: int = 3) -> None:
        """Forecast the weather.

        Parameters
        ----------
        city : str
            The city name.
        days : int
            Number of days.

        Returns
        -------
        dict
        """

    p = params(f)
    assert p["properties"]["city"]["description"] == "The city name."
    assert p["properties"]["days"]["description"] == "Number of days."
    assert f.description == "Forecast the weather."


def test_sphinx_docstring_descriptions() -> None:
    @tool
    def f(city: str) -> None:
        """Forecast.

        :param city: The city name.
        :returns: a forecast
        """

    assert params(f)["properties"]["city"]["description"] == "The city name."


def test_run_context_parameter_is_injected_not_exposed() -> None:
    @tool
    def f(ctx: RunContext, city: str) -> str:
        return f"{ctx.agent}:{city}"

    assert list(params(f)["properties"]) == ["city"]
    assert f.context_param == "ctx"


def test_options_and_direct_call() -> None:
    @tool(name="lookup", effect="read_only", timeout_s=2, idempotent=True, description="Look up.")
    def f(x: int) -> int:
        return x + 1

    assert (f.name, f.effect.value, f.timeout_s, f.idempotent) == ("lookup", "read_only", 2, True)
    assert f.openai_schema()["function"]["description"] == "Look up."
    assert f(1) == 2  # still callable as a function


@pytest.mark.parametrize(
    ("build", "fragment"),
    [
        (lambda: Tool(lambda *args: None, name="v"), "*args"),
        (lambda: Tool(lambda **kw: None, name="k"), "*args/**kwargs"),
        (lambda: Tool(lambda: None, name="has space"), "not allowed"),
        (lambda: Tool(lambda: None, name="x", effect="delete"), "read_only, write, unknown"),
        (lambda: Tool(lambda: None, name="x", timeout_s=0), "timeout_s must be positive"),
    ],
)
def test_bad_definitions_fail_clearly(build, fragment: str) -> None:
    with pytest.raises(ToolDefinitionError, match=None) as info:
        build()
    assert fragment in str(info.value)


def test_registry_rejects_duplicate_names() -> None:
    def search(q: str) -> str:
        return q

    other = Tool(lambda q: q, name="search")
    registry = ToolRegistry([search])
    with pytest.raises(ToolDefinitionError, match="duplicate tool name 'search'"):
        registry.add(other)
    assert registry.names == ["search"]
