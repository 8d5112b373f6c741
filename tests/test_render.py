"""What a turn looks like in a terminal: a spinner with the elapsed time while it waits (stderr on a
terminal only, gone before anything else is printed), and one card per tool call whose result is
readable and bounded at 80 columns."""

from __future__ import annotations

import io
import json
import re
import threading
import time

from langchain_core.messages import AIMessage
from rich.console import Console
from rich.text import Text

from app.cli.progress import SHOW_AFTER_S, Progress
from app.cli.render import ConsoleRenderer, JsonlRenderer
from app.service.events import NodeUpdate, Token, ToolCallStarted, ToolFinished, TurnEnd
from tests.conftest import run_cli

ERASE_LINE = "\x1b[1A\x1b[2K"  # how rich takes a transient display away: up a line, erase it


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def terminal(width: int = 80, *, is_terminal: bool = True) -> tuple[io.StringIO, Console, Console]:
    """One screen: stdout and stderr consoles writing to the same buffer, as on a terminal."""
    screen = io.StringIO()
    out = Console(file=screen, width=width, force_terminal=is_terminal, color_system=None)
    err = Console(file=screen, width=width, force_terminal=is_terminal, color_system=None)
    return screen, out, err


def renderer_on(out: Console, err: Console, clock: Clock) -> ConsoleRenderer:
    return ConsoleRenderer(out, err, progress=Progress(err, enabled=True, clock=clock))


def test_a_spinner_with_the_elapsed_time_shows_while_a_tool_runs_and_goes_before_its_card():
    screen, out, err = terminal()
    clock = Clock()
    renderer = renderer_on(out, err, clock)
    with renderer:
        clock.now += 2 * SHOW_AFTER_S
        renderer.progress.refresh()
        assert "thinking · 0s" in screen.getvalue()  # before the model's first token
        renderer.emit(ToolCallStarted("c1", "slow_step", {"label": "A"}))
        clock.now += 12
        renderer.progress.refresh()
        assert "running slow_step · 12s" in screen.getvalue()
        renderer.emit(ToolFinished("c1", "slow_step", "success", "finished A", 12000.0))
        card_at = screen.getvalue().index("slow_step  12000 ms")
        assert screen.getvalue().rindex(ERASE_LINE, 0, card_at) > screen.getvalue().rindex(
            "running slow_step · 12s", 0, card_at
        )
        clock.now += 2 * SHOW_AFTER_S
        renderer.progress.refresh()
        assert renderer.progress.shown  # waiting for the model again
        renderer.emit(Token("agent", "All done.", "m1"))
        assert not renderer.progress.shown  # output started
        renderer.emit(TurnEnd("t", 1, "answered", "All done."))
    text = screen.getvalue()
    assert text.rindex(ERASE_LINE) < text.index("All done.")
    assert text.endswith("All done.\n")


def test_a_wait_shorter_than_the_delay_draws_no_spinner():
    screen, out, err = terminal()
    clock = Clock()
    renderer = renderer_on(out, err, clock)
    with renderer:
        clock.now += SHOW_AFTER_S / 2
        renderer.progress.refresh()
        assert not renderer.progress.shown
        renderer.emit(Token("agent", "Quick.", "m1"))
        renderer.emit(TurnEnd("t", 1, "answered", "Quick."))
    assert screen.getvalue() == "Quick.\n"  # nothing drawn, nothing to erase


def test_a_finished_turn_leaves_no_spinner_thread_behind():
    _, out, err = terminal()
    clock = Clock()
    with renderer_on(out, err, clock) as renderer:
        clock.now += 2 * SHOW_AFTER_S
        renderer.progress.refresh()
        assert renderer.progress.shown
        assert spinner_threads()
    deadline = time.monotonic() + 30  # it ends IDLE_EXIT_S after the last spinner stopped
    while spinner_threads() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not spinner_threads()


def spinner_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "spinner" and t.is_alive()]


def test_no_spinner_when_stderr_is_not_a_terminal():
    screen, out, err = terminal(is_terminal=False)
    renderer = renderer_on(out, err, Clock())
    with renderer:
        renderer.emit(ToolCallStarted("c1", "calculator", {"expression": "6 * 7"}))
        renderer.emit(ToolFinished("c1", "calculator", "success", "42", 0.4))
        renderer.emit(TurnEnd("t", 1, "answered", "6 * 7 = 42"))
    assert "thinking" not in screen.getvalue() and "running" not in screen.getvalue()
    assert "\x1b" not in screen.getvalue()


INJECTED = (
    "6 * 7 = 42\x1b[2J\x1b]52;c;cm0gLXJmIH4K\x07\tdone\r\n"  # clear screen, set the clipboard
)


def test_an_answer_cannot_send_escape_sequences_to_the_terminal():
    screen, out, err = terminal()
    with renderer_on(out, err, Clock()) as renderer:
        renderer.emit(Token("agent", INJECTED[:12], "ai-1"))  # streamed, the sequence split
        renderer.emit(Token("agent", INJECTED[12:], "ai-1"))
        renderer.emit(
            NodeUpdate("agent", {"messages": [AIMessage(INJECTED, id="ai-2")]})
        )  # not streamed: printed whole
        renderer.emit(TurnEnd("t", 1, "answered", INJECTED))
    shown = screen.getvalue()
    assert "\x07" not in shown and "\x1b[2J" not in shown and "\x1b]52" not in shown
    escaped = re.escape("6 * 7 = 42\\x1b[2J\\x1b]52;c;cm0gLXJmIH4K\\x07")
    assert len(re.findall(escaped + r"\s+done\n", shown)) == 2  # the tab and line break kept


def test_streamed_text_is_shown_as_the_model_wrote_it():
    """No markup, no emoji codes, tabs and line breaks as they are: the terminal shows the text."""
    screen, out, err = terminal()
    with renderer_on(out, err, Clock()) as renderer:
        for piece in ("[bold]not bold[/bold] ", ":smile: ", "a\tb", "\nnext line"):
            renderer.emit(Token("agent", piece, "ai-1"))
        renderer.emit(TurnEnd("t", 1, "answered", "…"))
    assert screen.getvalue() == "[bold]not bold[/bold] :smile: a\tb\nnext line\n"


def test_the_cli_consoles_show_emoji_codes_as_written():
    from app.cli.io import Invocation

    console = Invocation().out
    with console.capture() as captured:
        console.print(":smile: done", markup=False, highlight=False)
    assert captured.get() == ":smile: done\n"


def test_jsonl_never_shows_a_spinner_even_on_a_terminal():
    screen, out, _ = terminal()
    with JsonlRenderer(out) as renderer:
        renderer.emit(ToolCallStarted("c1", "calculator", {"expression": "6 * 7"}))
    [line] = screen.getvalue().splitlines()
    assert json.loads(line)["event"] == "tool_call"


def card_of(tool: str, args: dict, content: str, status: str = "success", **extra) -> str:
    screen, out, err = terminal(is_terminal=False)
    renderer = renderer_on(out, err, Clock())
    renderer.emit(ToolCallStarted("c1", tool, args))
    renderer.emit(ToolFinished("c1", tool, status, content, 1.5, **extra))
    return screen.getvalue()


def test_a_tool_call_is_shown_once_as_one_card_with_its_arguments():
    card = card_of("get_weather", {"city": "Paris", "unit": "celsius"}, json.dumps({"high": 9}))
    assert "→" not in card
    assert card.count("get_weather") == 1 and card.count("Paris") == 1
    assert "city: Paris · unit: celsius" in card


def test_a_json_result_is_shown_as_fields_without_repeating_the_arguments():
    forecast = {"city": "Paris", "condition": "partly cloudy", "high": 9, "low": 3}
    card = card_of("get_weather", {"city": "Paris"}, json.dumps(forecast))
    lines = [line.strip("│ ") for line in card.splitlines()]
    assert lines[1:3] == ["city: Paris", "condition: partly cloudy · high: 9 · low: 3"]
    assert len(lines) == 4
    assert '{"city"' not in card


def test_a_weather_card_takes_five_lines_at_80_columns_and_never_splits_a_field():
    forecast = {
        "city": "Tokyo",
        "city_zh": "东京",
        "date": "2026-06-15",
        "condition": "partly cloudy",
        "high": 13,
        "low": 3,
        "unit": "celsius",
        "source": "offline dataset",
    }
    args = {"city": "Tokyo", "unit": "celsius", "date": "today"}
    card = card_of("get_weather", args, json.dumps(forecast)).splitlines()
    assert len(card) == 5
    assert max(Text(line).cell_len for line in card) <= 80
    fields = [f.strip() for line in card[2:4] for f in line.strip("│ ").split(" · ")]
    assert fields == [
        "city_zh: 东京",
        "date: 2026-06-15",
        "condition: partly cloudy",
        "high: 13",
        "low: 3",
        "source: offline dataset",
    ]


def test_long_results_end_in_an_ellipsis_and_say_how_many_lines_were_left_out():
    listing = "\n".join(f"file{n}.txt  {'x' * 120}" for n in range(20))
    card = card_of("list_files", {"path": "."}, listing)
    assert max(Text(line).cell_len for line in card.splitlines()) <= 80
    assert "…" in card.splitlines()[2]  # a line wider than the card
    assert "… 12 more lines" in card
    assert "file8.txt" not in card


def test_an_error_card_shows_the_users_wording_whole():
    card = card_of(
        "read_file",
        {"path": "missing.txt"},
        "file 'missing.txt' does not exist; use list_files to see what is there",
        status="error",
        user_message="file 'missing.txt' does not exist in the workspace",
    )
    assert "✗ read_file" in card
    assert "file 'missing.txt' does not exist in the workspace" in card
    assert "use list_files" not in card


def test_run_python_output_is_printed_once_in_the_answer_not_in_the_card():
    result = run_cli(
        "chat", "-t", "py", "--approve", "auto", "-m", "run this python: print(6*7)", columns=80
    )
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode() == "42\n"
    card = result.stderr.decode()
    assert "exit status 0 · stdout: 1 line · stderr empty" in card
    assert not re.search(r"\b42\b", card)
