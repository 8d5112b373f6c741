"""At 80 columns everything fits: answers (streamed or not), help, errors, cards, tables, plans and
approvals, in English and Chinese, with no line wider than 80 display cells and no word cut by a
line break (CJK counted two cells a character)."""

from __future__ import annotations

import io
import json
import random

import pytest
from rich.cells import cell_len
from rich.console import Console

from app.cli.answer import StreamedAnswer
from app.cli.approval_ui import ask_approval
from app.cli.progress import Progress
from app.cli.render import ConsoleRenderer
from app.service.events import Token, TurnEnd
from tests.conftest import run_cli

WIDTH = 80
PROSE_EN = (
    "The temperature difference between Paris and Tokyo is four degrees today; to search your "
    "own documents, run waypoint corpus add PATH first, then ask again. A long word such as "
    "internationalisation, or a path like workspace/reports/2026/summary.txt, stays whole."
)
PROSE_ZH = (
    "巴黎今天多云，最高气温九摄氏度，最低气温三摄氏度；东京局部多云，最高气温十三摄氏度。"
    "如果要搜索你自己的文档，请先运行 waypoint corpus add PATH，然后再问一次。"
)


def assert_fits(text: str, width: int = WIDTH) -> None:
    for line in text.splitlines():
        assert cell_len(line) <= width, f"{cell_len(line)} cells: {line!r}"


def assert_words_whole(output: str, *texts: str) -> None:
    """Each text appears in `output` whole: its words in order, none cut by a line break (CJK
    text may break between any two characters, so it is compared without whitespace)."""
    flat, packed = " ".join(output.split()), "".join(output.split())
    for text in texts:
        if text.isascii():
            assert " ".join(text.split()) in flat, f"{text!r} was cut in:\n{output}"
        else:
            assert "".join(text.split()) in packed, f"{text!r} was cut in:\n{output}"


def stored_answer(thread: str) -> str:
    shown = json.loads(run_cli("show", "-t", thread, "--json").stdout)
    return [m for m in shown["messages"] if m["type"] == "ai"][-1]["content"]


def terminal_console(screen: io.StringIO) -> Console:
    return Console(file=screen, width=WIDTH, force_terminal=True, color_system=None)


@pytest.mark.parametrize("text", [PROSE_EN, PROSE_ZH, f"{PROSE_EN}\n\n{PROSE_ZH}"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_streamed_answer_wraps_between_words_whatever_the_token_boundaries(text: str, seed: int):
    screen = io.StringIO()
    answer = StreamedAnswer(terminal_console(screen))
    pieces = random.Random(seed)
    start = 0
    while start < len(text):
        size = pieces.randint(1, 7)
        answer.feed(text[start : start + size])
        start += size
    answer.close()
    assert_fits(screen.getvalue())
    for paragraph in text.split("\n\n"):
        assert_words_whole(screen.getvalue(), paragraph)
    assert screen.getvalue().endswith("\n") and "\n\n\n" not in screen.getvalue()


def test_a_markdown_answer_streams_its_table_and_code_as_rendered_blocks():
    answer_text = (
        "Here are the two cities:\n\n"
        "| city | high |\n|---|---|\n| Paris | 9 |\n| Tokyo | 13 |\n\n"
        "And the code:\n\n```python\nfor i in range(3):\n    print('line', i)\n```\nDone.\n"
    )
    screen = io.StringIO()
    console = terminal_console(screen)
    renderer = ConsoleRenderer(console, console, progress=Progress(console, enabled=False))
    with renderer:
        for start in range(0, len(answer_text), 3):
            renderer.emit(Token("agent", answer_text[start : start + 3], "ai-1"))
        renderer.emit(TurnEnd("t", 1, "answered", "…"))
    shown = screen.getvalue()
    assert_fits(shown)
    assert "|---|" not in shown and "```" not in shown  # rendered, not raw
    assert "| Paris |" not in shown and "Paris" in shown and "Tokyo" in shown
    assert "for i in range(3):" in shown and "print('line', i)" in shown
    assert (
        shown.index("Here are") < shown.index("Paris") < shown.index("for i") < shown.index("Done.")
    )


def test_approvals_at_80_columns_in_english_and_chinese():
    screen = io.StringIO()
    console = Console(file=screen, width=WIDTH, color_system=None)
    calls = [
        {
            "id": "1",
            "name": "write_file",
            "args": {"path": "notes/trip.md", "content": f"{PROSE_EN}\n{PROSE_ZH}"},
            "reason": "overwrites the existing file 'notes/trip.md'",
        },
        {
            "id": "2",
            "name": "run_python",
            "args": {"code": f"print({PROSE_EN!r})\nprint({PROSE_ZH!r})"},
            "reason": "runs Python code",
        },
    ]
    ask_approval(calls, lambda question, default: "a", console)
    assert_fits(screen.getvalue())
    assert "notes/trip.md" in screen.getvalue()


def test_the_command_line_at_80_columns_in_english_and_chinese():
    """One screenful of each kind a user meets first: answers with cards, a plan, a refusal, an
    error, the tables and the help."""
    outputs = []

    def shown(*args: str, expect: int = 0) -> str:
        result = run_cli(*args, columns=WIDTH)
        assert result.returncode == expect, (args, result.stderr.decode())
        output = result.stdout.decode() + result.stderr.decode()
        outputs.append(output)
        return output

    weather = shown(
        "chat", "-t", "en", "-m", "get the weather in Paris and Tokyo, which is warmer?"
    )
    assert_words_whole(weather, stored_answer("en"))
    refusal = shown("chat", "-t", "en", "-m", "what is the meaning of life and everything in it")
    assert_words_whole(refusal, stored_answer("en"))
    zh = shown("chat", "-t", "zh", "-m", "巴黎和东京的天气怎么样？哪个更暖和？")
    assert_words_whole(zh, stored_answer("zh"))
    remembered = shown("chat", "-t", "zh", "-m", f"记住{PROSE_ZH}")
    assert_words_whole(remembered, stored_answer("zh"))
    shown("chat", "-t", "plan", "--strategy", "plan", "--approve", "auto", "-m",
          "weather in Paris and Rome, which is warmer? save it to trip.txt")  # fmt: skip
    shown("chat", "-t", "rf", "--strategy", "reflexion", "-m", "x" * 5 + " why", expect=1)
    too_long = shown("chat", "-t", "en", "-m", "word " * 30_000, expect=2)
    assert_words_whole(too_long, "raise it with APP_MAX_INPUT_CHARS, or put the text in a")
    for command in (
        ("history", "-t", "en"),
        ("history", "-t", "zh", "--all"),
        ("history", "-t", "en", "--tree"),
        ("threads", "list"),
        ("show", "-t", "plan"),
        ("show", "-t", "zh"),
        ("memory", "list"),
        ("--help",),
        ("chat", "--help"),
        ("history", "--help"),
    ):
        shown(*command)
    for output in outputs:
        assert_fits(output)


def test_prose_is_wrapped_on_a_terminal_or_at_a_named_width_and_piped_otherwise_kept_whole(
    monkeypatch: pytest.MonkeyPatch,
):
    from app.cli.io import wraps

    monkeypatch.delenv("COLUMNS", raising=False)
    assert not wraps(Console(file=io.StringIO()))  # a script reads the answer as written
    assert wraps(Console(file=io.StringIO(), force_terminal=True))
    monkeypatch.setenv("COLUMNS", "80")
    assert wraps(Console(file=io.StringIO()))


def test_a_whole_markdown_answer_is_rendered_on_a_terminal_and_kept_raw_when_piped():
    from app.cli.answer import print_answer

    text = "| city | high |\n|---|---|\n| Paris | 9 |\n\n**Paris** is cooler."
    screen = io.StringIO()
    print_answer(terminal_console(screen), text)
    assert "|---|" not in screen.getvalue() and "**" not in screen.getvalue()
    assert "Paris is cooler." in screen.getvalue()
    piped = io.StringIO()
    print_answer(Console(file=piped, width=WIDTH), text)
    assert piped.getvalue() == text + "\n"
