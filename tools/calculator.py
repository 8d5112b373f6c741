"""Calculator tool: a safe arithmetic evaluator that walks a whitelisted AST (never `eval`).

Every operation whose cost grows with its operands is bounded before it runs, so no input can hang.
"""

import ast
import math
import re

from langchain_core.tools import tool
from pydantic import BaseModel, Field

from tools.errors import ToolInputError, ToolLimitError

MAX_EXPRESSION_CHARS = 500
MAX_NODES = 200
MAX_DEPTH = 50
MAX_RESULT_BITS = 10_000
MAX_FACTORIAL = 1000
SIGNIFICANT_DIGITS = 12

SUPPORTED = (
    "numbers, + - * / // % ** (or ^), unary + and -, parentheses, factorial(n) or n!, "
    "and the symbols × ÷ −"
)

# Floats at or beyond 2**53 are no longer exact integers, so "integral" says nothing about them.
_EXACT_FLOAT_LIMIT = 2.0**53
_UNICODE_OPERATORS = str.maketrans({"×": "*", "÷": "/", "−": "-"})
# Only a bare integer literal takes a postfix "!"; "!=" is left alone so it reports as a comparison.
_POSTFIX_FACTORIAL = re.compile(r"(?<![\w.])(\d+)!(?!=)")

Number = int | float


class CalculatorArgs(BaseModel):
    expression: str = Field(
        description=(
            "Arithmetic expression using numbers, + - * / // % ** ^, parentheses and "
            "factorial(n) or n!, e.g. '3 + 5 * 2', '2^10', '(1.5 + 2) / 7', '5!'."
        )
    )


@tool(args_schema=CalculatorArgs)
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression (+ - * / // % ** ^, parentheses, factorial) and return the exact result."""
    return evaluate(expression)


def evaluate(expression: str) -> str:
    """Return the value of `expression` as text; raise ToolInputError or ToolLimitError."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ToolLimitError(
            f"the expression is {len(expression)} characters long; the limit is "
            f"{MAX_EXPRESSION_CHARS}. Split the calculation into smaller steps."
        )
    text = " ".join(expression.split())
    if not text:
        raise ToolInputError(
            "the expression is empty; pass an arithmetic expression such as '2 + 2'"
        )
    _check_paren_depth(text)
    tree = _parse(text)
    _check_tree(tree.body)
    return _format(_eval(tree.body))


def _check_paren_depth(text: str) -> None:
    depth = deepest = 0
    for char in text:
        if char == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif char == ")":
            depth -= 1
    if deepest > MAX_DEPTH:
        raise ToolLimitError(
            f"the expression nests parentheses {deepest} deep; the limit is {MAX_DEPTH}. "
            "Remove redundant parentheses or split the calculation into steps."
        )


def _parse(text: str) -> ast.Expression:
    source = text.translate(_UNICODE_OPERATORS).replace("^", "**")
    source = _POSTFIX_FACTORIAL.sub(r"factorial(\1)", source)
    try:
        return ast.parse(source, mode="eval")
    except (SyntaxError, ValueError) as error:
        reason = error.msg if isinstance(error, SyntaxError) else str(error)
        raise ToolInputError(
            f"could not parse '{text}' ({reason}); write a plain arithmetic expression such as "
            f"'(2 + 3) * 4'. Supported: {SUPPORTED}."
        ) from None


def _check_tree(root: ast.expr) -> None:
    """Enforce the node-count and depth bounds and the whitelist before anything is computed."""
    count = 0
    pending: list[tuple[ast.expr, int]] = [(root, 1)]
    while pending:
        node, depth = pending.pop()
        count += 1
        if count > MAX_NODES:
            raise ToolLimitError(
                f"the expression has more than {MAX_NODES} numbers and operations; "
                "split the calculation into smaller steps."
            )
        if depth > MAX_DEPTH:
            raise ToolLimitError(
                f"the expression nests operations more than {MAX_DEPTH} deep; "
                "simplify it or split the calculation into steps."
            )
        for operand in _operands(node):
            # A left operand continues a chain such as 1 + 2 + 3 rather than nesting deeper;
            # the node-count bound already keeps such chains (and the recursion over them) short.
            chained = isinstance(node, ast.BinOp) and operand is node.left
            pending.append((operand, depth if chained else depth + 1))


def _operands(node: ast.expr) -> list[ast.expr]:
    """The operands of a whitelisted node; anything else is refused here."""
    match node:
        case ast.Constant(value=bool()):
            pass
        case ast.Constant(value=float() as value) if not math.isfinite(value):
            raise ToolLimitError(
                f"the number '{_snippet(node)}' is too large for floating point (above about "
                "1.8e308); use smaller numbers."
            )
        case ast.Constant(value=int() | float()):
            return []
        case ast.UnaryOp(op=ast.UAdd() | ast.USub()):
            return [node.operand]
        case ast.BinOp(op=ast.Add() | ast.Sub() | ast.Mult() | ast.Div()):
            return [node.left, node.right]
        case ast.BinOp(op=ast.FloorDiv() | ast.Mod() | ast.Pow()):
            return [node.left, node.right]
        case ast.Call(func=ast.Name(id="factorial"), args=[arg], keywords=[]):
            return [arg]
    raise ToolInputError(
        f"unsupported {_describe(node)} in the expression; only plain arithmetic is allowed. "
        f"Supported: {SUPPORTED}."
    )


def _describe(node: ast.AST) -> str:
    match node:
        case ast.Name(id=name):
            return f"name '{name}' (variables and constants are not available)"
        case ast.Call(func=ast.Name(id="factorial")):
            return f"call '{_snippet(node)}' (factorial takes exactly one argument)"
        case ast.Call():
            return f"function call '{_snippet(node)}'"
        case ast.Attribute(attr=attr):
            return f"attribute access '.{attr}'"
        case ast.Constant(value=str() | bytes()):
            return f"string {_snippet(node)}"
        case ast.Constant(value=complex()):
            return f"complex number '{_snippet(node)}'"
        case ast.Constant():
            return f"constant '{_snippet(node)}'"
        case ast.Tuple():
            return (
                f"comma in '{_snippet(node)}' (write numbers without thousands separators, "
                "e.g. 1000000)"
            )
        case ast.Compare():
            return f"comparison '{_snippet(node)}'"
        case ast.BoolOp() | ast.UnaryOp(op=ast.Not()):
            return f"boolean operator in '{_snippet(node)}'"
        case ast.BinOp() | ast.UnaryOp():
            return f"operator in '{_snippet(node)}'"
    return f"{type(node).__name__} '{_snippet(node)}'"


def _eval(node: ast.expr) -> Number:
    match node:
        case ast.Constant(value=value):
            return value
        case ast.UnaryOp(op=ast.USub(), operand=operand):
            return -_eval(operand)
        case ast.UnaryOp(operand=operand):
            return +_eval(operand)
        case ast.Call(args=[arg]):
            return _factorial(_eval(arg), node)
        case ast.BinOp(left=left, op=op, right=right):
            return _binary(op, _eval(left), _eval(right), node)
    raise AssertionError(f"unchecked node reached evaluation: {ast.dump(node)}")


def _binary(op: ast.operator, left: Number, right: Number, node: ast.BinOp) -> Number:
    if isinstance(op, ast.Pow):
        _check_power_size(left, right, node)
    elif isinstance(op, ast.Mult) and isinstance(left, int) and isinstance(right, int):
        bits = left.bit_length() + right.bit_length()
        if bits > MAX_RESULT_BITS:
            raise _too_large(node, bits)
    try:
        match op:
            case ast.Add():
                result = left + right
            case ast.Sub():
                result = left - right
            case ast.Mult():
                result = left * right
            case ast.Div():
                result = left / right
            case ast.FloorDiv():
                result = left // right
            case ast.Mod():
                result = left % right
            case _:
                result = left**right
    except ZeroDivisionError:
        if isinstance(op, ast.Pow):
            raise ToolInputError(
                f"zero raised to a negative power in '{_snippet(node)}' is undefined; "
                "use a non-zero base or a non-negative exponent"
            ) from None
        raise ToolInputError(f"division by zero in '{_snippet(node)}'; check the divisor") from None
    except OverflowError:
        raise _float_overflow(node) from None
    if isinstance(result, complex):
        raise ToolInputError(
            f"'{_snippet(node)}' has no real result (a negative number raised to a fractional "
            "power); only real arithmetic is supported"
        )
    if isinstance(result, float) and not math.isfinite(result):
        raise _float_overflow(node)
    return result


def _check_power_size(base: Number, exponent: Number, node: ast.BinOp) -> None:
    # Only a non-negative int exponent on an int base builds a big int; float powers are O(1)
    # and overflow into OverflowError or inf, which _binary already handles.
    if not (isinstance(base, int) and isinstance(exponent, int)) or exponent < 0:
        return
    if abs(base) < 2:
        return
    # An exponent too big for a float already means far more than MAX_RESULT_BITS bits.
    bits = exponent * math.log2(abs(base)) if exponent.bit_length() < 1000 else math.inf
    if bits > MAX_RESULT_BITS:
        raise _too_large(node, bits)


def _factorial(value: Number, node: ast.Call) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or value < 0:
        raise ToolInputError(
            f"'{_snippet(node)}' is undefined; factorial needs a non-negative whole number"
        )
    if value > MAX_FACTORIAL:
        raise ToolLimitError(
            f"the result of '{_snippet(node)}' would be too large; factorial accepts arguments up "
            f"to {MAX_FACTORIAL}. Use Stirling's approximation or logarithms instead."
        )
    return math.factorial(value)


def _too_large(node: ast.AST, bits: float) -> ToolLimitError:
    if not math.isfinite(bits):
        size = "astronomically many bits"
    elif bits < 1e12:
        size = f"about {bits:,.0f} bits"
    else:
        size = f"about {bits:.3g} bits"
    return ToolLimitError(
        f"the result of '{_snippet(node)}' would be too large ({size}; the limit is "
        f"{MAX_RESULT_BITS:,} bits, about {int(MAX_RESULT_BITS * math.log10(2))} digits). "
        "Use smaller numbers, or work with logarithms or scientific notation instead."
    )


def _float_overflow(node: ast.AST) -> ToolLimitError:
    return ToolLimitError(
        f"the result of '{_snippet(node)}' is too large for floating point (above about 1.8e308); "
        "use smaller numbers or whole numbers, which are exact up to the size limit."
    )


def _snippet(node: ast.AST, limit: int = 80) -> str:
    text = ast.unparse(node)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _format(value: Number) -> str:
    if isinstance(value, int):
        return str(value)
    if value.is_integer() and abs(value) < _EXACT_FLOAT_LIMIT:
        return str(int(value))
    return format(value, f".{SIGNIFICANT_DIGITS}g")
