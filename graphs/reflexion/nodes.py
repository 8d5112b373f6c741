"""The reflexion strategy's nodes: attempt (the tool loop as a subgraph), evaluate the answer with a
structured verdict, and on failure reflect — write a lesson for the next attempt."""

from __future__ import annotations

from langchain_core.messages import AIMessage, AnyMessage, SystemMessage
from langgraph.runtime import Runtime

from graphs.react.tool_loop import run_tool_loop
from graphs.reflexion.state import Lesson, ReflexionState, Verdict
from graphs.shared.limits import exhausted_budget
from graphs.shared.live import context_of
from graphs.shared.messages import current_turn
from graphs.shared.model_call import ask_structured
from graphs.state import AgentContext

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


def attempt(state: ReflexionState, runtime: Runtime[AgentContext]) -> dict:
    """One trial: the tool loop, with this turn's lessons in its prompt."""
    trial = state.get("trial", 0) + 1
    runtime.stream_writer(
        {"type": "trial", "trial": trial, "max_trials": context_of(runtime).max_trials}
    )
    update = run_tool_loop(state, runtime, lessons_prompt(state.get("lessons") or []))
    return update | {"trial": trial, "verdict": None}


def lessons_prompt(lessons: list[str]) -> str:
    return "\n".join([LESSONS_HEADER, *(f"- {lesson}" for lesson in lessons)]) if lessons else ""


def evaluate(state: ReflexionState, runtime: Runtime[AgentContext]) -> dict:
    """A structured verdict on the last attempt's answer."""
    context = context_of(runtime)
    messages = [SystemMessage(EVALUATE_PROMPT), *last_attempt(state["messages"])]
    reply = ask_structured(context.model, Verdict, messages)
    if reply.failure:  # the router retries or keeps the answer
        return {"last_error": reply.failure, "verdict": None}
    if reply.parsed is None:  # an answer nobody could judge is not a success
        verdict = {"success": False, "reason": f"no usable verdict ({reply.error})"}
    else:
        verdict = reply.parsed.model_dump()
    runtime.stream_writer(
        {"type": "verdict", "trial": state.get("trial", 0), **verdict}
        | {"max_trials": context.max_trials}
    )
    budget = exhausted_budget(state, context, state.get("tokens_used", 0))
    return {"verdict": verdict, "last_error": None, "retry_count": 0, "budget_exhausted": budget}


def reflect(state: ReflexionState, runtime: Runtime[AgentContext]) -> dict:
    """Turn the failure into a lesson for the next trial (best effort: the reason stands in)."""
    lessons = state.get("lessons") or []
    reason = (state.get("verdict") or {}).get("reason", "the answer was judged a failure")
    earlier = "\nEarlier lessons:\n" + "\n".join(f"- {x}" for x in lessons) if lessons else ""
    prompt = REFLECT_PROMPT.format(reason=reason, earlier=earlier)
    reply = ask_structured(
        context_of(runtime).model, Lesson, [SystemMessage(prompt), *last_attempt(state["messages"])]
    )
    lesson = reply.parsed.lesson.strip() if reply.parsed is not None else ""
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
