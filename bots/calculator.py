"""The assistant's calculator: arithmetic a small model gets wrong (``17*23`` is 409 to it), worked out exactly.

The expression is parsed with ``ast`` and walked by a small evaluator that knows numbers, ``+ - * / // % **``,
parentheses and a few functions; nothing else (names, attributes, calls of anything else) is accepted, and
``eval`` is never used. Sizes are bounded so that no expression can take the process's time or memory.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field

from core import ActionContext, Host, action

__all__ = ("CalculatorError", "calculate", "evaluate")

MAX_EXPRESSION = 200
"""Characters of an expression at most."""
MAX_POWER = 1000
"""Largest exponent of ``**``."""
MAX_DIGITS = 60
"""Digits of an integer result (or operand) at most."""

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "sqrt": math.sqrt,
    "abs": abs,
    "round": round,
    "min": min,
    "max": max,
}
_CONSTANTS = {"pi": math.pi, "e": math.e}
_WORDS = (
    (r"\btimes\b|\bmultiplied by\b|(?<=[\d)])\s*[x×]\s*(?=[\d(])", "*"),
    (r"\bdivided by\b|÷", "/"),
    (r"\bplus\b", "+"),
    (r"\bminus\b", "-"),
    (r"\bto the power of\b|\^", "**"),
    (r"(\d),(?=\d{3}\b)", r"\1"),  # thousands separators
)


class CalculatorError(ValueError):
    """The expression is not one the calculator works out (the message says why)."""


def _normalized(expression: str) -> str:
    text = expression.strip().rstrip("=?.! ").strip()
    for pattern, replacement in _WORDS:
        text = re.sub(pattern, replacement, text, flags=re.IGNORECASE)
    return text


def _checked(value: Any) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CalculatorError("the result is not a number")
    if isinstance(value, int) and abs(value) >= 10**MAX_DIGITS:
        raise CalculatorError(f"the result has more than {MAX_DIGITS} digits")
    if isinstance(value, float) and not math.isfinite(value):
        raise CalculatorError("the result is not a finite number")
    return value


def _walk(node: ast.AST) -> int | float:
    if isinstance(node, ast.Expression):
        return _walk(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return _checked(node.value)
    if isinstance(node, ast.Name) and node.id in _CONSTANTS:
        return _CONSTANTS[node.id]
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _checked(_UNARY[type(node.op)](_walk(node.operand)))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _walk(node.left), _walk(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_POWER:
            raise CalculatorError(f"exponents above {MAX_POWER} are not worked out")
        try:
            return _checked(_BINARY[type(node.op)](left, right))
        except ZeroDivisionError:
            raise CalculatorError("division by zero") from None
        except OverflowError:
            raise CalculatorError("the result is too large") from None
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCTIONS
        and not node.keywords
        and 0 < len(node.args) <= 4
    ):
        try:
            return _checked(_FUNCTIONS[node.func.id](*(_walk(a) for a in node.args)))
        except (ValueError, TypeError) as exc:
            raise CalculatorError(f"{node.func.id}: {exc}") from None
    raise CalculatorError("only numbers, + - * / // % **, parentheses and sqrt, abs, round, min, max are worked out")


def evaluate(expression: str) -> int | float:
    """The value of an arithmetic ``expression`` (``17*23``, ``(2 + 3) ** 2``, ``12 times 5``, ``sqrt(2)``).
    Raises ``CalculatorError`` for anything else."""
    text = _normalized(expression)
    if not text:
        raise CalculatorError("the expression is empty")
    if len(text) > MAX_EXPRESSION:
        raise CalculatorError(f"the expression is longer than {MAX_EXPRESSION} characters")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError):
        raise CalculatorError(f"{expression[:60]!r} is not an arithmetic expression") from None
    value = _walk(tree)
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return int(value)
    return round(value, 10) if isinstance(value, float) else value


class CalculateArgs(BaseModel):
    """Arguments of ``calculate``."""

    expression: str = Field(min_length=1, max_length=MAX_EXPRESSION, description="The arithmetic, e.g. 17*23")


def _calculate(args: CalculateArgs, ctx: ActionContext, agent: Host) -> dict[str, Any]:
    return {"expression": args.expression, "result": evaluate(args.expression)}


calculate = action(
    name="calculate",
    description="Works out arithmetic exactly: + - * / ** and parentheses.",
    instructions="Use it for every sum, product or other calculation with numbers.",
    schema=CalculateArgs,
    handler=_calculate,
)
