"""The calculator's bounds (checked before the work they bound is done) and how numbers are shown
in answers and error messages."""

import math

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

Number = int | float


def format_number(value: Number) -> str:
    """``value`` as the calculator answers it: ints exactly, floats to SIGNIFICANT_DIGITS."""
    if isinstance(value, int):
        return str(value)
    if value.is_integer() and abs(value) < _EXACT_FLOAT_LIMIT:
        return str(int(value))
    return format(value, f".{SIGNIFICANT_DIGITS}g")


def shown(value: Number) -> str:
    """`value` for an error message, without spelling out thousands of digits."""
    if isinstance(value, int) and value.bit_length() > 100:
        return f"a number of about {int(value.bit_length() * math.log10(2)) + 1:,} digits"
    return format_number(value)
