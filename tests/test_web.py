"""The web page in a real headless browser (Debian chromium via Playwright) against a real server:
send a message, see the streamed answer and a new timeline entry, roll back, see the head move."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.server_process import Hold, running_server

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def browser_or_skip():  # type: ignore[no-untyped-def]
    reason = None
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        reason = "the playwright package is not installed (pip install -e '.[test]')"
    if reason is None and not CHROMIUM.exists():
        reason = f"{CHROMIUM} is missing (apt-get install chromium; .ci/run installs it)"
    if reason is None:
        return sync_playwright
    if os.environ.get("WAYPOINT_REQUIRE_BROWSER") == "1":
        pytest.fail(f"WAYPOINT_REQUIRE_BROWSER=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture
def page(tmp_path: Path):  # type: ignore[no-untyped-def]
    sync_playwright = browser_or_skip()
    args = ("--db", str(tmp_path / "db" / "agent.sqlite"), "--workspace", str(tmp_path / "ws"))
    with running_server(tmp_path, *args) as base, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.set_default_timeout(20_000)
            page.goto(base + "/")
            yield page
        finally:
            browser.close()


def send(page, text: str) -> None:  # type: ignore[no-untyped-def]
    page.fill("#message", text)
    page.click("#send")


def test_chat_streams_an_answer_and_time_travel_moves_the_head(page):  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect

    expect(page.locator("#mermaid")).to_contain_text("agent -.-> tools;")
    expect(page.locator("#graph-svg svg rect")).to_have_count(
        9
    )  # every node reachable from __start__, begin_turn included

    page.fill("#new-thread-id", "web")
    page.click("#new-thread button")
    expect(page.locator("#thread-title")).to_have_text("Thread web")
    expect(page.locator("#threads li[data-thread=web]")).to_be_visible()

    send(page, "what is 6 times 7")
    expect(page.locator(".msg.ai").last).to_contain_text("6 * 7 = 42")
    expect(page.locator(".msg.tool").last).to_contain_text("calculator: 42")
    expect(page.locator("#timeline .segment.head .turn")).to_have_text("turn 1")

    send(page, "what is 2 plus 3")
    expect(page.locator(".msg.ai").last).to_contain_text("2 + 3 = 5")
    expect(page.locator("#timeline .segment.head .turn")).to_have_text("turn 2")
    head_before = page.locator("#timeline").get_attribute("data-head")

    page.click("#undo")
    head = page.locator("#timeline .segment.head")
    expect(head.locator(".note")).to_have_text("rollback")
    expect(head.locator(".turn")).to_have_text("turn 1")
    assert page.locator("#timeline").get_attribute("data-head") != head_before
    expect(page.locator("#timeline .segment.off .turn", has_text="turn 2")).to_be_visible()
    expect(page.locator("#messages .msg.ai").last).to_contain_text("6 * 7 = 42")
    expect(page.locator("#status")).to_contain_text("rolled back to turn 1")


def test_the_page_runs_a_turn_with_the_chosen_strategy(page):  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect

    page.fill("#new-thread-id", "planned")
    page.click("#new-thread button")
    expect(page.locator("#thread-title")).to_have_text("Thread planned")
    page.select_option("#strategy", "plan")
    send(page, "what is 6 times 7 plus 2")
    expect(page.locator(".msg.ai").last).to_contain_text("6 * 7 + 2 = 44")
    expect(page.locator(".msg.strategy").first).to_contain_text("plan: 1. calculator")


def test_stop_ends_a_running_turn_and_the_chat_goes_on(page, tmp_path: Path):  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect

    page.fill("#new-thread-id", "stopped")
    page.click("#new-thread button")
    expect(page.locator("#thread-title")).to_have_text("Thread stopped")
    with Hold(tmp_path):  # the slow step holds until the server has taken the Stop
        send(page, "do the slow step")
        expect(page.locator(".msg.call").last).to_contain_text("slow_step")
        with page.expect_response(lambda r: r.url.endswith("/runs/cancel")) as cancel:
            page.click("#stop")
        assert cancel.value.status == 202
    expect(page.locator(".msg.notice").last).to_contain_text("cancelled")
    expect(page.locator("#stop")).to_be_hidden()
    expect(page.locator("#timeline .segment.head .turn")).to_have_text("turn 1")
    send(page, "what is 2 plus 3")
    expect(page.locator(".msg.ai").last).to_contain_text("2 + 3 = 5")
