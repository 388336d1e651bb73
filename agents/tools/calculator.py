"""The calculator tool: arithmetic evaluated safely over Python's ``ast``, never ``eval``.

Only numbers, the arithmetic operators, parentheses and a short list of math functions
and constants are allowed; anything else (names, attributes, calls to other functions,
strings, comprehensions...) is rejected before evaluation. Exponents and results are
bounded so an expression like ``2**10**10`` fails fast instead of eating the CPU.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable

from pydantic import BaseModel, Field

from agents.sentences import clause
from agents.tools.base import make_tool

MAX_EXPRESSION_CHARS = 200
MAX_EXPONENT = 1000
MAX_INT_BITS = 1024
MAX_ROUND_DIGITS = 15
# Float results are shown to 12 significant digits, so 0.1 + 0.2 gives 0.3.
FLOAT_DIGITS = 12

BAD_SYNTAX = "Cannot parse {expression!r} as arithmetic: {error}."
TOO_LONG = "Expression is too long ({length} characters, at most {max})."
NOT_ALLOWED = "{what} is not allowed; use numbers, + - * / // % **, parentheses and {names}."
UNKNOWN_NAME = "Unknown name {name!r}; known constants: {names}."
UNKNOWN_FUNCTION = "Unknown function {name!r}; known functions: {names}."
BAD_ARGUMENTS = "{name}() takes {count} argument(s), without keywords."
BAD_ROUND_DIGITS = "round(x, digits) needs whole-number digits between -{max} and {max}."
DIVISION_BY_ZERO = "Division by zero in {expression!r}."
EXPONENT_TOO_LARGE = "Exponent {exponent} is too large (at most {max} in magnitude)."
RESULT_TOO_LARGE = "The result is too large to compute (over {bits} bits or not finite)."
MATH_ERROR = "{name}() is undefined for {args}: {error}."

_BINARY_OPERATORS: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY_OPERATORS: dict[type[ast.unaryop], Callable[[float], float]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}
_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e}
# name -> (function, allowed argument counts)
_FUNCTIONS: dict[str, tuple[Callable[..., float], tuple[int, ...]]] = {
    "sqrt": (math.sqrt, (1,)),
    "sin": (math.sin, (1,)),
    "cos": (math.cos, (1,)),
    "tan": (math.tan, (1,)),
    "log": (math.log, (1, 2)),
    "log10": (math.log10, (1,)),
    "exp": (math.exp, (1,)),
    "abs": (abs, (1,)),
    "round": (round, (1, 2)),
}
_ALLOWED_NAMES = ", ".join([*_FUNCTIONS, *_CONSTANTS])
# Symbols people (and models) type for operators, mapped to Python's.
_SYMBOLS = str.maketrans({"×": "*", "÷": "/", "^": "**", "−": "-", "（": "(", "）": ")"})


def _check_size(value: float) -> float:
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise ValueError(RESULT_TOO_LARGE.format(bits=MAX_INT_BITS))
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(RESULT_TOO_LARGE.format(bits=MAX_INT_BITS))
    return value


def _power(base: float, exponent: float) -> float:
    if abs(exponent) > MAX_EXPONENT:
        raise ValueError(EXPONENT_TOO_LARGE.format(exponent=exponent, max=MAX_EXPONENT))
    # Check an integer power's size before computing it, not after.
    if (
        isinstance(base, int)
        and isinstance(exponent, int)
        and (abs(base).bit_length() - 1) * exponent > MAX_INT_BITS
    ):
        raise ValueError(RESULT_TOO_LARGE.format(bits=MAX_INT_BITS))
    result = base**exponent
    if isinstance(result, complex):
        raise ValueError(NOT_ALLOWED.format(what="A complex result", names=_ALLOWED_NAMES))
    return result


def _is_round_digits(value: float) -> bool:
    return isinstance(value, int) and abs(value) <= MAX_ROUND_DIGITS


def _call(node: ast.Call, evaluate: Callable[[ast.AST], float]) -> float:
    if not isinstance(node.func, ast.Name):
        raise ValueError(NOT_ALLOWED.format(what="Calling this", names=_ALLOWED_NAMES))
    name = node.func.id
    if name not in _FUNCTIONS:
        raise ValueError(UNKNOWN_FUNCTION.format(name=name, names=", ".join(_FUNCTIONS)))
    function, counts = _FUNCTIONS[name]
    if node.keywords or len(node.args) not in counts:
        count = " or ".join(str(c) for c in counts)
        raise ValueError(BAD_ARGUMENTS.format(name=name, count=count))
    args = [evaluate(arg) for arg in node.args]
    if name == "round" and len(args) == 2 and not _is_round_digits(args[1]):
        raise ValueError(BAD_ROUND_DIGITS.format(max=MAX_ROUND_DIGITS))
    try:
        return function(*args)
    except (ValueError, OverflowError, TypeError) as error:
        shown = ", ".join(repr(arg) for arg in args)
        raise ValueError(MATH_ERROR.format(name=name, args=shown, error=clause(error))) from error


def _evaluate(node: ast.AST, expression: str) -> float:
    def evaluate(child: ast.AST) -> float:
        return _evaluate(child, expression)

    if isinstance(node, ast.Expression):
        return evaluate(node.body)
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise ValueError(NOT_ALLOWED.format(what=repr(node.value), names=_ALLOWED_NAMES))
        return _check_size(node.value)
    if isinstance(node, ast.Name):
        if node.id not in _CONSTANTS:
            raise ValueError(UNKNOWN_NAME.format(name=node.id, names=", ".join(_CONSTANTS)))
        return _CONSTANTS[node.id]
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY_OPERATORS:
        return _UNARY_OPERATORS[type(node.op)](evaluate(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY_OPERATORS:
        left, right = evaluate(node.left), evaluate(node.right)
        try:
            if isinstance(node.op, ast.Pow):
                return _check_size(_power(left, right))
            return _check_size(_BINARY_OPERATORS[type(node.op)](left, right))
        except ZeroDivisionError as error:
            raise ValueError(DIVISION_BY_ZERO.format(expression=expression)) from error
        except OverflowError as error:
            raise ValueError(RESULT_TOO_LARGE.format(bits=MAX_INT_BITS)) from error
    if isinstance(node, ast.Call):
        return _check_size(_call(node, evaluate))
    what = f"The syntax {type(node).__name__}"
    raise ValueError(NOT_ALLOWED.format(what=what, names=_ALLOWED_NAMES))


def _tidy(value: float) -> float:
    if isinstance(value, float):
        value = float(f"{value:.{FLOAT_DIGITS}g}")
        if value == 0:
            return 0.0  # no "-0.0"
    return value


def evaluate_expression(expression: str) -> float:
    """Return the value of the arithmetic ``expression`` (an int when exact, else a float).

    Accepts numbers, ``+ - * / // % **``, ``×``, ``÷`` and ``^`` (as power), unary signs,
    parentheses and the functions and constants in ``_FUNCTIONS`` and ``_CONSTANTS``.
    Raises ValueError for bad syntax, anything not allowed, division by zero, an exponent
    over ``MAX_EXPONENT`` or a result over ``MAX_INT_BITS`` bits or not finite.
    """
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ValueError(TOO_LONG.format(length=len(expression), max=MAX_EXPRESSION_CHARS))
    # A trailing "=" is how people write a sum to be completed ("3 + 4 =").
    source = expression.translate(_SYMBOLS).strip().rstrip("=＝").strip()
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as error:
        raise ValueError(
            BAD_SYNTAX.format(expression=expression, error=clause(error.msg))
        ) from error
    return _tidy(_evaluate(tree, expression))


class CalculatorArgs(BaseModel):
    """Arguments of calculator."""

    expression: str = Field(
        min_length=1,
        max_length=MAX_EXPRESSION_CHARS,
        description=(
            "One arithmetic expression, e.g. '3 * (680 + 520) / 2', '2^10', 'sqrt(2)', "
            "'880 × 3 ÷ 4'. Numbers and operators only: no units, currency signs or words."
        ),
    )


def _calculator(expression: str) -> dict:
    """Calculate the value of an arithmetic expression; use it instead of mental arithmetic.

    Use it whenever an answer needs arithmetic: sums, products, percentages, averages,
    splitting a bill, a total cost. Supports + - * / // % ** (also ^ for power),
    parentheses, sqrt, sin, cos, tan (radians), log (natural, or log(x, base)), log10, exp,
    abs, round, pi and e. Not for unit or currency conversion with live rates.
    Returns {"expression", "result"}; a bad expression is an error that says what was wrong.
    """
    return {"expression": expression, "result": evaluate_expression(expression)}


calculator = make_tool(_calculator, name="calculator", args_schema=CalculatorArgs)
