"""Calculator tool: exact arithmetic, result formatting, refusal of unsafe or oversized input."""

import ast
import builtins
import math
import re
from pathlib import Path

import pytest

import tools.calculator as calculator_module
from tools.calculator import CalculatorArgs, calculator, evaluate
from tools.errors import ToolError, ToolInputError, ToolLimitError


def _fail_if_called(*args: object, **kwargs: object) -> None:
    raise AssertionError("must not be called")


@pytest.fixture
def parsed_sources(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record what reaches ast.parse; a spy, not a tripwire, since pytest parses on failure too."""
    sources: list[str] = []
    real_parse = ast.parse

    def spy(source: str, *args: object, **kwargs: object) -> ast.AST:
        sources.append(source)
        return real_parse(source, *args, **kwargs)

    monkeypatch.setattr(calculator_module.ast, "parse", spy)
    return sources


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("3 + 5 * 2", "13"),
        ("(3 + 5) * 2", "16"),
        ("2 * (3 + (4 - 1)) - 5", "7"),
        ("2 ** 10", "1024"),
        ("2^10", "1024"),
        ("2 ^ 3 ^ 2", "512"),
        ("6 × 7", "42"),
        ("84 ÷ 2", "42"),
        ("10 − 3", "7"),
        ("-3 * -4", "12"),
        ("-2 ** 2", "-4"),
        ("+5 - -5", "10"),
        ("7 // 2", "3"),
        ("-7 // 2", "-4"),
        ("7 % 3", "1"),
        ("2 ** -1", "0.5"),
        ("factorial(5)", "120"),
        ("5!", "120"),
        ("3! + 2", "8"),
        ("2 * 4!", "48"),
        ("0!", "1"),
        ("  1 +\n 2  ", "3"),
    ],
)
def test_evaluates_arithmetic(expression: str, expected: str) -> None:
    assert evaluate(expression) == expected


@pytest.mark.parametrize(
    ("expression", "expected"),
    [("8 / 2", "4"), ("4.0", "4"), ("7.5 // 2", "3"), ("-0.0", "0"), ("0.5 * 6", "3")],
)
def test_integral_floats_are_formatted_as_ints(expression: str, expected: str) -> None:
    assert evaluate(expression) == expected


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("0.1 + 0.2", "0.3"),
        ("10 / 4", "2.5"),
        ("1 / 3", "0.333333333333"),
        ("2 / 3", "0.666666666667"),
        ("-1 / 3", "-0.333333333333"),
        ("2 ** 0.5", "1.41421356237"),
    ],
)
def test_other_floats_are_rounded_to_12_significant_digits(expression: str, expected: str) -> None:
    assert evaluate(expression) == expected


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("2 ** 100", str(2**100)),
        ("factorial(30)", str(math.factorial(30))),
        ("2 ** 9999", str(2**9999)),
        ("1000!", str(math.factorial(1000))),
        ("99999999999999999999 * 99999999999999999999", str(99999999999999999999**2)),
    ],
)
def test_integer_results_are_exact_up_to_the_size_limit(expression: str, expected: str) -> None:
    assert evaluate(expression) == expected


@pytest.mark.parametrize("expression", ["1 / 0", "1 // 0", "1 % 0", "1 / (2 - 2)", "1.5 / 0.0"])
def test_division_by_zero_is_an_input_error(expression: str) -> None:
    with pytest.raises(ToolInputError, match=r"division by zero in '.*'; check the divisor"):
        evaluate(expression)


@pytest.mark.parametrize("expression", ["0 ** -1", "0.0 ** -2"])
def test_zero_to_a_negative_power_is_an_input_error(expression: str) -> None:
    with pytest.raises(ToolInputError, match="negative power"):
        evaluate(expression)


def test_negative_base_with_fractional_exponent_is_refused_instead_of_returning_complex() -> None:
    with pytest.raises(ToolInputError, match="no real result"):
        evaluate("(-8) ** 0.5")


@pytest.mark.parametrize(
    "expression",
    ["10**10**10", "9**9**9", "10^10^10", "2 ** 10001", "(2 ** 5000) ** 3", "2^2^2^2^2^2"],
)
def test_oversized_powers_are_refused_before_computing(expression: str) -> None:
    # A naive evaluator would compute these for minutes; refusal must come from the size estimate.
    with pytest.raises(ToolLimitError, match="would be too large"):
        evaluate(expression)


@pytest.mark.parametrize(
    "expression",
    [
        "2**9000 * 2**9000",
        "factorial(1000) * factorial(1000)",
        "9**999 * 9**999 * 9**999 * 9**999",
        "*".join(["2**600"] * 20),
    ],
)
def test_oversized_products_are_refused(expression: str) -> None:
    with pytest.raises(ToolLimitError, match="would be too large"):
        evaluate(expression)


@pytest.mark.parametrize(
    "expression",
    [
        "1e300 * 1e300",
        "2.0 ** 5000",
        "10.0 ** 400",
        "1e999",
        "factorial(1000) / 3",
        "factorial(1000) + 0.5",
    ],
)
def test_float_overflow_is_a_limit_error(expression: str) -> None:
    with pytest.raises(ToolLimitError, match="too large for floating point"):
        evaluate(expression)


@pytest.mark.parametrize("expression", ["factorial(100000)", "100000!", "factorial(1001)"])
def test_large_factorials_are_refused_before_computing(
    expression: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(calculator_module.math, "factorial", _fail_if_called)
    with pytest.raises(ToolLimitError, match="accepts arguments up to 1000"):
        evaluate(expression)


@pytest.mark.parametrize("expression", ["factorial(-1)", "factorial(2.5)"])
def test_factorial_needs_a_non_negative_whole_number(expression: str) -> None:
    with pytest.raises(ToolInputError, match="non-negative whole number"):
        evaluate(expression)


def test_overlong_input_is_refused_before_parsing(parsed_sources: list[str]) -> None:
    expression = "1+" * 250 + "1"
    assert len(expression) == 501
    with pytest.raises(ToolLimitError, match="501 characters long; the limit is 500"):
        evaluate(expression)
    assert parsed_sources == []


def test_input_at_the_length_limit_is_accepted() -> None:
    expression = "1" + "0" * 499
    assert evaluate(expression) == expression


def test_deep_parentheses_are_refused_before_parsing(parsed_sources: list[str]) -> None:
    with pytest.raises(ToolLimitError, match="parentheses 51 deep; the limit is 50"):
        evaluate("(" * 51 + "1" + ")" * 51)
    assert parsed_sources == []


def test_parentheses_at_the_depth_limit_are_accepted() -> None:
    assert evaluate("(" * 50 + "1" + ")" * 50) == "1"


@pytest.mark.parametrize("expression", ["-" * 50 + "1", "1**" * 60 + "1"])
def test_deeply_nested_operations_are_refused(expression: str) -> None:
    with pytest.raises(ToolLimitError, match="more than 50 deep"):
        evaluate(expression)


def test_operations_at_the_depth_limit_are_accepted() -> None:
    assert evaluate("-" * 49 + "1") == "-1"


def test_long_flat_chains_are_not_mistaken_for_deep_nesting() -> None:
    assert evaluate("*".join(["2"] * 60)) == str(2**60)


def test_too_many_nodes_are_refused() -> None:
    with pytest.raises(ToolLimitError, match="more than 200 numbers and operations"):
        evaluate("+".join(["1"] * 101))


def test_node_count_at_the_limit_is_accepted() -> None:
    assert evaluate("+".join(["1"] * 100)) == "100"


@pytest.mark.parametrize(
    ("expression", "named"),
    [
        ("__import__('os')", "function call '__import__('os')'"),
        ("x", "name 'x'"),
        ("x + 1", "name 'x'"),
        ("(1).real", "attribute access '.real'"),
        ("'a'*3", "string 'a'"),
        ("abs(-3)", "function call 'abs(-3)'"),
        ("factorial(1, 2)", "factorial takes exactly one argument"),
        ("factorial(n=3)", "factorial takes exactly one argument"),
        ("1 < 2", "comparison"),
        ("5!=3", "comparison"),
        ("1 << 2", "operator in '1 << 2'"),
        ("~1", "operator in '~1'"),
        ("not 1", "boolean operator"),
        ("1 and 2", "boolean operator"),
        ("True", "constant 'True'"),
        ("1j", "complex number"),
        ("[1, 2]", "[1, 2]"),
        ("1 if 1 else 2", "1 if 1 else 2"),
        ("lambda: 1", "lambda"),
        ("1,000", "thousands separators"),
    ],
)
def test_unsupported_syntax_is_named_and_supported_syntax_listed(
    expression: str, named: str
) -> None:
    with pytest.raises(ToolInputError) as raised:
        evaluate(expression)
    message = str(raised.value)
    assert named in message
    assert "Supported: numbers, + - * / // % ** (or ^)" in message


def test_code_in_the_expression_is_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    with pytest.raises(ToolInputError):
        evaluate(f"__import__('os').system('touch {marker}')")
    assert not marker.exists()


def test_evaluation_does_not_use_eval_or_exec(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(builtins, "eval", _fail_if_called)
    monkeypatch.setattr(builtins, "exec", _fail_if_called)
    assert evaluate("2 + 3 * 4") == "14"


@pytest.mark.parametrize("expression", ["2 +", "(1", "5!!", "1 2"])
def test_syntax_errors_are_input_errors(expression: str) -> None:
    with pytest.raises(ToolInputError, match=re.escape(f"could not parse '{expression}'")):
        evaluate(expression)


@pytest.mark.parametrize("expression", ["", "   ", "\n\t"])
def test_empty_expression_is_refused(expression: str) -> None:
    with pytest.raises(ToolInputError, match="empty"):
        evaluate(expression)


def test_tool_returns_the_result() -> None:
    assert calculator.invoke({"expression": "6*7"}) == "42"


def test_tool_is_named_and_described_for_the_model() -> None:
    assert calculator.name == "calculator"
    assert calculator.args_schema is CalculatorArgs
    assert "expression" in calculator.args
    assert calculator.args["expression"]["description"]
    assert calculator.description == (
        "Evaluate an arithmetic expression (+ - * / // % ** ^, parentheses, factorial) "
        "and return the exact result."
    )


@pytest.mark.parametrize(
    ("expression", "error"), [("1/0", ToolInputError), ("10**10**10", ToolLimitError)]
)
def test_tool_lets_tool_errors_propagate(expression: str, error: type[ToolError]) -> None:
    with pytest.raises(error):
        calculator.invoke({"expression": expression})
