"""Property test of the offline model (issue 31): generated calculations and weather comparisons, in
symbols, English, Chinese and mixtures, run as real graph turns; the answer must be the exact value
(computed here with Python's math on the generated tree) or an honest refusal, never a fragment."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.offline_turns import Turns
from tools.weather import forecast

# Deterministic and quick: the same examples on every run, nothing stored between runs.
PROPERTY = settings(
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
NUMBER_WORDS = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
]


class Undefined(Exception):
    """The generated expression has no real value (the calculator must refuse it)."""


# --- expressions: a tree, its value, and its phrasing ---------------------------------------------


@dataclass(frozen=True)
class Num:
    value: int | float

    def evaluate(self) -> float:
        return self.value


@dataclass(frozen=True)
class Bin:
    op: str
    left: Node
    right: Node

    def evaluate(self) -> float:
        a, b = self.left.evaluate(), self.right.evaluate()
        if (self.op == "/" and b == 0) or (self.op == "**" and a == 0 and b < 0):
            raise Undefined
        return {"+": a + b, "-": a - b, "*": a * b, "/": a / b if b else 0, "**": a**b}[self.op]


@dataclass(frozen=True)
class Fn:
    name: str
    args: tuple[Node, ...]

    def evaluate(self) -> float:
        values = [a.evaluate() for a in self.args]
        try:
            return MATH[self.name](*values)
        except ValueError:
            raise Undefined from None


Node = Num | Bin | Fn


def _factorial(x: float) -> int:
    if x < 0 or x != int(x):
        raise ValueError
    return math.factorial(int(x))


MATH: dict[str, Callable[..., float]] = {
    "sqrt": math.sqrt,
    "cbrt": math.cbrt,
    "abs": abs,
    "floor": math.floor,
    "ceil": math.ceil,
    "ln": math.log,
    "log10": math.log10,
    "sin": math.sin,
    "cos": math.cos,
    "factorial": _factorial,
    "max": max,
    "min": min,
    "gcd": lambda a, b: math.gcd(int(a), int(b)),
}
SINGLE = ["sqrt", "cbrt", "abs", "floor", "ceil", "ln", "log10", "sin", "cos"]
WORDS_EN = {
    "sqrt": "the square root of",
    "cbrt": "the cube root of",
    "abs": "the absolute value of",
    "floor": "the floor of",
    "ceil": "the ceiling of",
    "ln": "the natural log of",
    "log10": "the common log of",
    "sin": "the sine of",
    "cos": "the cosine of",
    "max": "the maximum of",
    "min": "the minimum of",
    "gcd": "the greatest common divisor of",
}
WORDS_ZH = {"sqrt": "平方根", "cbrt": "立方根", "abs": "绝对值", "factorial": "阶乘"}
OPERATORS = {
    "symbols": {"+": "+", "-": "-", "*": "*", "/": "/", "**": "**"},
    "caret": {"+": "+", "-": "−", "*": "×", "/": "÷", "**": "^"},
    "en": {"+": "plus", "-": "minus", "*": "times", "/": "divided by", "**": "to the power of"},
    "zh": {"+": "加", "-": "减", "*": "乘以", "/": "除以", "**": None},
}


def numbers() -> st.SearchStrategy[Num]:
    whole = st.integers(0, 12).map(Num)
    negative = st.integers(-9, -1).map(Num)
    decimal = st.sampled_from([0.5, 1.5, 2.5, 3.25, 7.5]).map(Num)
    return st.one_of(whole, whole, decimal, negative)


def trees() -> st.SearchStrategy[Node]:
    def extend(children: st.SearchStrategy[Node]) -> st.SearchStrategy[Node]:
        binary = st.builds(Bin, st.sampled_from(["+", "-", "*", "/"]), children, children)
        # Small exponents on a number: no result too large to print, no complex roots.
        power = st.builds(Bin, st.just("**"), numbers(), st.integers(0, 3).map(Num))
        single = st.builds(Fn, st.sampled_from(SINGLE), st.tuples(children))
        factorial = st.builds(Fn, st.just("factorial"), st.tuples(st.integers(0, 10).map(Num)))
        pair = st.builds(Fn, st.sampled_from(["max", "min"]), st.tuples(children, children))
        gcd = st.builds(Fn, st.just("gcd"), st.tuples(*[st.integers(1, 60).map(Num)] * 2))
        return st.one_of(binary, binary, binary, power, single, single, factorial, pair, gcd)

    return st.recursive(numbers(), extend, max_leaves=6)


def is_atom(node: Node) -> bool:
    return isinstance(node, Num)


def phrase(node: Node, style: Callable[[], str]) -> str:
    """`node` in words or symbols; each node picks its own style, so phrasings mix."""
    mode = style()
    if isinstance(node, Num):
        value = node.value
        if mode == "en" and isinstance(value, int) and 0 <= value <= 12 and value % 2:
            return NUMBER_WORDS[value]
        if value < 0 and mode in {"en", "zh"}:
            return f"{'negative ' if mode == 'en' else '负'}{-value}"
        return str(value)
    if isinstance(node, Bin):
        return _binary(node, mode, style)
    return _function(node, mode, style)


def _operand(node: Node, style: Callable[[], str]) -> str:
    """A composite operand in parentheses, except a call in symbols ("sqrt(2)*10" is one call)."""
    text = phrase(node, style)
    bare = (is_atom(node) and node.value >= 0) or _is_one_call(text)  # "2 * (-3)", "(-2) ** 2"
    return text if bare else f"({text})"


def _is_one_call(text: str) -> bool:
    if re.fullmatch(r"\d+!", text):
        return True
    opening = re.match(r"[a-z][a-z0-9]*\(", text)
    if not opening:
        return False
    depth = 0
    for index, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0 and index >= opening.end():
            return index == len(text) - 1
    return False


def _binary(node: Bin, mode: str, style: Callable[[], str]) -> str:
    if mode == "zh" and node.op == "**":
        return f"{_operand(node.left, style)} 的 {node.right.value} 次方"
    word = OPERATORS[mode if mode in OPERATORS else "symbols"][node.op]
    return f"{_operand(node.left, style)} {word} {_operand(node.right, style)}"


def _function(node: Fn, mode: str, style: Callable[[], str]) -> str:
    args = node.args
    if node.name == "factorial":
        n = args[0].value
        return {"en": f"{n} factorial", "zh": f"{n} 的阶乘"}.get(mode, f"{n}!")
    if mode == "zh" and node.name in WORDS_ZH and is_atom(args[0]):
        return f"{phrase(args[0], style)} 的{WORDS_ZH[node.name]}"
    if mode == "en" and node.name in WORDS_EN and (len(args) == 1 or all(map(is_atom, args))):
        listed = " and ".join(_operand(a, style) for a in args)
        return f"{WORDS_EN[node.name]} {listed}"
    return f"{node.name}({', '.join(phrase(a, style) for a in args)})"


MODES = ["symbols", "symbols", "caret", "en", "zh"]
REQUESTS = [
    "{}",
    "what is {}",
    "what's {}?",
    "calculate {}",
    "compute {} please",
    "计算 {}",
    "{} 等于多少",
    "{} 是多少？",
    "请算一下 {}",
]


@dataclass(frozen=True)
class Case:
    text: str
    tree: Node


@st.composite
def calculations(draw: st.DrawFn) -> Case:
    tree = draw(trees())
    # A fixed number of draws, whatever the tree: the data generation stays shrinkable.
    modes = iter(draw(st.lists(st.sampled_from(MODES), min_size=64, max_size=64)))
    text = phrase(tree, lambda: next(modes, "symbols"))
    return Case(draw(st.sampled_from(REQUESTS)).format(text), tree)


@pytest.fixture(scope="module")
def turns(tmp_path_factory: pytest.TempPathFactory) -> Turns:
    return Turns(tmp_path_factory.mktemp("ws"))


def expected_value(tree: Node) -> float | None:
    try:
        value = tree.evaluate()
    except (Undefined, OverflowError):
        return None
    return value if math.isfinite(value) else None


@settings(PROPERTY, max_examples=80)
@given(case=calculations())
def test_a_calculation_is_answered_exactly_and_refused_only_without_a_value(
    turns: Turns, case: Case
) -> None:
    turn = turns.ask(case.text)
    value = expected_value(case.tree)
    calculated = turn.calculated()
    if value is None or is_atom(case.tree):  # no value, or no calculation: refused
        assert turn.refused(), (case.text, turn.answer)
        return
    # Every generated form is documented, so a calculation with a value is never refused.
    assert calculated, (case.text, turn.answer)
    [result] = calculated
    assert math.isclose(float(result), value, rel_tol=1e-11, abs_tol=1e-11), (
        case.text,
        turn.answer,
        value,
    )


UNITS = ["km", "kg", "m", "apples", "米", "公斤"]


@settings(PROPERTY, max_examples=30)
@given(
    a=st.integers(1, 99),
    b=st.integers(1, 99),
    unit=st.sampled_from(UNITS),
    op=st.sampled_from(["+", "plus", "times", "*", "加", "乘以"]),
    glued=st.booleans(),
    request=st.sampled_from(REQUESTS),
)
def test_a_quantity_with_a_unit_is_refused_not_stripped(
    turns: Turns, a: int, b: int, unit: str, op: str, glued: bool, request: str
) -> None:
    space = "" if glued else " "
    text = request.format(f"{a}{space}{unit} {op} {b}{space}{unit}")
    turn = turns.ask(text)
    assert turn.refused(), (text, turn.answer)


# --- several cities ------------------------------------------------------------------------------

CITIES = ["Paris", "Rome", "Tokyo", "London", "Cairo", "Seoul", "Sydney", "Moscow", "Dubai"]


@st.composite
def comparisons(draw: st.DrawFn) -> tuple[str, list[str], bool, bool]:
    cities = draw(st.lists(st.sampled_from(CITIES), min_size=2, max_size=4, unique=True))
    chinese = draw(st.booleans())
    colder = draw(st.booleans())
    names = [forecast(c)["city_zh"] for c in cities] if chinese else cities
    if chinese:
        question = (
            ("哪个最冷？" if colder else "哪个最暖？")
            if len(cities) > 2
            else ("哪个更冷？" if colder else "哪个更热？")
        )
        text = "、".join(names[:-1]) + "和" + names[-1] + "的天气，" + question
    else:
        degree = "est" if len(cities) > 2 else "er"
        word = draw(st.sampled_from(["cold", "cool"] if colder else ["warm", "hott"]))
        listed = ", ".join(names[:-1]) + " and " + names[-1]
        text = draw(
            st.sampled_from(
                [
                    f"weather in {listed}, which is {word}{degree}?",
                    f"Compare the weather in {listed}: which one is {word}{degree}?",
                ]
            )
        )
    return text, cities, chinese, colder


@pytest.mark.dated  # reruns on other pinned days: tests/test_pinned_dates.py
@settings(PROPERTY, max_examples=30)
@given(case=comparisons())
def test_a_comparison_names_the_right_city_or_refuses(
    turns: Turns, case: tuple[str, list[str], bool, bool]
) -> None:
    text, cities, chinese, colder = case
    answer = turns.ask(text).answer
    forecasts = [forecast(c) for c in cities]
    highs = [f["high"] for f in forecasts]
    best = min(highs) if colder else max(highs)
    winners = [(f["city_zh"] if chinese else f["city"]) for f in forecasts if f["high"] == best]
    others = [(f["city_zh"] if chinese else f["city"]) for f in forecasts if f["high"] != best]
    gap = max(highs) - min(highs)
    if gap == 0:
        assert ("相同" if chinese else "same high") in answer, (text, answer)
        return
    verdict = answer.splitlines()[-1]
    lead = _lead(verdict, len(cities), chinese, colder)
    assert sorted(w for w in winners if w in lead) == sorted(winners), (text, answer)
    assert not [o for o in others if o in lead], (text, answer)
    assert f"{gap}°C" in verdict, (text, answer)


def _lead(verdict: str, count: int, chinese: bool, colder: bool) -> str:
    """The part of the verdict that names the winner(s)."""
    if chinese and count > 2:
        marker = "最冷的是" if colder else "最暖的是"
        return verdict.split(marker, 1)[1].split("（", 1)[0]
    if chinese:
        return verdict.removeprefix("温差：").split("比", 1)[0]
    if count > 2:
        return verdict.split(" the coldest" if colder else " the warmest", 1)[0]
    return verdict.removeprefix("Difference: ").split(" is ", 1)[0]
