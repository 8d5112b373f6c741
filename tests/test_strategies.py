"""The agent strategies (plan, reflexion, routed) end to end: on the offline model and on the scripted
fake, with an in-memory saver; plan correction and re-planning; lessons; the strategy registry."""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver

from app.models.offline import OfflineChatModel
from app.models.offline.structured import remaining_steps
from graphs.plan.state import Plan, PlanStep
from graphs.plan.steps import StepSkippedError, resolve_references
from graphs.reflexion.state import Lesson, Verdict
from graphs.routed.state import Route
from graphs.shared.closing import FINAL_ANSWER_INSTRUCTION
from graphs.state import AgentContext
from graphs.strategies import STRATEGIES, get_strategy, strategy_turn_input
from tests.expected import chinese_comparison
from tests.fakes import ScriptedChatModel, structured
from tools import default_tools
from tools.weather import forecast

pytestmark = pytest.mark.dated  # reruns on other pinned days: tests/test_pinned_dates.py

PROMPT = "You are Waypoint."


class Run:
    """Turns of one thread of one strategy, keeping the streamed custom events and node path."""

    def __init__(self, strategy: str, model: Any, tools: list[BaseTool], **limits: Any) -> None:
        self.strategy = get_strategy(strategy)
        self.graph = self.strategy.build(InMemorySaver())
        self.context = AgentContext(
            model=model, tools=tools, system_prompt=PROMPT, backoff_base=0, **limits
        )
        self.config = {"configurable": {"thread_id": "t"}, "recursion_limit": 100}
        self.turn = 0
        self.events: list[tuple[tuple, str, Any]] = []

    def send(self, text: str) -> dict:
        self.turn += 1
        message = HumanMessage(text, id=f"human-{self.turn}")
        self.events = list(
            self.graph.stream(
                strategy_turn_input(self.strategy, message, self.turn),
                self.config,
                context=self.context,
                stream_mode=["updates", "custom"],
                subgraphs=True,
            )
        )
        return self.graph.get_state(self.config).values

    def path(self) -> list[str]:
        # an empty update changed nothing: not a step of the path
        return [
            n
            for ns, mode, data in self.events
            if mode == "updates" and not ns
            for n, update in data.items()
            if update
        ]

    def custom(self, kind: str) -> list[dict]:
        return [d for _, mode, d in self.events if mode == "custom" and d["type"] == kind]


@pytest.fixture
def tools(tmp_path: Path) -> list[BaseTool]:
    return default_tools(tmp_path / "ws")


def answer(values: dict) -> str:
    return str(values["messages"][-1].content)


def step(tool: str, reason: str = "", **arguments: Any) -> PlanStep:
    return PlanStep(tool=tool, arguments=arguments, reason=reason)


# --- plan ---------------------------------------------------------------------------------------


def test_plan_on_the_offline_model_runs_each_step_and_answers(tools):
    run = Run("plan", OfflineChatModel(), tools)

    values = run.send("weather in Paris and London tomorrow, which is warmer?")

    assert [s["tool"] for s in values["plan"]] == ["get_weather", "get_weather", "calculator"]
    assert values["plan"][2]["arguments"] == {"expression": "{{step 1.high}} - {{step 2.high}}"}
    results = values["step_results"]
    assert [r["status"] for r in results] == ["success"] * 3
    highs = [int(r["result"].split('"high": ')[1].split(",")[0]) for r in results[:2]]
    assert results[2]["arguments"] == {"expression": f"{highs[0]} - {highs[1]}"}
    assert run.path() == ["planner", "executor", "executor", "executor", "synthesizer"]
    assert "warmer" in answer(values) and values["status"] == "answered"
    assert len(run.custom("plan")[0]["steps"]) == 3


def test_plan_on_the_offline_model_in_chinese(tools):
    values = Run("plan", OfflineChatModel(), tools).send("北京和上海明天的天气，哪个更暖")

    assert values["plan"][0]["reason"].startswith("查询")
    beijing, shanghai = (forecast(city, date="tomorrow") for city in ("Beijing", "Shanghai"))
    assert chinese_comparison(beijing, shanghai) in answer(values)


def test_plan_on_the_scripted_model_gives_the_synthesizer_every_result(tools):
    plan = Plan(steps=[step("calculator", "add", expression="2+3"), step("current_time")])
    model = ScriptedChatModel(script=[plan, "5, and the time."])
    run = Run("plan", model, tools)

    values = run.send("2+3 and the time")

    assert answer(values) == "5, and the time."
    synthesis = model.calls[-1]
    assert [m.type for m in synthesis] == ["system", "human", "ai", "tool", "ai", "tool", "system"]
    assert synthesis[3].content == "5"
    assert model.bound[0] == ["Plan"]
    model.assert_done()


def test_an_invalid_plan_goes_back_to_the_model_with_the_error(tools):
    invalid = Plan(steps=[step("teleport", city="Paris"), step("calculator", expr="1+1")])
    valid = Plan(steps=[step("calculator", expression="1+1")])
    model = ScriptedChatModel(script=[invalid, valid, "2"])
    run = Run("plan", model, tools)

    values = run.send("1+1 please")

    assert answer(values) == "2" and values["status"] == "answered"
    correction = model.calls[1][-1]
    assert isinstance(correction, SystemMessage)
    assert "there is no tool named 'teleport'" in correction.content
    assert "invalid arguments for calculator" in correction.content
    assert run.path() == ["planner", "retry", "planner", "executor", "synthesizer"]
    [retry] = run.custom("retry")
    assert retry["kind"] == "tool" and retry["reason"].startswith("invalid plan: step 1")
    assert values["retry_count"] == 0


def test_a_plan_that_stays_invalid_ends_in_the_failure_handler(tools):
    bad = structured({"steps": "not a list"}, name="Plan")
    model = ScriptedChatModel(script=[bad, bad, bad])
    values = Run("plan", model, tools, max_retries=2).send("do it")

    assert values["status"] == "failed"
    assert "invalid plan" in answer(values) and "after 3 attempts" in answer(values)


def test_a_failed_step_is_re_planned_once(tools):
    first = Plan(
        steps=[
            step("read_file", path="missing.txt"),
            step("write_file", path="copy.txt", content="{{step 1}}"),
            step("calculator", expression="2+3"),
        ]
    )
    rest = Plan(steps=[step("list_files", path="."), step("calculator", expression="2+3")])
    model = ScriptedChatModel(script=[first, rest, "No missing.txt; 2+3 is 5."])
    run = Run("plan", model, tools)

    values = run.send("copy missing.txt and add 2+3")

    assert values["replans"] == 1
    assert [(r["step"], r["tool"], r["status"]) for r in values["step_results"]] == [
        (1, "read_file", "error"),
        (2, "list_files", "success"),
        (3, "calculator", "success"),
    ]
    replan = model.calls[1][-1]
    assert "Step 1 (read_file) failed" in replan.content and "numbered from 2" in replan.content
    assert run.path() == ["planner", "executor", "planner", "executor", "executor", "synthesizer"]
    assert [e["replan"] for e in run.custom("plan")] == [False, True]


def test_after_the_re_plan_a_step_needing_a_failed_result_is_skipped(tools):
    first = Plan(steps=[step("read_file", path="a.txt")])
    rest = Plan(
        steps=[step("read_file", path="b.txt"), step("calculator", expression="{{step 2}}")]
    )
    model = ScriptedChatModel(script=[first, rest, "Neither file exists."])
    values = Run("plan", model, tools).send("read a.txt or b.txt")

    assert [r["status"] for r in values["step_results"]] == ["error", "error", "skipped"]
    assert answer(values) == "Neither file exists." and values["status"] == "answered"


def test_the_offline_re_plan_drops_steps_that_need_the_failed_one(tools):
    values = Run("plan", OfflineChatModel(), tools).send(
        "weather in Paris and Atlantis, which is warmer?"
    )
    assert values["replans"] == 1
    assert [r["tool"] for r in values["step_results"]] == ["get_weather", "get_weather"]
    assert "Atlantis" in answer(values) and "couldn't compare" in answer(values)


def test_references_resolve_whole_results_and_json_fields():
    results = [
        {"status": "success", "result": '{"high": 12}'},
        {"status": "error", "result": "boom"},
    ]
    assert resolve_references({"e": "{{step 1.high}} - 2", "n": 3}, results) == {
        "e": "12 - 2",
        "n": 3,
    }
    with pytest.raises(StepSkippedError, match="step 2"):
        resolve_references("{{step 2}}", results)
    steps = [
        {"tool": "a", "arguments": {}},
        {"tool": "b", "arguments": {}},
        {"tool": "c", "arguments": {"x": "{{step 2}}"}},
        {"tool": "d", "arguments": {"x": "{{step 1}}"}},
    ]
    assert remaining_steps(steps, 1, {1}) == steps[1:3]  # d needs the failed step 1
    assert remaining_steps(steps, 1, set())[1:] == [
        {"tool": "c", "arguments": {"x": "{{step 2}}"}},
        {"tool": "d", "arguments": {"x": "{{step 1}}"}},
    ]


# --- reflexion -----------------------------------------------------------------------------------


def test_reflexion_fails_once_and_succeeds_with_the_lesson(tools):
    model = ScriptedChatModel(
        script=[
            "It is sunny.",
            Verdict(success=False, reason="no tool was used for the weather"),
            Lesson(lesson="Call get_weather before answering about weather."),
            AIMessage("", tool_calls=[_call("get_weather", city="Paris")]),
            "Paris: see the forecast.",
            Verdict(success=True, reason="uses the forecast"),
        ]
    )
    run = Run("reflexion", model, tools)

    values = run.send("weather in Paris?")

    assert values["trial"] == 2 and values["verdict"]["success"] is True
    assert values["lessons"] == ["Call get_weather before answering about weather."]
    first_attempt, second_attempt = model.calls[0], model.calls[3]
    # the lesson goes in a section before the user's message; the system prompt (a cacheable
    # prefix) is unchanged
    assert second_attempt[0].content == first_attempt[0].content
    assert "Call get_weather before answering" in second_attempt[1].content
    assert [m.type for m in second_attempt[1:]] == ["system", "human"]  # not the failed attempt
    assert second_attempt[2].content == "weather in Paris?"
    assert run.path() == ["attempt", "evaluate", "reflect", "attempt", "evaluate"]
    assert [e["success"] for e in run.custom("verdict")] == [False, True]
    assert answer(values) == "Paris: see the forecast."
    contents = [m.content for m in values["messages"] if m.type == "ai" and m.content]
    assert contents == ["It is sunny.", "Paris: see the forecast."]
    model.assert_done()


def test_reflexion_stops_after_max_trials(tools):
    model = ScriptedChatModel(
        script=[
            "a",
            Verdict(success=False, reason="wrong"),
            Lesson(lesson="do better"),
            "b",
            Verdict(success=False, reason="still wrong"),
        ]
    )
    values = Run("reflexion", model, tools, max_trials=2).send("x")

    assert values["trial"] == 2 and values["verdict"]["success"] is False
    assert answer(values) == "b" and values["status"] == "answered"
    model.assert_done()


def test_reflexion_on_the_offline_model(tools):
    run = Run("reflexion", OfflineChatModel(), tools, max_trials=2)

    assert answer(run.send("what is 6 times 7")) == "6 * 7 = 42"
    assert run.path() == ["attempt", "evaluate"]

    values = run.send("read missing.txt")
    assert values["trial"] == 2 and values["verdict"]["success"] is False
    assert "read_file failed" in values["lessons"][0]
    assert run.path() == ["attempt", "evaluate", "reflect", "attempt", "evaluate"]
    ids = [m.id for m in values["messages"]]
    assert len(ids) == len(set(ids))


# --- routed --------------------------------------------------------------------------------------


def test_routed_arithmetic_goes_straight_to_the_calculator(tools):
    run = Run("routed", OfflineChatModel(), tools)

    values = run.send("what is 6 times 7")
    assert answer(values) == "6 * 7 = 42" and run.path() == ["classify", "calculator"]

    values = run.send("weather in Tokyo")
    assert run.path() == ["classify", "tool_loop"] and "Tokyo" in answer(values)


def test_routed_small_talk_and_a_calculator_error_on_the_scripted_model(tools):
    model = ScriptedChatModel(
        script=[
            Route(path="small_talk", reason="greeting"),
            "Hello!",
            Route(path="calculator", expression="1/0"),
            "Division by zero is undefined.",
        ]
    )
    run = Run("routed", model, tools)

    assert answer(run.send("hi")) == "Hello!" and run.path() == ["classify", "small_talk"]
    assert model.bound[1:] == []  # small talk binds no tools

    values = run.send("1/0")
    assert run.path() == ["classify", "calculator", "tool_loop"]
    assert answer(values) == "Division by zero is undefined."
    model.assert_done()


# --- registry ------------------------------------------------------------------------------------


def test_each_strategy_resets_its_own_per_turn_fields():
    message = HumanMessage("x", id="h")
    for strategy in STRATEGIES.values():
        value = strategy_turn_input(strategy, message, 3)
        assert value["strategy"] == strategy.name and value["iteration"] == 0
        assert set(strategy.turn_reset) <= set(value)
    assert strategy_turn_input(get_strategy("plan"), message, 1)["step_results"] == []


def test_the_settings_take_every_strategy_by_name_and_refuse_others():
    from app.config import load_settings
    from app.errors import ConfigError

    for name in STRATEGIES:
        assert load_settings(strategy=name).strategy == name
    with pytest.raises(ConfigError, match=r"strategy \(APP_STRATEGY\): Input should be") as refused:
        load_settings(strategy="bogus")
    assert all(f"'{name}'" in str(refused.value) for name in STRATEGIES)


def _call(name: str, **args: Any) -> dict:
    return {"name": name, "args": args, "id": f"c-{name}", "type": "tool_call"}


def test_tool_messages_of_each_attempt_answer_their_calls(tools):
    values = Run("reflexion", OfflineChatModel(), tools, max_trials=2).send("read missing.txt")
    asked = [c["id"] for m in values["messages"] if m.type == "ai" for c in m.tool_calls]
    answered = [m.tool_call_id for m in values["messages"] if isinstance(m, ToolMessage)]
    assert sorted(asked) == sorted(answered)


# --- a spent turn budget ends every strategy in finalize -----------------------------------------


def _clock_moving_by(seconds: float) -> Any:
    """A clock that is `seconds` later at each reading (the turn starts at the real time)."""
    ticks = itertools.count(1)
    return lambda: time.time() + seconds * next(ticks)


def test_reflexion_does_not_start_another_trial_with_the_time_budget_spent(tools):
    model = ScriptedChatModel(
        script=[
            "It is sunny.",
            Verdict(success=False, reason="no tool was used for the weather"),
            "Out of time: I could not check the forecast.",
        ]
    )
    # The attempt's agent reads the clock at +4 s (its model call's deadline) and +8 s (the budget),
    # the evaluation at +12 s: over the 10 s budget.
    run = Run("reflexion", model, tools, max_seconds=10, clock=_clock_moving_by(4))

    values = run.send("weather in Paris?")

    assert run.path() == ["attempt", "evaluate", "finalize"]
    assert values["status"] == "budget_exhausted" and values["trial"] == 1
    assert answer(values) == "Out of time: I could not check the forecast."
    assert model.calls[-1][-1].content == FINAL_ANSWER_INSTRUCTION
    model.assert_done()


def test_routed_does_not_start_the_tool_loop_with_the_time_budget_spent(tools):
    model = ScriptedChatModel(script=[Route(path="tools"), "Out of time."])
    run = Run("routed", model, tools, max_seconds=10, clock=_clock_moving_by(12))

    values = run.send("weather in Paris?")

    assert run.path() == ["classify", "finalize"]
    assert values["status"] == "budget_exhausted" and answer(values) == "Out of time."
    model.assert_done()


def test_the_offline_plan_leaves_out_a_tool_it_was_not_offered_and_still_answers(tools):
    offered = [t for t in tools if t.name == "calculator"]
    run = Run("plan", OfflineChatModel(), offered)

    values = run.send("weather in Paris and 2 plus 3")

    assert [s["tool"] for s in values["plan"]] == ["calculator"]
    assert run.path() == ["planner", "executor", "synthesizer"]
    assert values["status"] == "answered"
    assert answer(values) == "(not done: get_weather)\n2 + 3 = 5"
