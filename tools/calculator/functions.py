"""The whitelisted functions and constants the calculator can use, each bounding its own arguments
before it computes, and SUPPORTED, the summary quoted in error messages."""

import math
from collections.abc import Callable
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Context, Decimal

from tools.calculator.bounds import (
    MAX_EXP_ARGUMENT,
    MAX_FACTORIAL,
    MAX_FUNCTION_ARGS,
    MAX_RESULT_BITS,
    MAX_ROUND_DIGITS,
    MAX_TRIG_ARGUMENT,
    SIGNIFICANT_DIGITS,
    Number,
    shown,
)
from tools.errors import ToolInputError, ToolLimitError


@dataclass(frozen=True)
class Function:
    """A whitelisted function: what it computes, how to call it, and how many arguments it takes."""

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
            f"sqrt is undefined for negative numbers (got {shown(x)}); "
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
            f"exp accepts arguments up to {MAX_EXP_ARGUMENT} (got {shown(x)}); larger results "
            "exceed floating point (about 1.8e308). Work with logarithms instead."
        )
    return 0.0 if x < -1000 else math.exp(x)


def _log(name: str, log: Callable[[Number], float]) -> Callable[[Number], float]:
    def apply(x: Number) -> float:
        if x <= 0:
            raise ToolInputError(
                f"{name} is undefined for zero and negative numbers (got {shown(x)}); "
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
            f"the base of log must be positive and not 1 (got {shown(base)}); "
            "write log(x, 10) for a base-10 logarithm"
        )
    return value / math.log(base)


def _capped(
    name: str, function: Callable[[float], float], limit: float, advice: str
) -> Callable[..., float]:
    def apply(x: Number) -> float:
        if abs(x) > limit:
            raise ToolLimitError(
                f"{name} accepts arguments with |x| up to {shown(limit)} (got {shown(x)}); {advice}"
            )
        return function(_real(name, x))

    return apply


def _unit_interval(name: str, function: Callable[[float], float]) -> Callable[..., float]:
    def apply(x: Number) -> float:
        if not -1 <= x <= 1:
            raise ToolInputError(
                f"{name} is defined only for arguments from -1 to 1 (got {shown(x)})"
            )
        return function(x)

    return apply


def _on_floats(name: str, function: Callable[..., float]) -> Callable[..., float]:
    return lambda *values: function(*(_real(name, value) for value in values))


def _whole(name: str, value: Number, what: str = "whole numbers") -> int:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if not isinstance(value, int):
        raise ToolInputError(f"{name} needs {what} (got {shown(value)})")
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
            f"factorial({shown(value)}) is undefined; factorial needs a non-negative whole number"
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
FUNCTIONS: dict[str, Function] = {
    "sqrt": Function(_sqrt, "sqrt(x)"),
    "cbrt": Function(_on_floats("cbrt", math.cbrt), "cbrt(x)"),
    "exp": Function(_exp, "exp(x)"),
    "log": Function(_log_base, "log(x) or log(x, base)", 1, 2),
    "ln": Function(_log("ln", math.log), "ln(x)"),
    "log10": Function(_log("log10", math.log10), "log10(x)"),
    "log2": Function(_log("log2", math.log2), "log2(x)"),
    "sin": Function(_trig("sin"), "sin(x) with x in radians"),
    "cos": Function(_trig("cos"), "cos(x) with x in radians"),
    "tan": Function(_trig("tan"), "tan(x) with x in radians"),
    "asin": Function(_unit_interval("asin", math.asin), "asin(x)"),
    "acos": Function(_unit_interval("acos", math.acos), "acos(x)"),
    "atan": Function(_on_floats("atan", math.atan), "atan(x)"),
    "atan2": Function(_on_floats("atan2", math.atan2), "atan2(y, x)", 2, 2),
    "sinh": Function(_hyperbolic("sinh"), "sinh(x)"),
    "cosh": Function(_hyperbolic("cosh"), "cosh(x)"),
    "tanh": Function(_on_floats("tanh", math.tanh), "tanh(x)"),
    "degrees": Function(_on_floats("degrees", math.degrees), "degrees(x)"),
    "radians": Function(_on_floats("radians", math.radians), "radians(x)"),
    "floor": Function(math.floor, "floor(x)"),
    "ceil": Function(math.ceil, "ceil(x)"),
    "round": Function(_round, "round(x) or round(x, ndigits)", 1, 2),
    "abs": Function(abs, "abs(x)"),
    "min": Function(min, "min(a, b, ...)", 2, _MANY),
    "max": Function(max, "max(a, b, ...)", 2, _MANY),
    "hypot": Function(_on_floats("hypot", math.hypot), "hypot(x, y, ...)", 2, _MANY),
    "gcd": Function(_gcd, "gcd(a, b, ...) of whole numbers", 2, _MANY),
    "lcm": Function(_lcm, "lcm(a, b, ...) of whole numbers", 2, _MANY),
    "factorial": Function(_factorial, "factorial(n) or n!"),
}
CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e, "tau": math.tau}

SUPPORTED = (
    "numbers, + - * / // % ** (or ^), unary + and -, parentheses, factorial(n) or n!, "
    "the symbols × ÷ −, the functions "
    + ", ".join(name for name in FUNCTIONS if name != "factorial")
    + " (angles in radians), and the constants pi, e, tau"
)
