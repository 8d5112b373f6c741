"""Reflexion (`--strategy reflexion`): attempt (the tool loop as a subgraph), evaluate the answer with a
structured verdict, and on failure reflect — write a lesson — and attempt again with the lessons in
the prompt, up to `max_trials`.

START ─► attempt ─┬─ answered ─► evaluate ─┬─ success / no trials left ─► END
                  │                        ├─ failure ─► reflect ─► attempt
                  │                        └─ transient model error ─► retry ─► evaluate
                  └─ failed, cancelled or budget spent ─────────────────────► END
"""

from __future__ import annotations

from typing import Literal, NotRequired

from langchain_core.messages import AIMessage, AnyMessage, SystemMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

from graphs.messages import current_turn
from graphs.model_errors import classify_model_error
from graphs.nodes import failure_handler, finalize, on_node_error
from graphs.nodes import retry as retry_node
from graphs.routing import waits_too_long
from graphs.schemas import Lesson, Verdict, ask_structured
from graphs.state import AgentContext, AgentState
from graphs.tool_loop import run_tool_loop

EVALUATE_PROMPT = (
    "You are the evaluator. Judge whether the assistant's last answer fully and correctly does what "
    "the user asked in the conversation below; tool results are the evidence. Give a verdict: "
    "success, or failure with the reason (what is wrong or missing)."
)
REFLECT_PROMPT = (
    "The attempt below failed: {reason}\nWrite one short lesson for the next attempt at the same "
    "request: what to do differently so it succeeds.{earlier}"
)
LESSONS_HEADER = "Lessons from earlier attempts at this request (apply them):"


class ReflexionState(AgentState):
    """AgentState plus this turn's trials: their count, the lessons so far, the last verdict."""

    trial: NotRequired[int]
    lessons: NotRequired[list[str]]
    verdict: NotRequired[dict | None]


REFLEXION_TURN_RESET = {"trial": 0, "lessons": [], "verdict": None}


def attempt(state: ReflexionState, runtime: Runtime[AgentContext]) -> dict:
    """One trial: the tool loop, with this turn's lessons in its prompt."""
    trial = state.get("trial", 0) + 1
    runtime.stream_writer(
        {"type": "trial", "trial": trial, "max_trials": runtime.context.max_trials}
    )
    update = run_tool_loop(state, runtime, lessons_prompt(state.get("lessons") or []))
    return update | {"trial": trial, "verdict": None}


def lessons_prompt(lessons: list[str]) -> str:
    return "\n".join([LESSONS_HEADER, *(f"- {lesson}" for lesson in lessons)]) if lessons else ""


def evaluate(state: ReflexionState, runtime: Runtime[AgentContext]) -> dict:
    """A structured verdict on the last attempt's answer."""
    messages = [SystemMessage(EVALUATE_PROMPT), *last_attempt(state["messages"])]
    try:
        reply = ask_structured(runtime.context.model, Verdict, messages)
    except Exception as exc:  # the model boundary: the router retries or keeps the answer
        return {"last_error": classify_model_error(exc), "verdict": None}
    if reply.parsed is None:  # an answer nobody could judge is not a success
        verdict = {"success": False, "reason": f"no usable verdict ({reply.error})"}
    else:
        verdict = reply.parsed.model_dump()
    runtime.stream_writer(
        {"type": "verdict", "trial": state.get("trial", 0), **verdict}
        | {"max_trials": runtime.context.max_trials}
    )
    return {"verdict": verdict, "last_error": None, "retry_count": 0}


def reflect(state: ReflexionState, runtime: Runtime[AgentContext]) -> dict:
    """Turn the failure into a lesson for the next trial (best effort: the reason stands in)."""
    lessons = state.get("lessons") or []
    reason = (state.get("verdict") or {}).get("reason", "the answer was judged a failure")
    earlier = "\nEarlier lessons:\n" + "\n".join(f"- {x}" for x in lessons) if lessons else ""
    prompt = REFLECT_PROMPT.format(reason=reason, earlier=earlier)
    try:
        reply = ask_structured(
            runtime.context.model,
            Lesson,
            [SystemMessage(prompt), *last_attempt(state["messages"])],
        )
        lesson = reply.parsed.lesson.strip() if reply.parsed is not None else ""
    except Exception:  # a lesson is best effort; the verdict's reason stands in for it
        lesson = ""
    lesson = lesson or f"The last attempt failed because {reason}; avoid that."
    runtime.stream_writer({"type": "lesson", "trial": state.get("trial", 0), "lesson": lesson})
    return {"lessons": [*lessons, lesson]}


def last_attempt(messages: list[AnyMessage]) -> list[AnyMessage]:
    """The user's message and what the last attempt added (earlier attempts end in an answer)."""
    turn = current_turn(messages)
    answers = [i for i, m in enumerate(turn) if _is_answer(m)]
    start = answers[-2] + 1 if len(answers) >= 2 else 1
    return [turn[0], *turn[start:]]


def _is_answer(message: AnyMessage) -> bool:
    return isinstance(message, AIMessage) and not message.tool_calls and bool(message.content)


def route_after_attempt(state: ReflexionState) -> Literal["evaluate", "__end__"]:
    """Only an answered attempt is judged; a failed, cancelled or out-of-budget one ends the turn."""
    if state.get("status") in {"failed", "cancelled"} or state.get("budget_exhausted"):
        return END
    return "evaluate"


def route_after_evaluate(
    state: ReflexionState, runtime: Runtime[AgentContext]
) -> Literal["reflect", "retry", "__end__"]:
    error = state.get("last_error")
    if error:
        retryable = error["kind"] == "model_transient" and not waits_too_long(error, runtime)
        budget_left = state.get("retry_count", 0) < runtime.context.max_retries
        return "retry" if retryable and budget_left else END
    verdict = state.get("verdict") or {"success": True}
    if verdict["success"] or state.get("trial", 0) >= runtime.context.max_trials:
        return END
    return "reflect"


def build_reflexion_graph(checkpointer: BaseCheckpointSaver | None = None) -> CompiledStateGraph:
    graph = StateGraph(ReflexionState, context_schema=AgentContext)
    graph.set_node_defaults(error_handler=on_node_error)
    graph.add_node("attempt", attempt)
    graph.add_node("evaluate", evaluate)
    graph.add_node("reflect", reflect)
    graph.add_node("retry", retry_node)
    graph.add_node("failure_handler", failure_handler)
    graph.add_node("finalize", finalize)  # not routed to: closes interrupted turns (as_node)

    graph.add_edge(START, "attempt")
    graph.add_conditional_edges("attempt", route_after_attempt)
    graph.add_conditional_edges("evaluate", route_after_evaluate)
    graph.add_edge("reflect", "attempt")
    graph.add_edge("retry", "evaluate")
    graph.add_edge("failure_handler", END)
    graph.add_edge("finalize", END)
    return graph.compile(checkpointer=checkpointer)
