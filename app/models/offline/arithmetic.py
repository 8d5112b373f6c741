"""Arithmetic in a request, in symbols or words (English or Chinese), as calculator expressions:
every math token of the request is used, or the calculation is refused; never a fragment."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from tools.calculator.functions import CONSTANTS, FUNCTIONS

NUMBER = r"\d+(?:\.\d+)?(?:e[+-]?\d+)?"
# One operand a spelled-out function applies to: a number (maybe with n!), a constant, or a call.
ATOM = rf"(?:-?{NUMBER}!?|pi|tau|e)(?![A-Za-z0-9_(]|\.\d)"
ARGUMENT_LIST = rf"({ATOM}(?:\s*(?:,|\band\b|和|与|、)\s*{ATOM})+)"

NUMBER_WORDS = {
    word: str(value)
    for value, word in enumerate(
        [
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
    )
}
# Spelled-out functions, longest first: "log base 2 of" before "log of".
FUNCTION_WORDS: list[tuple[str, str]] = [
    (r"square roots?|sqrt|平方根|根号|开方", "sqrt"),
    (r"cube roots?|立方根", "cbrt"),
    (r"natural (?:log(?:arithm)?|logarithm)|自然对数", "ln"),
    (r"(?:common |base[- ]10 )log(?:arithm)?|log(?:arithm)? base 10|常用对数", "log10"),
    (r"(?:binary |base[- ]2 )log(?:arithm)?|log(?:arithm)? base 2", "log2"),
    (r"logarithm|对数", "log"),
    (r"hyperbolic sine|双曲正弦", "sinh"),
    (r"hyperbolic cosine|双曲余弦", "cosh"),
    (r"hyperbolic tangent|双曲正切", "tanh"),
    (r"arc ?sine|inverse sine|反正弦", "asin"),
    (r"arc ?cosine|inverse cosine|反余弦", "acos"),
    (r"atan2|two-argument arc ?tangent", "atan2"),
    (r"arc ?tangent|inverse tangent|反正切", "atan"),
    (r"sine|正弦", "sin"),
    (r"cosine|余弦", "cos"),
    (r"tangent|正切", "tan"),
    (r"exponential|指数", "exp"),
    (r"absolute value|绝对值", "abs"),
    (r"floor|向下取整", "floor"),
    (r"四舍五入", "round"),
    (r"ceiling|向上取整", "ceil"),
    (r"factorial|阶乘", "factorial"),
    (r"greatest common (?:divisor|factor)|highest common factor|gcd|最大公约数", "gcd"),
    (r"least common multiple|lowest common multiple|lcm|最小公倍数", "lcm"),
    (r"maximum|largest|biggest|max|最大值", "max"),
    (r"minimum|smallest|min|最小值", "min"),
    (r"hypotenuse|hypot", "hypot"),
]
SYMBOL_WORDS: list[tuple[str, str]] = [
    (r"（", "("),
    (r"）", ")"),
    (r"，(?=\s*\d)", ","),
    (r"π", " pi "),
    (r"√", " sqrt "),
    (r"×", " * "),
    (r"÷", " / "),
    (r"−", " - "),
    (r"\^", " ** "),
]
OPERATOR_WORDS: list[tuple[str, str]] = [
    (r"\b(?:multiplied|multiply(?: it)?) by\b|\btimes\b|乘以|乘|\bx\b(?=\s*\d)", "*"),
    (r"\b(?:divided|divide(?: it)?) by\b|\bover\b|除以", "/"),
    (r"\bmod(?:ulo)?\b|取余|取模|模(?=\s*\d)", "%"),
    (r"\bplus\b|加上|加", "+"),
    (r"\bminus\b|减去|减", "-"),
    (r"\bto the power of\b|\braised to(?: the power of)?\b", "**"),
    (r"\bsquared\b|的平方(?!根)", "** 2"),
    (r"\bcubed\b|的立方(?!根)", "** 3"),
]
# Words that may follow a number without making it a quantity of something ("3 km" is one).
AFTER_NUMBER = re.compile(
    r"(?:and|then|please|equals?|is|to|ok)\b|[=?.!,;:，。？！；：]|等于|是|多少|然后|并|再|吗|呢|和|的结果|\s*$"
)
UNIT_START = re.compile(r"[a-z\u4e00-\u9fff°$€£¥']")
THEN = re.compile(r"(?:\bthen|然后|再)\s*$")
# A lone "n!" is a factorial only where a calculation is asked for ("I have 3 cats!" is not one).
FACTORIAL_CUE = re.compile(
    r"(?:^|\b(?:what is|what's|whats|calculate|compute|evaluate|how much is)|计算|算|算一下|求|=)\s*$"
)
TOKEN = re.compile(
    rf"(?P<number>{NUMBER})|(?P<name>[a-z_][a-z0-9_]*)|(?P<op>\*\*|//|[+\-*/%!(),])"
    r"|(?P<space>\s+)|(?P<other>.)",
    re.S,
)
MATH_NAMES = set(FUNCTIONS) | set(CONSTANTS)
BINARY = {"**", "//", "*", "/", "%", "+", "-"}
# Operators that cannot open an expression ("-" and "+" can: they are also signs).
NO_START = BINARY - {"+", "-"} | {")", ",", "!"}
NO_END = BINARY | {"(", ","}


@dataclass(frozen=True)
class Calculation:
    """An expression found in a request (`readable`), or text that looks like one but is not."""

    expression: str
    position: int
    readable: bool
    then: bool = False  # an operation on the result of the calculation before it
    end: int = -1  # where it ends in the request as read (-1: not known)


def spelled_out(text: str) -> str:
    """Words for numbers, operators and functions become the calculator's symbols:
    'the square root of 16' -> 'sqrt(16)', '3 加 5 乘以 2' -> '3 + 5 * 2',
    '17 的阶乘' -> 'factorial(17)'."""
    for pattern, symbol in SYMBOL_WORDS:
        text = re.sub(pattern, symbol, text)
    text = re.sub(r"\b(" + "|".join(NUMBER_WORDS) + r")\b", lambda m: NUMBER_WORDS[m[1]], text)
    text = re.sub(r"\bnegative\s+|负\s*(?=\d)", "-", text)
    text = re.sub(rf"\bto the ({NUMBER})(?:st|nd|rd|th)(?: power)?\b", r" ** \1", text)
    text = _rounding(text)
    text = _sums_and_products(text)
    text = _percent_of(text)
    text = _chinese_power(text)
    text = _logarithm_bases(text)
    text = _degree_angles(text)
    for pattern, name in FUNCTION_WORDS:
        text = _function_words(text, pattern, name)
    text = re.sub(rf"({NUMBER})\s+factorial\b", r"\1!", text)
    for pattern, symbol in OPERATOR_WORDS:
        text = re.sub(pattern, f" {symbol} " if symbol.strip() else symbol, text)
    return _bare_calls(text)


def _rounding(text: str) -> str:
    places = r"(?:decimal\s+)?(?:places?|digits?|dp)"
    text = re.sub(
        rf"\bround(?:ed)?\s+(?:off\s+)?({ATOM})\s+to\s+({NUMBER})\s+{places}",
        r"round(\1, \2)",
        text,
    )
    return re.sub(rf"({ATOM})\s+rounded\s+to\s+({NUMBER})\s+{places}", r"round(\1, \2)", text)


def _sums_and_products(text: str) -> str:
    def joined(symbol: str) -> Callable[[re.Match[str]], str]:
        return lambda m: "(" + f" {symbol} ".join(_arguments(m[1])) + ")"

    text = re.sub(rf"\b(?:the\s+)?sum\s+of\s+{ARGUMENT_LIST}", joined("+"), text)
    text = re.sub(rf"{ARGUMENT_LIST}\s*的和", joined("+"), text)
    text = re.sub(rf"\b(?:the\s+)?product\s+of\s+{ARGUMENT_LIST}", joined("*"), text)
    return re.sub(rf"{ARGUMENT_LIST}\s*的积", joined("*"), text)


def _percent_of(text: str) -> str:
    # "20% of 50": the calculator's % is the remainder, so a percentage is written out.
    return re.sub(rf"({NUMBER})\s*(?:%|percent|per cent)\s+of\s+", r"(\1 / 100) * ", text)


def _chinese_power(text: str) -> str:
    return re.sub(rf"({NUMBER})\s*的\s*({NUMBER})\s*次(?:方|幂)", r"\1 ** \2", text)


def _logarithm_bases(text: str) -> str:
    text = re.sub(rf"\blog(?:arithm)?\s+base\s+({NUMBER})\s+of\s+({ATOM})", r"log(\2, \1)", text)
    text = re.sub(
        rf"\blog(?:arithm)?\s+(?:of\s+)?({ATOM})\s+(?:to\s+)?base\s+({NUMBER})",
        r"log(\1, \2)",
        text,
    )
    return re.sub(rf"以\s*({NUMBER})\s*为底\s*({ATOM})\s*的对数", r"log(\2, \1)", text)


def _degree_angles(text: str) -> str:
    """An angle in degrees inside a trigonometric function is converted to radians first;
    "X degrees in radians" and "X radians in degrees" convert."""
    trig = r"sin|cos|tan|sine|cosine|tangent|正弦|余弦|正切"
    text = re.sub(
        rf"\b({trig})\s*(?:of\s+)?\(?\s*(-?{NUMBER})\s*(?:degrees?|°|度)\s*\)?",
        r"\1(radians(\2))",
        text,
    )
    angle = rf"(-?{NUMBER}|pi|tau)"
    text = re.sub(rf"{angle}\s*(?:degrees?|°|度)\s+(?:in|to|into)\s+radians?", r"radians(\1)", text)
    return re.sub(rf"{angle}\s*radians?\s+(?:in|to|into)\s+degrees?", r"degrees(\1)", text)


def _function_words(text: str, pattern: str, name: str) -> str:
    words = rf"(?:\bthe\s+)?(?<![a-z])(?:{pattern})(?![a-z])"
    if FUNCTIONS[name].min_args >= 2:  # "the gcd of 12 and 18", "3、7 和 5 的最大值"
        text = re.sub(rf"{words}\s*(?:of\s+)?{ARGUMENT_LIST}", lambda m: _call(name, m[1]), text)
        return re.sub(rf"{ARGUMENT_LIST}\s*的\s*(?:{pattern})", lambda m: _call(name, m[1]), text)
    # "square root of 16", "16 的平方根", "根号 16"; "… of (" opens the call.
    text = re.sub(rf"({ATOM})\s*的\s*(?:{pattern})", rf"{name}(\1)", text)
    text = re.sub(rf"{words}\s*(?:of\s+)?({ATOM})", rf"{name}(\1)", text)
    return re.sub(rf"{words}\s*(?:of\s*)?\(", f"{name}(", text)


def _call(name: str, arguments: str) -> str:
    return f"{name}({', '.join(_arguments(arguments))})"


def _arguments(text: str) -> list[str]:
    return re.split(r"\s*(?:,|\band\b|和|与|、)\s*", text.strip())


def _bare_calls(text: str) -> str:
    """'sqrt 16' -> 'sqrt(16)': a function name before a bare operand."""
    names = "|".join(sorted(FUNCTIONS, key=len, reverse=True))
    return re.sub(rf"\b({names})\s+({ATOM})", r"\1(\2)", text)


def find_calculations(text: str) -> list[Calculation]:
    """Every calculation in `text` (lower-cased, with dates, file names and quotes blanked). Math
    with a dangling operator, a unit ("3 km + 4 km") or a word the calculator does not know glued
    to it makes the whole request's arithmetic unreadable: it is refused, never cut to what
    parses."""
    converted = spelled_out(text)
    found: list[Calculation] = []
    for run in _runs(converted):
        calculation = _calculation(converted, run)
        if calculation is None and found and _joined_to(converted, found[-1], run):
            # "atan of 1 and 1", "round 2.675 to 2": a number the calculation leaves out
            start, end = run[0].start(), run[-1].end()
            calculation = Calculation(converted[start:end], start, False, end=end)
        if calculation is not None:
            found.append(calculation)
    if any(not c.readable for c in found):
        return [Calculation(_span(converted, found), found[0].position, readable=False)]
    return found


def _joined_to(text: str, previous: Calculation, run: list[re.Match[str]]) -> bool:
    gap = text[previous.end : run[0].start()]
    return re.fullmatch(r"\s*(?:,|and|to|by|of|with|和|与|、)?\s*", gap) is not None


def _span(text: str, found: list[Calculation]) -> str:
    return re.sub(r"\s+", " ", text[found[0].position : found[-1].end]).strip()


def _runs(text: str) -> list[list[re.Match[str]]]:
    """Maximal sequences of math tokens (whitespace inside allowed); a word glued on joins them."""
    runs: list[list[re.Match[str]]] = []
    current: list[re.Match[str]] = []
    for token in TOKEN.finditer(text):
        kind = token.lastgroup
        if kind == "space":
            continue
        glued = kind == "name" and (
            (current and token.start() == current[-1].end())
            or re.match(r"[(\d]", text[token.end() : token.end() + 1]) is not None
        )
        if _is_math(token, text) or glued:
            current.append(token)
            continue
        if current:
            runs.append(current)
        current = []
    if current:
        runs.append(current)
    return runs


def _is_math(token: re.Match[str], text: str) -> bool:
    kind, value = token.lastgroup, token.group(0)
    if kind == "op" and value == ",":
        # a comma inside a call, or a thousands separator (the calculator explains that one)
        thousands = re.match(r"\d,\d{3}(?!\d)", text[max(token.start() - 1, 0) :])
        return _inside_parentheses(text, token.start()) or bool(thousands)
    return kind in {"number", "op"} or (kind == "name" and value in MATH_NAMES)


def _inside_parentheses(text: str, index: int) -> bool:
    before = text[:index]
    return before.count("(") > before.count(")")


def _calculation(text: str, run: list[re.Match[str]]) -> Calculation | None:
    """The run as a calculation (readable or not), or None when it is no calculation at all."""
    values = [t.group(0) for t in run]
    numbers = [t for t in run if t.lastgroup == "number" or t.group(0) in CONSTANTS]
    start, end = run[0].start(), run[-1].end()
    before, after = text[:start], text[end:]
    if not numbers:
        return None
    signed = values[0] in {"+", "-"}  # a leading sign is not an operation
    operators = {v for v in values[int(signed) :] if v in BINARY}
    called = any(v in FUNCTIONS for v in values)
    factorial = "!" in values and (len(values) > 2 or FACTORIAL_CUE.search(before) is not None)
    if values[0] in BINARY and THEN.search(before):  # "…, then divide by 2": on the result
        expression = re.sub(r"\s+", " ", text[start:end]).strip()
        return Calculation(expression, start, True, then=True, end=end)
    if not (len(numbers) >= 2 and operators) and not called and not factorial:
        if (operators or values[0] in BINARY) and (
            values[-1] in NO_END or _quantity_before(before)
        ):
            return Calculation(text[start:end].strip(), start, readable=False, end=end)
        return None  # a lone number (a year, a count) is not a calculation
    expression = re.sub(r"\s+", " ", text[start:end]).strip()
    expression = re.sub(r"(\d)\s+!", r"\1!", expression)
    return Calculation(expression, start, _whole(run, before, after), end=end)


def _whole(run: list[re.Match[str]], before: str, after: str) -> bool:
    """Nothing around the run belongs to it: no unknown word glued on, no dangling operator,
    no unit after its last number or before its first operator."""
    values = [t.group(0) for t in run]
    glued_word = any(t.lastgroup == "name" and t.group(0) not in MATH_NAMES for t in run)
    dangling = values[0] in NO_START or values[-1] in NO_END
    unit_after = run[-1].lastgroup == "number" and _unit_next(after.lstrip())
    unit_before = values[0] in BINARY and _quantity_before(before)
    return not (glued_word or dangling or unit_after or unit_before)


def _unit_next(after: str) -> bool:
    """A word, CJK character or currency/degree sign right after a number: "3 km", "3 米", "3 °"."""
    return UNIT_START.match(after) is not None and AFTER_NUMBER.match(after) is None


def _quantity_before(before: str) -> bool:
    """'… 3 km' right before an operator: the operand was a quantity with a unit."""
    return re.search(rf"{NUMBER}\s*(?:[a-z]+|[\u4e00-\u9fff]{{1,3}})\s*$", before) is not None
