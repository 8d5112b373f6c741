"""evaluate(): an expression's value as text, computed over the checked AST (never `eval`). Every
operation whose cost grows with its operands is bounded before it runs, so no input can hang."""

import ast
import math

from tools.calculator.bounds import MAX_EXPRESSION_CHARS, MAX_RESULT_BITS, Number, format_number
from tools.calculator.functions import CONSTANTS, FUNCTIONS
from tools.calculator.parsing import check_paren_depth, check_tree, parse_expression, snippet
from tools.errors import ToolInputError, ToolLimitError


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
    check_paren_depth(text)
    tree = parse_expression(text)
    check_tree(tree.body)
    return format_number(_eval(tree.body))


def _eval(node: ast.expr) -> Number:
    match node:
        case ast.Constant(value=int() | float() as value):  # check_tree admits only numbers
            return value
        case ast.UnaryOp(op=ast.USub(), operand=operand):
            return -_eval(operand)
        case ast.UnaryOp(operand=operand):
            return +_eval(operand)
        case ast.Name(id=name):
            return CONSTANTS[name]
        case ast.Call(func=ast.Name(id=name), args=args):
            return _call(name, [_eval(arg) for arg in args], node)
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
                f"zero raised to a negative power in '{snippet(node)}' is undefined; "
                "use a non-zero base or a non-negative exponent"
            ) from None
        raise ToolInputError(f"division by zero in '{snippet(node)}'; check the divisor") from None
    except OverflowError:
        raise _float_overflow(node) from None
    if isinstance(result, complex):
        raise ToolInputError(
            f"'{snippet(node)}' has no real result (a negative number raised to a fractional "
            "power); only real arithmetic is supported"
        )
    if isinstance(result, float) and not math.isfinite(result):
        raise _float_overflow(node)
    return result


def _call(name: str, values: list[Number], node: ast.Call) -> Number:
    try:
        result = FUNCTIONS[name].apply(*values)
    except OverflowError:
        raise _float_overflow(node) from None
    except ValueError:
        # Domains are checked up front with clearer messages; this is the backstop for math's own.
        raise ToolInputError(
            f"'{snippet(node)}' is outside the domain of {name}; check the arguments"
        ) from None
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


def _too_large(node: ast.AST, bits: float) -> ToolLimitError:
    if not math.isfinite(bits):
        size = "astronomically many bits"
    elif bits < 1e12:
        size = f"about {bits:,.0f} bits"
    else:
        size = f"about {bits:.3g} bits"
    return ToolLimitError(
        f"the result of '{snippet(node)}' would be too large ({size}; the limit is "
        f"{MAX_RESULT_BITS:,} bits, about {int(MAX_RESULT_BITS * math.log10(2))} digits). "
        "Use smaller numbers, or work with logarithms or scientific notation instead."
    )


def _float_overflow(node: ast.AST) -> ToolLimitError:
    return ToolLimitError(
        f"the result of '{snippet(node)}' is too large for floating point (above about 1.8e308); "
        "use smaller numbers or whole numbers, which are exact up to the size limit."
    )
