"""The offline model uses all of a request or refuses it (issue 31): every calculator function in
symbols and words, no calculation cut to a fragment, the README's chain example, comparisons that
name the winner in every strategy, and a greeting for small talk."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from graphs.catalog import STRATEGY_NAMES
from tests.conftest import run_cli
from tests.expected import assert_names_the_warmer_city
from tests.offline_turns import Turns
from tools.calculator.functions import FUNCTIONS
from tools.weather import forecast

STRATEGIES = list(STRATEGY_NAMES)
DEGREE = math.pi / 180

# Every whitelisted function: (symbols, its value), then the same call in words (en, zh).
FUNCTION_FORMS: dict[str, tuple[str, float, list[str]]] = {
    "sqrt": ("sqrt(2)*10", math.sqrt(2) * 10, ["the square root of 200", "200 的平方根"]),
    "cbrt": ("cbrt(27)", 3, ["the cube root of 27", "27 的立方根"]),
    "exp": ("exp(1)", math.e, ["the exponential of 1"]),
    "log": ("log(1000, 10)", 3, ["the logarithm of 1000 to base 10", "以 10 为底 1000 的对数"]),
    "ln": ("ln(e)", 1, ["the natural log of e"]),
    "log10": ("log10(1000)", 3, ["the common log of 1000"]),
    "log2": ("log2(8)", 3, ["the binary log of 8"]),
    "sin": ("sin(radians(30))", 0.5, ["the sine of 30 degrees", "正弦 30 度"]),
    "cos": ("cos(0)", 1, ["the cosine of 0"]),
    "tan": ("tan(radians(45))", 1, ["the tangent of 45 degrees"]),
    "asin": ("asin(1)", math.pi / 2, ["the arcsine of 1"]),
    "acos": ("acos(1)", 0, ["the arccosine of 1"]),
    "atan": ("atan(1)", math.pi / 4, ["the arctangent of 1"]),
    "atan2": ("atan2(1, 1)", math.pi / 4, ["atan2 of 1 and 1"]),
    "sinh": ("sinh(1)", math.sinh(1), ["the hyperbolic sine of 1"]),
    "cosh": ("cosh(1)", math.cosh(1), ["the hyperbolic cosine of 1"]),
    "tanh": ("tanh(1)", math.tanh(1), ["the hyperbolic tangent of 1"]),
    "degrees": ("degrees(pi)", 180, ["pi radians in degrees"]),
    "radians": ("radians(180)", math.pi, ["180 degrees in radians"]),
    "floor": ("floor(2.7)", 2, ["the floor of 2.7", "向下取整 2.7"]),
    "ceil": ("ceil(2.1)", 3, ["the ceiling of 2.1"]),
    "round": ("round(2.675, 2)", 2.68, ["round 2.675 to 2 decimal places", "四舍五入 2.5"]),
    "abs": ("abs(-3)", 3, ["the absolute value of -3", "-3 的绝对值"]),
    "min": ("min(3, 7, 5)", 3, ["the minimum of 3, 7 and 5", "3、7 和 5 的最小值"]),
    "max": ("max(3, 7, 5)", 7, ["the maximum of 3, 7 and 5", "3、7 和 5 的最大值"]),
    "hypot": ("hypot(3, 4)", 5, ["the hypotenuse of 3 and 4"]),
    "gcd": (
        "gcd(12, 18)",
        6,
        ["the greatest common divisor of 12 and 18", "12 和 18 的最大公约数"],
    ),
    "lcm": ("lcm(4, 6)", 12, ["the least common multiple of 4 and 6"]),
    "factorial": ("17!", math.factorial(17), ["17 factorial", "17 的阶乘"]),
}
# "四舍五入 2.5" rounds half away from zero, as the calculator documents.
WORD_VALUES = {"四舍五入 2.5": 3}


@pytest.fixture(scope="module")
def turns(tmp_path_factory: pytest.TempPathFactory) -> Turns:
    return Turns(tmp_path_factory.mktemp("ws"))


def assert_calculates(turns: Turns, text: str, value: float) -> None:
    turn = turns.ask(text)
    [result] = turn.calculated()
    assert math.isclose(float(result), value, rel_tol=1e-11, abs_tol=1e-12), (text, turn.answer)


def test_every_calculator_function_has_a_symbol_and_a_word_form() -> None:
    assert set(FUNCTION_FORMS) == set(FUNCTIONS)


@pytest.mark.parametrize("name", sorted(FUNCTION_FORMS))
def test_every_calculator_function_is_reachable_in_symbols(turns: Turns, name: str) -> None:
    symbols, value, _ = FUNCTION_FORMS[name]
    assert_calculates(turns, symbols, value)
    assert_calculates(turns, f"what is {symbols}?", value)


@pytest.mark.parametrize(
    ("name", "words"), [(name, w) for name, (_, _, forms) in FUNCTION_FORMS.items() for w in forms]
)
def test_every_calculator_function_is_reachable_in_words(
    turns: Turns, name: str, words: str
) -> None:
    assert_calculates(turns, words, WORD_VALUES.get(words, FUNCTION_FORMS[name][1]))


@pytest.mark.parametrize(
    ("text", "expression", "result"),
    [
        ("sqrt(2)*10", "sqrt(2)*10", "14.1421356237"),
        ("what is 17!", "17!", "355687428096000"),
        ("17!", "17!", "355687428096000"),
        ("what is the square root of 16", "sqrt(16)", "4"),
        ("what is 2 to the 10th power", "2 ** 10", "1024"),
        ("20% of 50", "(20 / 100) * 50", "10"),
    ],
)
def test_the_issue_examples_compute_the_whole_expression(
    turns: Turns, text: str, expression: str, result: str
) -> None:
    turn = turns.ask(text)
    assert turn.calls("calculator") == [{"expression": expression}]
    assert turn.answer == f"{expression} = {result}"


@pytest.mark.parametrize(
    ("text", "result"),
    [
        ("what is -3 + 5", "2"),  # a leading sign is not a dangling operator
        ("what is 2 plus 3 \ufffd", "5"),  # a stray symbol after a number is not a unit
        ("what is 1e3 + 1", "1001"),
        ("the square root of negative 4 plus 6", None),  # sqrt(-4): the calculator says why
        ("what's 7 mod 3", "1"),
        ("(2+3)*4 and then divide by 2", "10"),
    ],
)
def test_phrasings_around_the_math_do_not_change_it(
    turns: Turns, text: str, result: str | None
) -> None:
    turn = turns.ask(text)
    if result is None:
        assert turn.refused() and "sqrt is undefined for negative numbers" in turn.answer
    else:
        assert turn.calculated()[-1] == result


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_computes_the_whole_expression_or_refuses(
    tmp_path: Path, strategy: str
) -> None:
    turns = Turns(tmp_path, strategy)
    assert turns.ask("sqrt(2)*10").calculated() == ["14.1421356237"]
    assert turns.ask("what is the square root of 16").calculated() == ["4"]
    assert turns.ask("17 的阶乘是多少").calculated() == ["355687428096000"]
    assert turns.ask("what is 5 km + 3 km").refused()


@pytest.mark.parametrize(
    "text",
    [
        "foo(2)*10",  # an unknown function is named by the calculator, not dropped
        "what is 5 km + 3 km",
        "what is 3 km times 2",
        "what is 3 * 2 km",
        "10kg * 2",
        "what is 2 plus",
        "what is 6 times 7 and 5",
        "the arctangent of 1 and 2",
        "round 2.675 to 2",
        "3 米 加 4 米",
    ],
)
def test_math_the_calculator_cannot_take_whole_is_refused_never_cut(
    turns: Turns, text: str
) -> None:
    turn = turns.ask(text)
    assert turn.refused(), turn.answer
    assert not [m for m in turn.results("calculator") if m.status != "error"]


def test_a_refusal_says_what_the_calculator_takes(turns: Turns) -> None:
    answer = turns.ask("what is 5 km + 3 km").answer
    assert "5 km + 3 km" in answer and "computed none of it" in answer
    assert "sqrt(x)" in answer and "units" in answer


# --- the README's chain example -----------------------------------------------------------------

CHAIN = "look up Paris and Tokyo, compute the difference, and save it to diff.txt"


def assert_saved_the_difference(workspace: Path) -> None:
    saved = (workspace / "diff.txt").read_text(encoding="utf-8")
    paris, tokyo = forecast("Paris"), forecast("Tokyo")
    assert "long-term memory" not in saved and "web_search" not in saved
    for city in (paris, tokyo):
        assert f"{city['city']} on {city['date']}" in saved
    assert_names_the_warmer_city(saved, paris, tokyo, chinese=False)


@pytest.mark.dated  # reruns on other pinned days: tests/test_pinned_dates.py
def test_the_chain_example_saves_the_difference_in_a_fresh_thread(isolated: Path) -> None:
    result = run_cli("chat", "-t", "chain", "-m", CHAIN)
    assert result.returncode == 0, result.stderr.decode()
    assert "diff.txt" in result.stdout.decode()
    assert_saved_the_difference(isolated / "workspace")


@pytest.mark.dated  # reruns on other pinned days: tests/test_pinned_dates.py
def test_the_chain_example_after_a_recall_saves_the_difference_not_the_recall(
    isolated: Path,
) -> None:
    assert run_cli("chat", "-t", "one", "-m", "remember that my name is Ada").returncode == 0
    recalled = run_cli("chat", "-t", "two", "-m", "what do you remember about my name?")
    assert "Ada" in recalled.stdout.decode()

    result = run_cli("chat", "-t", "two", "-m", CHAIN)
    assert result.returncode == 0, result.stderr.decode()
    assert_saved_the_difference(isolated / "workspace")


@pytest.mark.dated  # reruns on other pinned days: tests/test_pinned_dates.py
def test_a_ranking_missing_a_city_is_not_made(turns: Turns) -> None:
    turn = turns.ask("weather in Paris, Rome and Atlantis, which is warmest?")
    assert turn.calls("calculator") == []
    assert "couldn't compare" in turn.answer and "warmest" not in turn.answer


@pytest.mark.dated  # reruns on other pinned days: tests/test_pinned_dates.py
def test_a_save_after_a_failed_step_writes_nothing_and_says_why(turns: Turns) -> None:
    turn = turns.ask("weather in Paris and Atlantis, compute the difference and save it to a.txt")
    assert turn.calls("write_file") == []
    assert "I did not write a.txt" in turn.answer


def test_a_save_never_holds_the_previous_unrelated_answer(turns: Turns) -> None:
    turn = turns.ask("what time is it?", "compute the difference and save it to d.txt")
    assert turn.calls("write_file") == []


# --- comparisons name the winner, in every strategy ---------------------------------------------


def warmest(cities: list[str], date: str = "today") -> tuple[list[dict], int, int]:
    forecasts = [forecast(city, date=date) for city in cities]
    highs = [f["high"] for f in forecasts]
    return forecasts, max(highs), min(highs)


@pytest.mark.dated  # reruns on other pinned days: tests/test_pinned_dates.py
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_two_cities_the_answer_names_the_warmer(tmp_path: Path, strategy: str) -> None:
    turn = Turns(tmp_path, strategy).ask("weather in Paris and Rome, which is warmer?")
    paris, rome = forecast("Paris"), forecast("Rome")
    assert_names_the_warmer_city(turn.answer, paris, rome, chinese=False)


@pytest.mark.dated  # reruns on other pinned days: tests/test_pinned_dates.py
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize(
    ("text", "cities", "colder"),
    [
        ("weather in Paris, Rome and Tokyo, which is warmest?", ["Paris", "Rome", "Tokyo"], False),
        (
            "Compare the weather in Stockholm, Cairo, Nairobi and Seoul: which is coldest?",
            ["Stockholm", "Cairo", "Nairobi", "Seoul"],
            True,
        ),
    ],
)
def test_three_cities_or_more_the_answer_names_the_warmest_or_coldest(
    tmp_path: Path, strategy: str, text: str, cities: list[str], colder: bool
) -> None:
    turn = Turns(tmp_path, strategy).ask(text)
    forecasts, top, bottom = warmest(cities)
    first = [f["city"] for f in forecasts if f["high"] == (bottom if colder else top)]
    other = [f["city"] for f in forecasts if f["high"] == (top if colder else bottom)]
    word = "coldest" if colder else "warmest"
    if top == bottom:
        assert "same high" in turn.answer
        return
    assert f"{first[0]}" in turn.answer and f"the {word} (high" in turn.answer
    assert turn.answer.index(first[0]) < turn.answer.index(f"the {word}")
    assert f"{top - bottom}°C {'colder' if colder else 'warmer'} than {other[0]}" in turn.answer


@pytest.mark.dated  # reruns on other pinned days: tests/test_pinned_dates.py
def test_three_cities_in_chinese_name_the_warmest(turns: Turns) -> None:
    answer = turns.ask("巴黎、罗马和东京的天气，哪个最暖？").answer
    forecasts, top, bottom = warmest(["Paris", "Rome", "Tokyo"])
    if top != bottom:
        hottest = next(f["city_zh"] for f in forecasts if f["high"] == top)
        assert f"最暖的是{hottest}" in answer and f"相差 {top - bottom}°C" in answer


# --- small talk ---------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize(
    ("text", "greeting"),
    [
        ("hello there", "Hello!"),
        ("Hi!", "Hello!"),
        ("你好", "你好！"),
        ("thanks a lot", "You're welcome!"),
    ],
)
def test_small_talk_gets_a_short_greeting_not_the_refusal(
    tmp_path: Path, strategy: str, text: str, greeting: str
) -> None:
    answer = Turns(tmp_path, strategy).ask(text).answer
    assert answer.startswith(greeting)
    assert "can't answer" not in answer and "回答不了" not in answer
    assert len(answer) < 400
    if greeting in {"Hello!", "你好！"}:  # says what it can do
        assert "weather" in answer or "天气" in answer


def test_a_greeting_with_a_request_is_not_small_talk(turns: Turns) -> None:
    assert "can't answer that" in turns.ask("hello, write me a poem").answer
    turn = turns.ask("hi, what is 6 times 7?")
    assert turn.calculated() == ["42"]
