"""The `calculator` tool: arithmetic and a whitelist of math functions, evaluated from the AST.

The expression is parsed with `ast.parse(mode="eval")` and walked node by node; nothing ever
reaches `eval`. Only numbers, the named constants, + - * / // % **, unary signs and calls to
whitelisted functions are understood. Sizes are checked *before* computing, because Python
computes `9**9**9` or `factorial(10**7)` exactly and would hang the process: an integer result
may have at most `MAX_INT_DIGITS` digits. Every refusal and every arithmetic failure (division
by zero, a math domain error, an overflow) is a `BusinessFailure` with a message the model can
act on.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

from agentbench.runtime.tools import BusinessFailure, Effect, tool

MAX_EXPRESSION_CHARS = 1_000
MAX_DEPTH = 50  # nesting of operations and calls
MAX_INT_DIGITS = 1_000
# Powers and products are checked by bit length before computing (cheap, a few bits lenient);
# the result is then checked digit by digit.
_MAX_INT_BITS = int(MAX_INT_DIGITS * math.log2(10)) + 8
MAX_FACTORIAL = 450  # 450! has 1,001 digits

Number = int | float

CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e, "tau": math.tau}


def _log(x: Number, base: Number = math.e) -> float:
    return math.log(x, base)


def _factorial(n: Number) -> int:
    if isinstance(n, float) and not n.is_integer():
        raise BusinessFailure(f"factorial() needs a whole number, got {n!r}")
    if not 0 <= n <= MAX_FACTORIAL:
        raise BusinessFailure(f"factorial() accepts 0 to {MAX_FACTORIAL}, got {n!r}")
    return math.factorial(int(n))


def _round(x: Number, digits: int = 0) -> Number:
    if not isinstance(digits, int) or abs(digits) > 100:
        raise BusinessFailure("round() takes a whole number of digits between -100 and 100")
    return round(x, digits) if digits else round(x)


FUNCTIONS: dict[str, Callable[..., Number]] = {
    "abs": abs,
    "round": _round,
    "min": min,
    "max": max,
    "sqrt": math.sqrt,
    "exp": math.exp,
    "log": _log,
    "ln": math.log,
    "log10": math.log10,
    "log2": math.log2,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "asin": math.asin,
    "acos": math.acos,
    "atan": math.atan,
    "atan2": math.atan2,
    "sinh": math.sinh,
    "cosh": math.cosh,
    "tanh": math.tanh,
    "hypot": math.hypot,
    "degrees": math.degrees,
    "radians": math.radians,
    "floor": math.floor,
    "ceil": math.ceil,
    "factorial": _factorial,
    "gcd": math.gcd,
}

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Number]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Number]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}
_SYMBOLS = {ast.BitXor: "^", ast.BitAnd: "&", ast.BitOr: "|", ast.LShift: "<<", ast.RShift: ">>"}


def evaluate(expression: str) -> Number:
    """Evaluate an arithmetic expression safely; raises BusinessFailure when it cannot."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise BusinessFailure(
            f"expression is {len(expression):,} characters; the limit is {MAX_EXPRESSION_CHARS:,}"
        )
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise BusinessFailure(f"not a valid expression: {exc.msg} (column {exc.offset})") from None
    except (ValueError, RecursionError, MemoryError):
        raise BusinessFailure("not a valid expression, or nested too deeply") from None
    try:
        value = _eval(tree.body, depth=0)
    except ZeroDivisionError:
        raise BusinessFailure("division by zero") from None
    except OverflowError:
        raise BusinessFailure("the result is too large to represent") from None
    except (ValueError, TypeError) as exc:
        raise BusinessFailure(f"cannot compute this: {exc}") from None
    return _checked_result(value)


def _eval(node: ast.expr, depth: int) -> Number:
    if depth > MAX_DEPTH:
        raise BusinessFailure(f"expression is nested more than {MAX_DEPTH} levels deep")
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise BusinessFailure(f"only numbers are allowed, not {node.value!r}")
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in CONSTANTS:
            raise BusinessFailure(
                f"unknown name {node.id!r}; constants are: {', '.join(CONSTANTS)}"
            )
        return CONSTANTS[node.id]
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand, depth + 1))
    if isinstance(node, ast.BinOp):
        return _binary(node, depth)
    if isinstance(node, ast.Call):
        return _call(node, depth)
    raise BusinessFailure(
        f"{_describe(node)} is not allowed; use numbers, + - * / // % ** "
        "and functions such as sqrt() or log()"
    )


def _binary(node: ast.BinOp, depth: int) -> Number:
    symbol = _SYMBOLS.get(type(node.op))
    if symbol is not None:
        hint = " (use ** for powers)" if symbol == "^" else ""
        raise BusinessFailure(f"operator {symbol!r} is not supported{hint}")
    left = _eval(node.left, depth + 1)
    right = _eval(node.right, depth + 1)
    if isinstance(node.op, ast.Pow):
        _check_power(left, right)
    elif isinstance(node.op, ast.Mult):
        _check_product(left, right)
    return _BINARY[type(node.op)](left, right)


def _check_power(base: Number, exponent: Number) -> None:
    if isinstance(base, int) and isinstance(exponent, int):
        if exponent < 0 or abs(base) <= 1:
            return  # a float, or 0/1/-1: small either way
        if exponent * math.log2(abs(base)) > _MAX_INT_BITS:
            raise BusinessFailure(
                f"{base}**{exponent} would have more than {MAX_INT_DIGITS:,} digits"
            )
    # Float powers overflow quickly and raise OverflowError, which is reported as such.


def _check_product(left: Number, right: Number) -> None:
    if not (isinstance(left, int) and isinstance(right, int)):
        return  # a float product overflows to inf, which the result check reports
    if left.bit_length() + right.bit_length() > _MAX_INT_BITS:
        raise BusinessFailure(f"the product would have more than {MAX_INT_DIGITS:,} digits")


def _call(node: ast.Call, depth: int) -> Number:
    if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
        known = ", ".join(sorted(FUNCTIONS))
        raise BusinessFailure(f"unknown function {_describe(node.func)}; available: {known}")
    if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
        raise BusinessFailure(f"{node.func.id}() takes plain positional arguments only")
    args = [_eval(arg, depth + 1) for arg in node.args]
    if node.func.id == "gcd" and not all(isinstance(a, int) for a in args):
        raise BusinessFailure("gcd() takes whole numbers")
    try:
        return FUNCTIONS[node.func.id](*args)
    except TypeError as exc:
        raise BusinessFailure(f"{node.func.id}(): {exc}") from None
    except ValueError as exc:
        raise BusinessFailure(f"{node.func.id}(): {exc}") from None


def _checked_result(value: Any) -> Number:
    if isinstance(value, complex):
        raise BusinessFailure("the result is a complex number; only real results are supported")
    if isinstance(value, float) and not math.isfinite(value):
        raise BusinessFailure("the result is not a finite number (overflow or undefined)")
    if isinstance(value, int) and len(str(abs(value))) > MAX_INT_DIGITS:
        raise BusinessFailure(f"the result has more than {MAX_INT_DIGITS:,} digits")
    return value


def _describe(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return repr(node.id)
    try:
        return repr(ast.unparse(node))
    except Exception:
        return type(node).__name__


@tool(effect=Effect.READ_ONLY, idempotent=True, timeout_s=5.0)
def calculator(expression: str) -> Number:
    """Evaluate an arithmetic expression exactly and return the number.

    Supports + - * / // % ** and parentheses, the constants pi, e and tau, and the functions
    abs, round, min, max, sqrt, exp, log(x[, base]), ln, log10, log2, sin, cos, tan, asin,
    acos, atan, atan2, sinh, cosh, tanh, hypot, degrees, radians, floor, ceil, factorial, gcd.

    Args:
        expression: for example "(3.5 + 2) * 4 ** 2" or "sqrt(2) * log(100, 10)".
    """
    return evaluate(expression)
