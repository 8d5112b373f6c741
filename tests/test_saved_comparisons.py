"""A saved comparison names the winner in every strategy, as the answer does: the plan strategy
asks for the rest of its plan once the forecasts are in (no `{{step N}}` reference can choose a
city), and continues at most once a turn."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver

from graphs.plan.routing import route_after_executor, route_after_retry
from graphs.plan.state import Plan, PlanStep
from graphs.plan.steps import CONTINUE_INSTRUCTION
from graphs.state import AgentContext
from graphs.strategies import STRATEGIES, get_strategy, strategy_turn_input
from tests.conftest import run_cli
from tests.expected import assert_names_the_warmer_city
from tests.fakes import ScriptedChatModel
from tests.offline_turns import TurnResult, Turns
from tools import default_tools
from tools.weather import forecast

REQUESTS = {
    "two, en": "weather in Paris and Rome, which is warmer? save it to trip.txt",
    "three, en": "weather in Paris, Rome and Tokyo, which is warmest? save it to trip.txt",
    "three coldest, en": "weather in Paris, Rome and London, which is coldest? save it to trip.txt",
    "two, zh": "巴黎和罗马的天气，哪个更暖？保存到 trip.txt",
    "three, zh": "巴黎、罗马和东京的天气，哪个最暖？保存到 trip.txt",
}
WROTE = ("Wrote ", "已写入文件")


def leaders(turn: TurnResult, coldest: bool) -> list[str]:
    """The cities with the highest (or lowest) high among the turn's forecasts, as the answer
    names them (English or Chinese)."""
    forecasts = [json.loads(str(m.content)) for m in turn.results("get_weather")]
    best = (min if coldest else max)(f["high"] for f in forecasts)
    return [f for f in forecasts if f["high"] == best]


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
@pytest.mark.parametrize("request_id", sorted(REQUESTS))
def test_the_saved_file_names_the_winner_as_the_answer_does(
    tmp_path: Path, strategy: str, request_id: str
) -> None:
    text = REQUESTS[request_id]
    turn = Turns(tmp_path, strategy).ask(text)

    saved = (tmp_path / "trip.txt").read_text(encoding="utf-8")
    answered = [line for line in turn.answer.splitlines() if not line.startswith(WROTE)]
    assert saved.splitlines() == answered
    zh = request_id.endswith("zh")
    comparison = saved.splitlines()[-1]
    for city in leaders(turn, coldest="coldest" in request_id):
        assert city["city_zh" if zh else "city"] in comparison
    assert any(word in comparison for word in ("warmer", "warmest", "coldest", "暖", "冷"))
    assert "minus" not in saved and "减" not in saved  # the old "Difference in highs (A minus B)"


def test_a_plan_asks_for_its_rest_once_the_forecasts_are_in(tmp_path: Path) -> None:
    turn = Turns(tmp_path, "plan").ask(REQUESTS["two, en"])

    names = [m.name for m in turn.messages if m.type == "tool"]
    assert names == ["get_weather", "get_weather", "calculator", "write_file"]


def _state(plan: int, results: list[str], continues: bool) -> dict:
    steps = [{"tool": "calculator", "arguments": {}, "reason": ""}] * plan
    done = [{"step": n, "status": s, "result": ""} for n, s in enumerate(results, 1)]
    return {"plan": steps, "step_results": done, "replans": 0, "plan_continues": continues}


@pytest.mark.parametrize(
    ("state", "after_executor"),
    [
        (_state(3, ["success"] * 3, continues=True), "planner"),
        (_state(3, ["success"] * 3, continues=False), "synthesizer"),
        (_state(3, ["success"] * 2, continues=True), "executor"),  # steps left run first
        (_state(3, ["success", "success", "skipped"], continues=True), "synthesizer"),
    ],
)
def test_the_planner_is_asked_again_only_when_every_step_ran_and_the_plan_continues(
    state: dict, after_executor: str
) -> None:
    assert route_after_executor(state) == after_executor
    assert (route_after_retry(state) == "planner") == (after_executor == "planner")


def test_a_continued_plan_cannot_continue_again(tmp_path: Path) -> None:
    first = Plan(
        steps=[PlanStep(tool="calculator", arguments={"expression": "2+3"})], continues=True
    )
    rest = Plan(
        steps=[PlanStep(tool="calculator", arguments={"expression": "{{step 1}} * 2"})],
        continues=True,  # ignored: the rest of a plan is the rest
    )
    model = ScriptedChatModel(script=[first, rest, "10"])
    strategy = get_strategy("plan")
    graph = strategy.build(InMemorySaver())
    context = AgentContext(
        model=model,
        tools=default_tools(tmp_path),
        system_prompt="You are Waypoint.",
        backoff_base=0,
    )
    config = {"configurable": {"thread_id": "t"}}

    values = graph.invoke(
        strategy_turn_input(strategy, HumanMessage("2+3, then double it", id="h1"), 1),
        config,
        context=context,
    )

    assert [r["result"] for r in values["step_results"]] == ["5", "10"]
    assert values["plan_continues"] is False and values["messages"][-1].content == "10"
    asked_again = model.calls[1]
    assert isinstance(asked_again[-1], SystemMessage)
    assert asked_again[-1].content == CONTINUE_INSTRUCTION.format(done=1, next_number=2)
    model.assert_done()


CHAIN = "look up Paris and Tokyo, compute the difference, and save it to diff.txt"


# Not `dated`: tests/test_offline_requests.py's chain tests rerun on other days (ties included).
@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
@pytest.mark.parametrize("after_recall", [False, True], ids=["fresh thread", "after a recall"])
def test_the_readme_chain_saves_the_difference_naming_the_warmer_city(
    isolated: Path, strategy: str, after_recall: bool
) -> None:
    if after_recall:
        assert run_cli("chat", "-t", "one", "-m", "remember that my name is Ada").returncode == 0
        recall = (
            "chat",
            "-t",
            "two",
            "--strategy",
            strategy,
            "-m",
            "what do you remember about my name?",
        )
        assert "Ada" in run_cli(*recall).stdout.decode()

    result = run_cli("chat", "-t", "two", "--strategy", strategy, "-m", CHAIN)

    assert result.returncode == 0, result.stderr.decode()
    saved = (isolated / "workspace" / "diff.txt").read_text(encoding="utf-8")
    assert "memory" not in saved and "Ada" not in saved and "web_search" not in saved
    paris, tokyo = forecast("Paris"), forecast("Tokyo")
    for city in (paris, tokyo):
        assert f"{city['city']} on {city['date']}: {city['condition']}" in saved
    assert_names_the_warmer_city(saved, paris, tokyo, chinese=False)


def test_the_terminal_shows_the_rest_of_the_plan_when_it_comes(isolated: Path) -> None:
    result = run_cli("chat", "-t", "trip", "--strategy", "plan", "-m", REQUESTS["two, en"])

    shown = result.stderr.decode()
    assert result.returncode == 0, shown
    first, rest = shown.split("the rest of the plan, from the results:")
    assert "3. calculator" in first and "write_file" not in first
    assert "4. write_file path: trip.txt" in rest
