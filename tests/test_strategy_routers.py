"""Every router of every strategy, and the shared recovery rule, on plain dicts: each case names the
state and the node it must go to, and every name in a router's Literal is reached by some case."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from types import SimpleNamespace

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool

from graphs.plan.routing import (
    route_after_executor,
    route_after_planner,
    route_after_retry,
    route_after_synthesizer,
    route_at_plan_start,
)
from graphs.react.routing import route_after_agent, route_after_tools, route_at_start
from graphs.reflexion.routing import route_after_attempt, route_after_evaluate
from graphs.routed.routing import route_after_answer, route_after_classify
from graphs.shared.messages import call_signature
from graphs.shared.recovery import recover, retry_or_fail
from graphs.state import AgentContext, LastError
from tests.fakes import ScriptedChatModel, ai_calls, call


@tool
def calculator(expression: str) -> str:
    """Evaluate arithmetic."""
    return "0"


MAX_RETRIES = 2
RUNTIME = SimpleNamespace(
    context=AgentContext(
        model=ScriptedChatModel(),
        tools=[calculator],
        max_retries=MAX_RETRIES,
        max_iterations=4,
        max_trials=2,
        context_tokens=60,
        max_retry_after=30.0,
    )
)
ONE_TURN = [HumanMessage("hi", id="h1")]
TWO_TURNS = [
    HumanMessage("hi", id="h0"),
    AIMessage("hello", id="a0"),
    HumanMessage("more", id="h1"),
]
OVER_BUDGET = [HumanMessage("x" * 400, id="h0"), AIMessage("ok", id="a0"), *ONE_TURN]
CALL = call("calculator", {"expression": "1+1"})
PLAN = [{"tool": "calculator", "arguments": {"expression": "1+1"}, "reason": ""}] * 2


def error(kind: str, retry_after: float | None = None) -> LastError:
    return LastError(kind=kind, message="boom", retry_after=retry_after)  # type: ignore[typeddict-item]


def state(*messages, **fields) -> dict:
    return {"messages": list(messages) or ONE_TURN, **fields}


def ok(number: int) -> dict:
    return {"step": number, "tool": "calculator", "status": "success", "result": "2"}


def failed(number: int) -> dict:
    return {"step": number, "tool": "calculator", "status": "error", "result": "boom"}


CASES: dict[Callable, list[tuple[str, dict, str]]] = {
    # --- react ---
    route_at_start: [
        ("input over the context budget", state(*OVER_BUDGET), "summarize"),
        ("input within the budget", state(), "agent"),
    ],
    route_after_agent: [
        ("tool calls", state(*ONE_TURN, ai_calls(CALL)), "tools"),
        ("transient model error", state(last_error=error("model_transient")), "retry"),
        (
            "overflow, older turns",
            state(*TWO_TURNS, last_error=error("context_overflow")),
            "summarize",
        ),
        ("fatal model error", state(last_error=error("model_fatal")), "failure_handler"),
        (
            "transient model error, the turn's budget spent",
            state(last_error=error("model_transient"), budget_exhausted="time"),
            "finalize",
        ),
        (
            "transient model error, budget and retries spent",
            state(
                last_error=error("model_transient"),
                budget_exhausted="time",
                retry_count=MAX_RETRIES,
            ),
            "finalize",
        ),
        (
            "overflow, the turn's budget spent",
            state(*TWO_TURNS, last_error=error("context_overflow"), budget_exhausted="time"),
            "summarize",
        ),
        (
            "fatal model error, the turn's budget spent",
            state(last_error=error("model_fatal"), budget_exhausted="time"),
            "failure_handler",
        ),
        (
            "third identical call",
            state(
                *ONE_TURN,
                ai_calls(CALL),
                call_signatures=[call_signature("calculator", CALL["args"])] * 2,
            ),
            "finalize",
        ),
        ("plain answer", state(*ONE_TURN, AIMessage("2")), "__end__"),
    ],
    route_after_tools: [
        ("all ok", state(iteration=1), "agent"),
        ("tool error", state(iteration=1, last_error=error("tool")), "retry"),
        (
            "tool error, retries used up",
            state(iteration=1, last_error=error("tool"), retry_count=MAX_RETRIES),
            "failure_handler",
        ),
        ("step budget spent", state(iteration=4, last_error=error("tool")), "finalize"),
    ],
    # --- plan ---
    route_at_plan_start: [
        ("input over the context budget", state(*OVER_BUDGET), "summarize"),
        ("input within the budget", state(), "planner"),
    ],
    route_after_planner: [
        ("a plan with steps", state(plan=PLAN, step_results=[]), "executor"),
        ("a plan without steps", state(plan=[], step_results=[]), "synthesizer"),
        ("an invalid plan", state(last_error=error("tool")), "retry"),
        (
            "overflow, older turns",
            state(*TWO_TURNS, last_error=error("context_overflow")),
            "summarize",
        ),
        ("fatal model error", state(last_error=error("model_fatal")), "failure_handler"),
        (
            "a stalled endpoint, the turn's budget spent",
            state(last_error=error("model_transient"), budget_exhausted="time"),
            "finalize",
        ),
    ],
    route_after_executor: [
        ("steps left", state(plan=PLAN, step_results=[ok(1)]), "executor"),
        (
            "a step failed, re-plan left",
            state(plan=PLAN, step_results=[failed(1)], replans=0),
            "planner",
        ),
        ("all steps ran", state(plan=PLAN, step_results=[ok(1), ok(2)]), "synthesizer"),
        (
            "budget spent",
            state(plan=PLAN, step_results=[ok(1)], budget_exhausted="time"),
            "finalize",
        ),
    ],
    route_after_synthesizer: [
        ("transient model error", state(last_error=error("model_transient")), "retry"),
        (
            "overflow, older turns",
            state(*TWO_TURNS, last_error=error("context_overflow")),
            "summarize",
        ),
        (
            "Retry-After beyond the cap",
            state(last_error=error("model_transient", 120.0)),
            "failure_handler",
        ),
        ("answered", state(*ONE_TURN, AIMessage("2")), "__end__"),
        (
            "a stalled endpoint, the turn's budget spent",
            state(last_error=error("model_transient"), budget_exhausted="time"),
            "finalize",
        ),
    ],
    route_after_retry: [
        ("no plan yet", state(plan=None), "planner"),
        (
            "a step failed, re-plan left",
            state(plan=PLAN, step_results=[failed(1)], replans=0),
            "planner",
        ),
        ("the plan ran", state(plan=PLAN, step_results=[ok(1), ok(2)]), "synthesizer"),
        ("re-plan used up", state(plan=PLAN, step_results=[failed(1)], replans=1), "synthesizer"),
    ],
    # --- reflexion ---
    route_after_attempt: [
        ("answered", state(status="answered"), "evaluate"),
        ("stopped at the step limit", state(status="max_iterations"), "evaluate"),
        ("failed", state(status="failed"), "__end__"),
        ("budget spent", state(status="budget_exhausted", budget_exhausted="tokens"), "__end__"),
    ],
    route_after_evaluate: [
        ("transient model error", state(last_error=error("model_transient")), "retry"),
        ("fatal model error: the answer stands", state(last_error=error("model_fatal")), "__end__"),
        (
            "retries used up: the answer stands",
            state(last_error=error("model_transient"), retry_count=MAX_RETRIES),
            "__end__",
        ),
        ("failure, trials left", state(trial=1, verdict={"success": False}), "reflect"),
        (
            "failure, budget spent",
            state(trial=1, verdict={"success": False}, budget_exhausted="time"),
            "finalize",
        ),
        ("failure, trials used up", state(trial=2, verdict={"success": False}), "__end__"),
        ("success", state(trial=1, verdict={"success": True}), "__end__"),
    ],
    # --- routed ---
    route_after_classify: [
        ("arithmetic", state(route={"path": "calculator", "expression": "1+1"}), "calculator"),
        ("arithmetic without an expression", state(route={"path": "calculator"}), "tool_loop"),
        ("small talk", state(route={"path": "small_talk"}), "small_talk"),
        ("anything else", state(route={"path": "tools"}), "tool_loop"),
        (
            "anything else, budget spent",
            state(route={"path": "tools"}, budget_exhausted="time"),
            "finalize",
        ),
    ],
    route_after_answer: [
        ("answered", state(status="answered"), "__end__"),
        ("not answered", state(status=None), "tool_loop"),
        ("not answered, budget spent", state(status=None, budget_exhausted="time"), "finalize"),
    ],
    # --- the shared recovery rule ---
    recover: [
        ("tool error", state(last_error=error("tool")), "retry"),
        ("transient model error", state(last_error=error("model_transient")), "retry"),
        (
            "overflow, older turns",
            state(*TWO_TURNS, last_error=error("context_overflow")),
            "summarize",
        ),
        (
            "overflow, nothing to summarise",
            state(last_error=error("context_overflow")),
            "failure_handler",
        ),
        (
            "overflow, retries used up",
            state(*TWO_TURNS, last_error=error("context_overflow"), retry_count=MAX_RETRIES),
            "failure_handler",
        ),
        ("internal error", state(last_error=error("internal")), "failure_handler"),
    ],
    retry_or_fail: [
        ("tool error", state(last_error=error("tool")), "retry"),
        ("Retry-After within the cap", state(last_error=error("model_transient", 10.0)), "retry"),
        (
            "Retry-After beyond the cap",
            state(last_error=error("model_transient", 120.0)),
            "failure_handler",
        ),
        ("overflow", state(*TWO_TURNS, last_error=error("context_overflow")), "failure_handler"),
    ],
}


def route(router: Callable, values: dict) -> str:
    takes_runtime = len(inspect.signature(router).parameters) == 2
    return router(values, RUNTIME) if takes_runtime else router(values)


@pytest.mark.parametrize(
    ("router", "values", "expected"),
    [
        pytest.param(router, values, expected, id=f"{router.__name__}: {case}")
        for router, cases in CASES.items()
        for case, values, expected in cases
    ],
)
def test_router_case(router: Callable, values: dict, expected: str):
    assert route(router, values) == expected


@pytest.mark.parametrize("router", list(CASES), ids=lambda router: router.__name__)
def test_every_literal_of_every_router_is_reached(router: Callable):
    names = set(typing.get_args(typing.get_type_hints(router)["return"]))
    assert {expected for _, _, expected in CASES[router]} == names
