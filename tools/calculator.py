"""Calculator tool: a safe evaluator of arithmetic and whitelisted math functions over the AST (never `eval`).

Every operation whose cost grows with its operands is bounded before it runs, so no input can hang.
"""

import ast
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Context, Decimal

from langchain_core.tools import tool
from pydantic import BaseModel, Field

from tools.errors import ToolInputError, ToolLimitError

MAX_EXPRESSION_CHARS = 500
MAX_NODES = 200
MAX_DEPTH = 50
MAX_RESULT_BITS = 10_000
MAX_FACTORIAL = 1000
SIGNIFICANT_DIGITS = 12
# exp(709.78...) is the largest value a float holds; sinh and cosh overflow at the same point.
MAX_EXP_ARGUMENT = 709
# Beyond this an angle's float spacing is so coarse that sin/cos/tan of it are noise.
MAX_TRIG_ARGUMENT = 1e9
MAX_ROUND_DIGITS = 15
MAX_FUNCTION_ARGS = 50

# Floats at or beyond 2**53 are no longer exact integers, so "integral" says nothing about them.
_EXACT_FLOAT_LIMIT = 2.0**53
_UNICODE_OPERATORS = str.maketrans({"×": "*", "÷": "/", "−": "-"})
# Only a bare integer literal takes a postfix "!"; "!=" is left alone so it reports as a comparison.
_POSTFIX_FACTORIAL = re.compile(r"(?<![\w.])(\d+)!(?!=)")

Number = int | float


@dataclass(frozen=True)
class _Function:
    apply: Callable[..., Number]
    usage: str
    min_args: int = 1
    max_args: int = 1


def _real(name: str, value: Number) -> float:
    """`value` as a float, refusing ints too large for one rather than raising OverflowError."""
    try:
        return float(value)
    except OverflowError:
        raise ToolLimitError(
            f"the argument to {name} is too large for floating point (above about 1.8e308); "
            "use smaller numbers or work with logarithms."
        ) from None


def _sqrt(x: Number) -> Number:
    if x < 0:
        raise ToolInputError(
            f"sqrt is undefined for negative numbers (got {_shown(x)}); "
            "only real results are supported"
        )
    if isinstance(x, int):
        # Exact for perfect squares, and works for ints too large to convert to a float.
        root = math.isqrt(x)
        if root * root == x:
            return root
        if x.bit_length() > 1000:
            return _real("sqrt", root)
    return math.sqrt(x)


def _exp(x: Number) -> float:
    if x > MAX_EXP_ARGUMENT:
        raise ToolLimitError(
            f"exp accepts arguments up to {MAX_EXP_ARGUMENT} (got {_shown(x)}); larger results "
            "exceed floating point (about 1.8e308). Work with logarithms instead."
        )
    return 0.0 if x < -1000 else math.exp(x)


def _log(name: str, log: Callable[[Number], float]) -> Callable[[Number], float]:
    def apply(x: Number) -> float:
        if x <= 0:
            raise ToolInputError(
                f"{name} is undefined for zero and negative numbers (got {_shown(x)}); "
                "pass a positive number"
            )
        return log(x)  # math's logarithms accept ints of any size exactly

    return apply


_ln = _log("log", math.log)


def _log_base(x: Number, base: Number | None = None) -> float:
    value = _ln(x)
    if base is None:
        return value
    if base <= 0 or base == 1:
        raise ToolInputError(
            f"the base of log must be positive and not 1 (got {_shown(base)}); "
            "write log(x, 10) for a base-10 logarithm"
        )
    return value / math.log(base)


def _capped(
    name: str, function: Callable[[float], float], limit: float, advice: str
) -> Callable[..., float]:
    def apply(x: Number) -> float:
        if abs(x) > limit:
            raise ToolLimitError(
                f"{name} accepts arguments with |x| up to {_shown(limit)} "
                f"(got {_shown(x)}); {advice}"
            )
        return function(_real(name, x))

    return apply


def _unit_interval(name: str, function: Callable[[float], float]) -> Callable[..., float]:
    def apply(x: Number) -> float:
        if not -1 <= x <= 1:
            raise ToolInputError(
                f"{name} is defined only for arguments from -1 to 1 (got {_shown(x)})"
            )
        return function(x)

    return apply


def _on_floats(name: str, function: Callable[..., float]) -> Callable[..., float]:
    return lambda *values: function(*(_real(name, value) for value in values))


def _whole(name: str, value: Number, what: str = "whole numbers") -> int:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if not isinstance(value, int):
        raise ToolInputError(f"{name} needs {what} (got {_shown(value)})")
    return value


def _round(x: Number, ndigits: Number | None = None) -> Number:
    """Round halves away from zero, as people expect (2.5 -> 3, 2.675 to 2 places -> 2.68)."""
    digits = 0 if ndigits is None else _whole("round", ndigits, "a whole number of digits")
    if abs(digits) > MAX_ROUND_DIGITS:
        raise ToolLimitError(
            f"round accepts ndigits from -{MAX_ROUND_DIGITS} to {MAX_ROUND_DIGITS} "
            f"(got {digits}); results carry only {SIGNIFICANT_DIGITS} significant digits anyway."
        )
    if isinstance(x, int):
        if digits >= 0:
            return x
        unit = 10**-digits
        quotient, remainder = divmod(abs(x), unit)
        magnitude = (quotient + (2 * remainder >= unit)) * unit
        return magnitude if x >= 0 else -magnitude
    # repr gives the shortest decimal that reads back as x, so 2.675 rounds as written;
    # 400 digits hold any finite float to 15 places.
    rounded = Decimal(repr(x)).quantize(
        Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP, context=Context(prec=400)
    )
    return int(rounded) if ndigits is None else float(rounded)


def _integers(name: str, values: tuple[Number, ...]) -> list[int]:
    integers = [_whole(name, value) for value in values]
    if any(integer.bit_length() > MAX_RESULT_BITS for integer in integers):
        raise ToolLimitError(
            f"{name} accepts whole numbers of up to {MAX_RESULT_BITS:,} bits; use smaller numbers."
        )
    return integers


def _gcd(*values: Number) -> int:
    return math.gcd(*_integers("gcd", values))


def _lcm(*values: Number) -> int:
    integers = _integers("lcm", values)
    bits = sum(integer.bit_length() for integer in integers)
    if bits > MAX_RESULT_BITS:
        raise ToolLimitError(
            f"the lcm of these numbers could have about {bits:,} bits; the limit is "
            f"{MAX_RESULT_BITS:,} bits. Use fewer or smaller numbers."
        )
    return math.lcm(*integers)


def _factorial(value: Number) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or value < 0:
        raise ToolInputError(
            f"factorial({_shown(value)}) is undefined; factorial needs a non-negative whole number"
        )
    if value > MAX_FACTORIAL:
        raise ToolLimitError(
            f"the result of factorial({value}) would be too large; factorial accepts arguments up "
            f"to {MAX_FACTORIAL}. Use Stirling's approximation or logarithms instead."
        )
    return math.factorial(value)


def _trig(name: str) -> Callable[..., float]:
    advice = "reduce the angle modulo 2*pi first (angles are in radians)."
    return _capped(name, getattr(math, name), MAX_TRIG_ARGUMENT, advice)


def _hyperbolic(name: str) -> Callable[..., float]:
    advice = "larger results exceed floating point (about 1.8e308); work with logarithms instead."
    return _capped(name, getattr(math, name), MAX_EXP_ARGUMENT, advice)


_MANY = MAX_FUNCTION_ARGS
# The whitelist: no other name can be called or read.
_FUNCTIONS: dict[str, _Function] = {
    "sqrt": _Function(_sqrt, "sqrt(x)"),
    "cbrt": _Function(_on_floats("cbrt", math.cbrt), "cbrt(x)"),
    "exp": _Function(_exp, "exp(x)"),
    "log": _Function(_log_base, "log(x) or log(x, base)", 1, 2),
    "ln": _Function(_log("ln", math.log), "ln(x)"),
    "log10": _Function(_log("log10", math.log10), "log10(x)"),
    "log2": _Function(_log("log2", math.log2), "log2(x)"),
    "sin": _Function(_trig("sin"), "sin(x) with x in radians"),
    "cos": _Function(_trig("cos"), "cos(x) with x in radians"),
    "tan": _Function(_trig("tan"), "tan(x) with x in radians"),
    "asin": _Function(_unit_interval("asin", math.asin), "asin(x)"),
    "acos": _Function(_unit_interval("acos", math.acos), "acos(x)"),
    "atan": _Function(_on_floats("atan", math.atan), "atan(x)"),
    "atan2": _Function(_on_floats("atan2", math.atan2), "atan2(y, x)", 2, 2),
    "sinh": _Function(_hyperbolic("sinh"), "sinh(x)"),
    "cosh": _Function(_hyperbolic("cosh"), "cosh(x)"),
    "tanh": _Function(_on_floats("tanh", math.tanh), "tanh(x)"),
    "degrees": _Function(_on_floats("degrees", math.degrees), "degrees(x)"),
    "radians": _Function(_on_floats("radians", math.radians), "radians(x)"),
    "floor": _Function(math.floor, "floor(x)"),
    "ceil": _Function(math.ceil, "ceil(x)"),
    "round": _Function(_round, "round(x) or round(x, ndigits)", 1, 2),
    "abs": _Function(abs, "abs(x)"),
    "min": _Function(min, "min(a, b, ...)", 2, _MANY),
    "max": _Function(max, "max(a, b, ...)", 2, _MANY),
    "hypot": _Function(_on_floats("hypot", math.hypot), "hypot(x, y, ...)", 2, _MANY),
    "gcd": _Function(_gcd, "gcd(a, b, ...) of whole numbers", 2, _MANY),
    "lcm": _Function(_lcm, "lcm(a, b, ...) of whole numbers", 2, _MANY),
    "factorial": _Function(_factorial, "factorial(n) or n!"),
}
_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e, "tau": math.tau}
_HINTS = {"pow": "; write x ** y or x ^ y", "power": "; write x ** y or x ^ y"}

SUPPORTED = (
    "numbers, + - * / // % ** (or ^), unary + and -, parentheses, factorial(n) or n!, "
    "the symbols × ÷ −, the functions "
    + ", ".join(name for name in _FUNCTIONS if name != "factorial")
    + " (angles in radians), and the constants pi, e, tau"
)


class CalculatorArgs(BaseModel):
    expression: str = Field(
        description=(
            "Arithmetic expression using numbers, + - * / // % ** ^, parentheses, factorial(n) "
            "or n!, the functions sqrt cbrt exp log (natural; log(x, base)) ln log10 log2 sin cos "
            "tan asin acos atan atan2 sinh cosh tanh degrees radians floor ceil round abs min "
            "max hypot gcd lcm (angles in radians) and the constants pi e tau, e.g. "
            "'3 + 5 * 2', '2^10', '(1.5 + 2) / 7', '5!', 'sqrt(2) * 3', 'log(1000, 10)', "
            "'sin(radians(30))', 'round(2.675, 2)', 'max(3, 7, 5)', '2 * pi * 6'."
        )
    )


@tool(args_schema=CalculatorArgs)
def calculator(expression: str) -> str:
    """Evaluate arithmetic (+ - * / // % ** ^, n!) and math functions (sqrt, exp, log, sin/cos/tan, round, min/max, gcd, ...) with pi, e, tau."""
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
        case ast.Name(id=name) if name in _CONSTANTS:
            return []
        case ast.Call(func=ast.Name(id=name)) if name in _FUNCTIONS:
            _check_call(name, node)
            return list(node.args)
    raise ToolInputError(
        f"unsupported {_describe(node)} in the expression; only arithmetic and the listed "
        f"functions are allowed. Supported: {SUPPORTED}."
    )


def _check_call(name: str, node: ast.Call) -> None:
    spec = _FUNCTIONS[name]
    if (
        spec.min_args <= len(node.args) <= spec.max_args
        and not node.keywords
        and not any(isinstance(arg, ast.Starred) for arg in node.args)
    ):
        return
    raise ToolInputError(
        f"invalid call '{_snippet(node)}': {name} takes {_arity(spec)} (positional, no "
        f"keywords or *), as in {spec.usage}"
    )


def _arity(spec: _Function) -> str:
    words = {1: "one", 2: "two"}
    if spec.min_args == spec.max_args:
        plural = "argument" if spec.min_args == 1 else "arguments"
        return f"exactly {words[spec.min_args]} {plural}"
    if spec.max_args == spec.min_args + 1:
        return f"{words[spec.min_args]} or {words[spec.max_args]} arguments"
    return f"{spec.min_args} to {spec.max_args} arguments"


def _describe(node: ast.AST) -> str:
    match node:
        case ast.Name(id=name) if name in _FUNCTIONS:
            return f"name '{name}' (a function: call it as {_FUNCTIONS[name].usage})"
        case ast.Name(id=name):
            return f"name '{name}' (variables are not available; the constants are pi, e and tau)"
        case ast.Call(func=ast.Name(id=name)):
            return (
                f"function call '{_snippet(node)}' ('{name}' is not an available function"
                f"{_HINTS.get(name, '')})"
            )
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
        case ast.Name(id=name):
            return _CONSTANTS[name]
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


def _call(name: str, values: list[Number], node: ast.Call) -> Number:
    try:
        result = _FUNCTIONS[name].apply(*values)
    except OverflowError:
        raise _float_overflow(node) from None
    except ValueError:
        # Domains are checked up front with clearer messages; this is the backstop for math's own.
        raise ToolInputError(
            f"'{_snippet(node)}' is outside the domain of {name}; check the arguments"
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
        f"the result of '{_snippet(node)}' would be too large ({size}; the limit is "
        f"{MAX_RESULT_BITS:,} bits, about {int(MAX_RESULT_BITS * math.log10(2))} digits). "
        "Use smaller numbers, or work with logarithms or scientific notation instead."
    )


def _float_overflow(node: ast.AST) -> ToolLimitError:
    return ToolLimitError(
        f"the result of '{_snippet(node)}' is too large for floating point (above about 1.8e308); "
        "use smaller numbers or whole numbers, which are exact up to the size limit."
    )


def _shown(value: Number) -> str:
    """`value` for an error message, without spelling out thousands of digits."""
    if isinstance(value, int) and value.bit_length() > 100:
        return f"a number of about {int(value.bit_length() * math.log10(2)) + 1:,} digits"
    return _format(value)


def _snippet(node: ast.AST, limit: int = 80) -> str:
    text = ast.unparse(node)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _format(value: Number) -> str:
    if isinstance(value, int):
        return str(value)
    if value.is_integer() and abs(value) < _EXACT_FLOAT_LIMIT:
        return str(int(value))
    return format(value, f".{SIGNIFICANT_DIGITS}g")
