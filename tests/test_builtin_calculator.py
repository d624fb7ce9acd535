"""The calculator: exact arithmetic from the AST, bounded sizes, clear refusals, never `eval`."""

from __future__ import annotations

import math

import pytest

from agentbench import ResultKind
from agentbench.runtime.builtin.calculator import MAX_INT_DIGITS, evaluate
from agentbench.tools import calculator


@pytest.mark.parametrize(
    "expression, expected",
    [
        ("1 + 2 * 3", 7),
        ("(3.5 + 2) * 4 ** 2", 88.0),
        ("2 ** 10", 1024),
        ("2 ** -2", 0.25),
        ("-3 ** 2", -9),
        ("7 // 2", 3),
        ("7 % 3", 1),
        ("10 / 4", 2.5),
        ("sqrt(16)", 4.0),
        ("log(100, 10)", 2.0),
        ("ln(e)", 1.0),
        ("round(2.567, 2)", 2.57),
        ("round(2.5)", 2),
        ("min(3, 1, 2) + max(4, 5)", 6),
        ("factorial(5)", 120),
        ("gcd(12, 18)", 6),
        ("hypot(3, 4)", 5.0),
        ("abs(-3)", 3),
        ("floor(2.7) + ceil(2.1)", 5),
        ("10 ** 999", 10**999),
        ("  1_000 + 1  ", 1001),
    ],
)
def test_arithmetic(expression: str, expected: float) -> None:
    assert evaluate(expression) == expected


def test_trigonometry_and_constants() -> None:
    assert evaluate("sin(pi / 2)") == pytest.approx(1.0)
    assert evaluate("degrees(tau)") == pytest.approx(360.0)
    assert math.isclose(evaluate("atan2(1, 1)"), math.pi / 4)


@pytest.mark.parametrize(
    "expression, message",
    [
        ("1 / 0", "division by zero"),
        ("5 % 0", "division by zero"),
        ("5 // 0", "division by zero"),
        ("sqrt(-1)", "math domain error"),
        ("log(0)", "math domain error"),
        ("9 ** 9 ** 9", "more than 1,000 digits"),
        ("10 ** 10 ** 10", "more than 1,000 digits"),
        ("(10 ** 600) * (10 ** 600)", "more than 1,000 digits"),
        ("10 ** 1000", "more than 1,000 digits"),
        ("factorial(100000)", "factorial() accepts 0 to 450"),
        ("factorial(2.5)", "whole number"),
        ("2.0 ** 10000", "too large"),
        ("exp(1000)", "too large"),
        ("1e308 * 10", "not a finite number"),
        ("(-8) ** (1 / 3)", "complex"),
        ("2 ^ 10", "use ** for powers"),
        ("1 << 100000", "operator '<<' is not supported"),
        ("__import__('os').system('id')", "unknown function"),
        ("().__class__.__bases__[0].__subclasses__()", "unknown function"),
        ("(1).__class__", "not allowed"),
        ("open('/etc/passwd')", "unknown function 'open'"),
        ("x + 1", "unknown name 'x'"),
        ("'a' * 3", "only numbers"),
        ("[1] * 10 ** 9", "not allowed"),
        ("lambda: 1", "not allowed"),
        ("[i for i in range(10)]", "not allowed"),
        ("True + 1", "only numbers"),
        ("1j * 2", "only numbers"),
        ("sqrt(x=4)", "positional arguments only"),
        ("max(*[1, 2])", "positional arguments only"),
        ("min()", "min()"),
        ("math.sqrt(4)", "unknown function"),
        ("1 +", "not a valid expression"),
        ("", "not a valid expression"),
        ("-" * 200 + "1", "nested more than"),
        ("(" * 300 + "1" + ")" * 300, "not a valid expression"),
        ("1 + " * 600 + "1", "characters; the limit is"),
        ("round(1.5, 10 ** 9)", "digits between"),
    ],
)
async def test_refusals_are_business_failures(expression: str, message: str) -> None:
    result = await calculator.invoke({"expression": expression})
    assert result.kind is ResultKind.BUSINESS_FAILURE
    assert message in (result.error or ""), result.error


async def test_tool_shape() -> None:
    assert calculator.name == "calculator"
    assert calculator.effect.value == "read_only"
    assert calculator.parameters["required"] == ["expression"]
    assert "sqrt" in calculator.description
    result = await calculator.invoke({"expression": "6 * 7"})
    assert result.kind is ResultKind.OK and result.observation() == "42"


async def test_the_largest_integer_result_is_still_shown_whole() -> None:
    result = await calculator.invoke({"expression": "10 ** 1000 - 1"})
    assert result.kind is ResultKind.OK
    assert result.observation() == "9" * MAX_INT_DIGITS
