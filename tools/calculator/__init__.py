"""Calculator tool: a safe evaluator of arithmetic and whitelisted math functions over the AST (never `eval`).

Every operation whose cost grows with its operands is bounded before it runs, so no input can hang.
Modules: ``bounds`` (limits, number formatting), ``functions`` (the whitelist), ``parsing`` (text to a
checked AST), ``evaluator`` (evaluate) and ``tool`` (the calculator tool).
"""

from tools.calculator.bounds import (
    MAX_DEPTH,
    MAX_EXP_ARGUMENT,
    MAX_EXPRESSION_CHARS,
    MAX_FACTORIAL,
    MAX_FUNCTION_ARGS,
    MAX_NODES,
    MAX_RESULT_BITS,
    MAX_ROUND_DIGITS,
    MAX_TRIG_ARGUMENT,
    SIGNIFICANT_DIGITS,
    Number,
)
from tools.calculator.evaluator import evaluate
from tools.calculator.functions import SUPPORTED
from tools.calculator.tool import CalculatorArgs, calculator

__all__ = [
    "MAX_DEPTH",
    "MAX_EXPRESSION_CHARS",
    "MAX_EXP_ARGUMENT",
    "MAX_FACTORIAL",
    "MAX_FUNCTION_ARGS",
    "MAX_NODES",
    "MAX_RESULT_BITS",
    "MAX_ROUND_DIGITS",
    "MAX_TRIG_ARGUMENT",
    "SIGNIFICANT_DIGITS",
    "SUPPORTED",
    "CalculatorArgs",
    "Number",
    "calculator",
    "evaluate",
]
