"""--help reads well at 80 columns for every command: choices listed, no type noise, and a short
block of examples, each a command that can be pasted as it is (`waypoint …`)."""

from __future__ import annotations

import re

import pytest
from typer.main import get_command

from app.cli.main import app
from graphs.catalog import STRATEGY_NAMES
from tests.conftest import run_cli


def every_command() -> list[list[str]]:
    """The words of every command and group, e.g. ["threads", "list"]."""
    found: list[list[str]] = [[]]

    def walk(group, words: list[str]) -> None:  # type: ignore[no-untyped-def]
        for name, command in getattr(group, "commands", {}).items():
            found.append([*words, name])
            walk(command, [*words, name])

    walk(get_command(app), [])
    return found


@pytest.mark.parametrize("words", every_command(), ids=lambda w: " ".join(w) or "waypoint")
def test_help_fits_80_columns_without_type_noise_and_with_examples(words: list[str]):
    result = run_cli(*words, "--help", columns=80)

    assert result.returncode == 0, result.stderr.decode()
    text = result.stdout.decode()
    assert max(len(line) for line in text.splitlines()) <= 80, text
    options = [line for line in text.splitlines() if line.lstrip().startswith("-")]
    assert not [line for line in options if re.search(r"<(bool|str|path|int|float)", line)]
    if "Commands:" in text and words:
        return  # a group: its commands have the examples
    examples = text.split("Examples:\n")[1].splitlines()
    pasteable = re.compile(r"\s+(\S+=\S+ |.* \| )?waypoint \S")  # maybe after VAR=… or a pipe
    assert examples and all(pasteable.match(line) for line in examples), examples


def test_chat_help_shows_the_choices_of_enumerated_options():
    text = run_cli("chat", "--help", columns=80).stdout.decode()
    assert "--approve <ask|auto|never>" in text
    assert "--tool-protocol <native|react>" in text
    assert f"--strategy <{'|'.join(STRATEGY_NAMES)}>" in text
    assert "--model offline|openai:NAME" in text and "openai:gpt-4o-mini" in text


def test_a_choice_outside_the_list_is_refused_with_the_list():
    result = run_cli("chat", "--approve", "sometimes", "-m", "hi")
    assert result.returncode == 2
    assert "'sometimes' is not one of 'ask', 'auto', 'never'" in result.stderr.decode()


def test_every_command_is_summed_up_whole_in_the_list():
    text = run_cli("--help", columns=80).stdout.decode()
    commands = text.split("Commands:\n")[1].split("\n\n")[0]
    assert "..." not in commands
