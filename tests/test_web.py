"""The web page in a real headless browser (Debian chromium via Playwright) against a real server:
send a message, see the streamed answer and a new timeline entry, roll back, see the head move; the
layout at 1280×720 and 420 px wide, Markdown, tool cards, the timeline menu and the graph. Each test
saves screenshots under its pytest temp dir (`screenshots/`)."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from tests.server_process import Hold, post_run, running_server

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


class Site:
    """A running server and a Chromium; `open` gives a page of the given window size and records
    every request it makes to anywhere but the server (the page must make none)."""

    def __init__(self, base: str, browser, screens: Path) -> None:  # type: ignore[no-untyped-def]
        self.base = base
        self.browser = browser
        self.screens = screens
        self.elsewhere: list[str] = []

    def open(self, path: str = "/", width: int = 1280, height: int = 720):  # type: ignore[no-untyped-def]
        page = self.browser.new_page(viewport={"width": width, "height": height})
        page.set_default_timeout(20_000)
        page.on("request", self._record)
        page.goto(self.base + path)
        return page

    def _record(self, request) -> None:  # type: ignore[no-untyped-def]
        if not request.url.startswith(self.base + "/"):
            self.elsewhere.append(request.url)

    def screenshot(self, page, name: str) -> None:  # type: ignore[no-untyped-def]
        """Saved under the test's temp dir (pytest's basetemp) for a person to look at."""
        page.screenshot(path=self.screens / f"{name}.png")


@pytest.fixture
def site(tmp_path: Path):  # type: ignore[no-untyped-def]
    sync_playwright = browser_or_skip()
    from playwright.sync_api import expect

    # What a page waits for (an answer) may take a while on a busy machine: waiting is not timing.
    expect.set_options(timeout=20_000)
    args = ("--db", str(tmp_path / "db" / "agent.sqlite"), "--workspace", str(tmp_path / "ws"))
    with running_server(tmp_path, *args) as base, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            site = Site(base, browser, tmp_path / "screenshots")
            yield site
        finally:
            browser.close()
    assert not site.elsewhere, f"the page fetched from outside its server: {site.elsewhere}"


@pytest.fixture
def page(site: Site):  # type: ignore[no-untyped-def]
    return site.open()


def send(page, text: str) -> None:  # type: ignore[no-untyped-def]
    page.fill("#message", text)
    page.click("#send")


def new_thread(page, thread: str) -> None:  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect

    page.fill("#new-thread-id", thread)
    page.click("#new-thread button")
    expect(page.locator("#thread-title")).to_have_text(f"Thread {thread}")


def seed_turns(base: str, thread: str, count: int) -> None:
    """`count` real turns on a new thread, through the HTTP API."""
    httpx.post(f"{base}/threads", json={"thread_id": thread}).raise_for_status()
    for n in range(count):
        post_run(base, thread, f"what is {n} times 7").raise_for_status()


def document_scrolls(page) -> bool:  # type: ignore[no-untyped-def]
    return page.evaluate(
        "document.scrollingElement.scrollHeight > innerHeight"
        " || document.scrollingElement.scrollWidth > innerWidth"
    )


def test_chat_streams_an_answer_and_time_travel_moves_the_head(page):  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect

    expect(page.locator("#mermaid")).to_contain_text("agent -.-> tools;")
    # every node reachable from __start__
    expect(page.locator("#graph-svg svg rect")).to_have_count(8)

    page.fill("#new-thread-id", "web")
    page.click("#new-thread button")
    expect(page.locator("#thread-title")).to_have_text("Thread web")
    expect(page.locator("#threads li[data-thread=web]")).to_be_visible()

    send(page, "what is 6 times 7")
    expect(page.locator(".msg.ai").last).to_contain_text("6 * 7 = 42")
    expect(page.locator(".tool-card").last.locator("summary")).to_contain_text("calculator")
    expect(page.locator(".tool-card").last.locator("summary")).to_contain_text("42")
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
        expect(page.locator(".tool-card").last).to_contain_text("slow_step")
        with page.expect_response(
            lambda r: "/runs/" in r.url and r.url.endswith("/cancel")
        ) as cancel:
            page.click("#stop")
        assert cancel.value.status == 202
    expect(page.locator(".msg.notice").last).to_contain_text("cancelled")
    expect(page.locator("#stop")).to_be_hidden()
    expect(page.locator("#timeline .segment.head .turn")).to_have_text("turn 1")
    send(page, "what is 2 plus 3")
    expect(page.locator(".msg.ai").last).to_contain_text("2 + 3 = 5")


def test_a_long_thread_keeps_the_composer_and_the_newest_message_in_view(site, tmp_path: Path):  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect

    seed_turns(site.base, "long", 20)
    page = site.open("/#long")
    newest = page.locator("#messages .msg.ai").last
    expect(newest).to_contain_text("19 * 7 = 133")
    expect(page.locator("#composer")).to_be_in_viewport(ratio=1)
    expect(newest).to_be_in_viewport(ratio=1)
    assert not document_scrolls(page), "only the message pane may scroll"
    expect(page.locator("#toggle-threads")).to_be_hidden()  # wide enough for every panel
    expect(page.locator("#sidebar")).to_be_in_viewport()
    site.screenshot(page, "long-thread")

    with Hold(tmp_path):  # the run holds in its tool step: the page is mid-stream
        send(page, "do the slow step")
        card = page.locator(".tool-card").last
        expect(card).to_contain_text("slow_step")
        expect(card).to_be_in_viewport(ratio=1)
        expect(page.locator("#composer")).to_be_in_viewport(ratio=1)
        site.screenshot(page, "long-thread-streaming")
    expect(newest).to_contain_text("all done")
    expect(newest).to_be_in_viewport(ratio=1)
    expect(page.locator("#composer")).to_be_in_viewport(ratio=1)
    assert not document_scrolls(page)
    site.screenshot(page, "long-thread-answered")


def test_reading_older_messages_is_not_interrupted_by_a_streaming_answer(site, tmp_path: Path):  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect

    seed_turns(site.base, "reader", 20)
    page = site.open("/#reader")
    expect(page.locator("#messages .msg.ai").last).to_contain_text("19 * 7 = 133")
    first = page.locator("#messages .msg.human").first
    with Hold(tmp_path):
        send(page, "do the slow step")
        expect(page.locator(".tool-card").last).to_be_in_viewport(ratio=1)
        page.locator("#messages").evaluate("(pane) => pane.scrollTo(0, 0)")
        expect(page.locator("#jump")).to_be_visible()  # the page has seen the reader scroll up
        expect(first).to_be_in_viewport()
    expect(page.locator("#messages .msg.ai").last).to_contain_text("all done")
    expect(first).to_be_in_viewport()  # the answer did not pull the pane down
    site.screenshot(page, "reader-scrolled-up")
    page.click("#jump")
    expect(page.locator("#messages .msg.ai").last).to_be_in_viewport(ratio=1)
    expect(page.locator("#jump")).to_be_hidden()


def expect_markdown_rendered(page) -> None:  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect

    answer = page.locator("#messages .msg.ai").last
    expect(answer.locator("ul > li")).to_have_count(2)
    expect(answer.locator("ul > li").first).to_have_text("first step")
    expect(answer.locator("pre code")).to_contain_text('print("hi")')
    expect(answer.locator("strong")).to_have_text("the plan")
    # raw HTML and a javascript: link are shown as text, never as elements
    expect(answer).to_contain_text('<script>window.pwned = "script"</script>')
    expect(answer).to_contain_text("<img src=")
    expect(answer.locator("a", has_text="a tracking pixel")).to_have_count(1)  # a link, not fetched
    unsafe = "#messages script, #messages img, #messages [onerror], #messages a[href^=javascript]"
    expect(page.locator(unsafe)).to_have_count(0)
    assert page.evaluate("window.pwned") is None
    font = answer.evaluate("(node) => getComputedStyle(node).fontFamily")
    assert "Noto Sans CJK SC" in font and "PingFang SC" in font, font


def test_answers_are_rendered_as_markdown_and_their_html_is_not(site):  # type: ignore[no-untyped-def]
    page = site.open()
    new_thread(page, "md")
    send(page, "show the markdown sample")
    expect_markdown_rendered(page)  # as streamed
    site.screenshot(page, "markdown")
    page.reload()
    expect_markdown_rendered(page)  # as loaded from the thread


def test_a_narrow_window_folds_threads_and_timeline_behind_toggles(site):  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect

    seed_turns(site.base, "narrow", 3)
    page = site.open("/#narrow", width=420, height=800)
    expect(page.locator("#messages .msg.ai").last).to_contain_text("2 * 7 = 14")
    expect(page.locator("#sidebar")).to_be_hidden()
    expect(page.locator("#side")).to_be_hidden()
    expect(page.locator("#composer")).to_be_in_viewport(ratio=1)
    assert page.locator("#messages").bounding_box()["width"] >= 380
    assert not document_scrolls(page)
    site.screenshot(page, "narrow")

    page.click("#toggle-threads")
    expect(page.locator("#sidebar")).to_be_in_viewport()
    site.screenshot(page, "narrow-threads")
    page.click("#threads li[data-thread=narrow]")
    expect(page.locator("#sidebar")).to_be_hidden()

    page.click("#toggle-timeline")
    expect(page.locator("#timeline .segment.head .turn")).to_be_in_viewport()
    site.screenshot(page, "narrow-timeline")
    page.keyboard.press("Escape")
    expect(page.locator("#side")).to_be_hidden()
    expect(page.locator("#composer")).to_be_in_viewport(ratio=1)


def expect_weather_card(page) -> None:  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect

    card = page.locator("#messages details.tool-card").last
    expect(card.locator("summary")).to_contain_text("get_weather")
    expect(card.locator("summary")).to_contain_text("city: Paris")
    expect(card.locator(".tool-args")).to_be_hidden()  # collapsed until opened
    card.locator("summary").click()
    expect(card.locator(".tool-args dt", has_text="unit")).to_be_visible()
    expect(card.locator(".tool-args dd", has_text="celsius")).to_be_visible()
    # the JSON result as key and value, in the same card as its call
    expect(card.locator(".tool-result dt", has_text="condition")).to_be_visible()
    expect(card.locator(".tool-result dd", has_text="offline dataset")).to_be_visible()
    expect(page.locator("#messages .tool-card")).to_have_count(1)


def test_tool_calls_are_collapsible_cards_with_formatted_arguments_and_results(site):  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect

    page = site.open()
    new_thread(page, "cards")
    send(page, "weather in Paris")
    expect(page.locator("#messages .msg.ai").last).to_contain_text("Paris on")
    expect_weather_card(page)
    site.screenshot(page, "tool-card")
    page.reload()
    expect_weather_card(page)


def test_each_timeline_entry_has_one_action_menu(page, site):  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect

    new_thread(page, "menu")
    send(page, "what is 6 times 7")
    expect(page.locator("#timeline .segment.head .turn")).to_have_text("turn 1")
    send(page, "what is 2 plus 3")
    expect(page.locator("#timeline .segment.head .turn")).to_have_text("turn 2")

    entries = page.locator("#timeline .segment")
    expect(page.locator("#timeline button:visible")).to_have_count(entries.count())
    turn_one = page.locator("#timeline .segment", has=page.locator(".turn", has_text="turn 1"))
    turn_one.locator(".entry-menu-button").click()
    menu = turn_one.locator("[role=menu]")
    expect(menu.locator("[role=menuitem]")).to_have_text(["Roll back here", "Fork…", "Replay turn"])
    site.screenshot(page, "timeline-menu")
    page.keyboard.press("Escape")
    expect(menu).to_be_hidden()

    turn_one.locator(".entry-menu-button").click()
    menu.locator("[role=menuitem]", has_text="Roll back here").click()
    expect(page.locator("#timeline .segment.head .turn")).to_have_text("turn 1")
    expect(page.locator("#status")).to_contain_text("rolled back to turn 1")


def test_the_graph_is_drawn_large_enough_to_read_and_enlarges_on_click(page, site):  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect

    label = page.locator("#graph-svg text", has_text="failure_handler")
    small = label.bounding_box()["height"]
    assert small >= 12, f"graph labels are {small:.1f} px high"
    page.click("#graph-svg svg")
    dialog = page.locator("#graph-dialog")
    expect(dialog).to_be_visible()
    large = dialog.locator("text", has_text="failure_handler").bounding_box()["height"]
    assert large >= 1.4 * small
    expect(dialog.locator("rect")).to_have_count(8)  # the nodes
    site.screenshot(page, "graph-enlarged")
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()


@pytest.mark.parametrize("size", [(1280, 720), (420, 800)], ids=["wide", "narrow"])
def test_a_risky_call_waits_for_an_approval_card_that_survives_a_reload(site, size):  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect

    page = site.open("/", *size)
    if size[0] < 720:
        page.click("#toggle-threads")
    new_thread(page, "approve")
    send(page, "run this python: print(6*7)")
    card = page.locator(".approval-card")
    expect(card).to_have_count(1)
    expect(card.locator(".tool-name")).to_have_text("run_python")
    code = card.locator("textarea.code")
    expect(code).to_have_value("print(6*7)")  # code as code, not a JSON string
    expect(card.locator(".line-numbers")).to_have_text("1")
    expect(page.locator("#send")).to_be_disabled()
    site.screenshot(page, f"approval-{size[0]}")

    page.reload()  # the question is stored with the thread, not kept by the page
    card = page.locator(".approval-card")
    expect(card).to_have_count(1)
    card.get_by_role("button", name="Approve").click()
    expect(page.locator(".msg.ai").last).to_contain_text("42")
    expect(page.locator(".approval-card")).to_have_count(0)
    expect(page.locator("#send")).to_be_enabled()
    expect(page.locator("#status")).to_contain_text("answered: approved")
    assert not document_scrolls(page)


def test_an_approval_can_be_edited_as_fields_or_rejected(page, site):  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect

    new_thread(page, "edits")
    send(page, "run this python: print(6*7)")
    card = page.locator(".approval-card")
    card.get_by_role("button", name="Edit").click()
    card.locator("textarea.code").fill("print(7*7)")
    site.screenshot(page, "approval-editing")
    card.get_by_role("button", name="Approve").click()
    expect(page.locator(".msg.ai").last).to_contain_text("49")
    expect(page.locator("#status")).to_contain_text("answered: approved as edited")

    send(page, "run this python: print(1+1)")
    page.locator(".approval-card").get_by_role("button", name="Reject").click()
    expect(page.locator("#status")).to_contain_text("answered: rejected")
    expect(page.locator(".approval-card")).to_have_count(0)
    expect(page.locator(".tool-card", has_text="running…")).to_have_count(0)
    page.reload()
    refused = page.locator(".tool-card", has_text="run_python").last
    expect(refused.locator(".tool-outcome")).to_contain_text("not approved")


def test_stop_and_a_refused_replay_leave_no_card_running(page, site, tmp_path: Path):  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect

    new_thread(page, "stale")
    with Hold(tmp_path):
        send(page, "do the slow step")
        expect(page.locator(".tool-card").last).to_contain_text("slow_step")
        page.click("#stop")
    expect(page.locator("#stop")).to_be_hidden()
    expect(page.locator(".tool-card", has_text="running…")).to_have_count(0)
    expect(page.locator(".tool-card").last.locator(".tool-outcome")).not_to_have_text("running…")


def test_the_timeline_follows_the_open_thread_and_undo_needs_a_turn_to_undo(page, site):  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect

    new_thread(page, "first")
    send(page, "what is 6 times 7")
    expect(page.locator("#timeline .segment.head .turn")).to_have_text("turn 1")
    expect(page.locator("#undo")).to_be_disabled()  # one turn: nothing before it
    send(page, "what is 2 plus 3")
    expect(page.locator("#undo")).to_be_enabled()

    new_thread(page, "second")
    expect(page.locator("#timeline")).to_have_text("no turns yet")
    expect(page.locator("#undo")).to_be_disabled()


def test_the_graph_panel_shows_the_threads_strategy(page, site):  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect

    new_thread(page, "planned")
    page.select_option("#strategy", "plan")
    send(page, "what is 6 times 7 plus 2")
    expect(page.locator(".msg.ai").last).to_contain_text("44")
    expect(page.locator("#graph-title")).to_have_text("Graph: plan")
    expect(page.locator("#mermaid")).to_contain_text("planner")
    new_thread(page, "looped")
    send(page, "what is 1 plus 1")
    expect(page.locator("#graph-title")).to_have_text("Graph: react")


def test_replays_say_what_they_did_and_repeated_branches_fold(page, site):  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect

    new_thread(page, "again")
    send(page, "what is 6 times 7")
    send(page, "what is 2 plus 3")
    expect(page.locator("#timeline .segment.head .turn")).to_have_text("turn 2")
    page.on("dialog", lambda dialog: dialog.accept())
    for _ in range(2):
        turn_two = page.locator("#timeline .segment.head > .entry")
        turn_two.locator(".entry-menu-button").click()
        turn_two.locator("[role=menuitem]", has_text="Replay turn").click()
        expect(page.locator("#status")).to_contain_text("replayed turn 2 on a new branch")
    labels = page.locator("#timeline .fork-label")
    expect(labels).to_have_count(1)
    expect(labels).to_have_text("branch ×2 (the same input; the newest shown)")
    expect(page.locator("#timeline .segment.head > .entry .note")).to_have_text("replay ×2")
    site.screenshot(page, "folded-branches")


def test_a_long_threads_timeline_opens_at_its_head(site):  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect

    seed_turns(site.base, "tall", 30)
    page = site.open("/#tall")
    head = page.locator("#timeline .segment.head > .entry")
    expect(head).to_contain_text("turn 30")
    expect(head).to_be_in_viewport()
