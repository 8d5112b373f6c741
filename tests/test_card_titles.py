"""A tool card's title reads as the model meant it (issue 34): llama-cpp-python's chat formats
HTML-escape the prompt, so a small model writes `It&#39;s` into its arguments, and some write a line
break as the two characters `\\n`. The terminal's card and the web page's card show "It's" and ⏎;
the tool still receives the text as written."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.text import title_shown
from tests.conftest import run_cli
from tests.openai_server import OpenAIServer, text, tool_call, tool_calls
from tests.openai_server import openai_server as openai_server  # the fixture

WRITTEN = "It&#39;s done\\nNext  line"  # as SmolLM2 wrote it: an entity and a written-out break
TITLE = "It's done ⏎ Next line"


@pytest.mark.parametrize(
    ("argument", "title"),
    [
        (WRITTEN, TITLE),
        ("Tom &amp; Jerry &lt;3", "Tom & Jerry <3"),
        ("one\ntwo\\nthree", "one ⏎ two\\nthree"),  # real breaks: a written one is content
        ("\tpadded\t\tvalue ", "padded value"),
        ("&#27;[2J\x1b[31mred", "[2J\\x1b[31mred"),  # no escape sequence gets through
    ],
)
def test_a_title_decodes_entities_and_shows_each_break_once(argument: str, title: str) -> None:
    assert title_shown(argument) == title


def test_the_terminal_card_shows_the_argument_as_the_model_meant_it(
    openai_server: OpenAIServer, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    call = tool_call("write_file", {"path": "done.txt", "content": WRITTEN})
    openai_server.add(tool_calls(call), text("Written."))

    result = run_cli("chat", "-t", "cards", "--model", "openai:m", "-m", "write it down")

    cards = result.stderr.decode()
    assert result.returncode == 0, cards
    assert f"content: {TITLE}" in cards, cards
    assert "&#39;" not in cards and "\\n" not in cards
    # display only: the tool wrote what the model sent
    assert (isolated / "workspace" / "done.txt").read_text() == WRITTEN
    openai_server.assert_done()


def test_the_web_card_title_shows_the_argument_as_the_model_meant_it(
    openai_server: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from playwright.sync_api import expect

    from tests.server_process import plain_server
    from tests.test_web import CHROMIUM, CHROMIUM_ARGS, browser_or_skip, new_thread, send

    sync_playwright = browser_or_skip()
    openai_server.add(
        tool_calls(tool_call("get_weather", {"city": "L&#39;Aquila\\nItaly"})), text("Mild.")
    )
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    monkeypatch.setenv("APP_MODEL", "openai:m")
    with plain_server(tmp_path) as (_, base), sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.set_default_timeout(20_000)
            page.goto(base + "/")
            new_thread(page, "titles")
            send(page, "weather in L'Aquila")

            card = page.locator("#messages .tool-card").first
            # waiting on a loaded machine is not timing
            brief = card.locator(".tool-brief")
            expect(brief).to_have_text("city: L'Aquila ⏎ Italy", timeout=30_000)
            # the detail: the value as the tool received it
            expect(card.locator(".tool-args dd")).to_have_text("L&#39;Aquila\\nItaly")
        finally:
            browser.close()
    openai_server.assert_done()
