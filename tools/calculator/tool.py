"""The calculator tool: its argument model and the @tool the model calls."""

from langchain_core.tools import tool
from pydantic import BaseModel, Field

from tools.calculator.evaluator import evaluate


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
