"""The plan strategy's nodes: the planner asks the model for a whole plan as structured output, the
executor runs one step per graph step with the tools, the synthesizer answers from the results."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.messages import AIMessage, SystemMessage, ToolCall
from langgraph.runtime import Runtime

from graphs.plan.state import Plan, PlanState, continues, needs_replan
from graphs.plan.steps import (
    CONTINUE_INSTRUCTION,
    INVALID_PLAN_INSTRUCTION,
    REPLAN_INSTRUCTION,
    StepSkippedError,
    plan_problems,
    planner_prompt,
    resolve_references,
    step_line,
)
from graphs.shared.approvals import review_calls
from graphs.shared.closing import INVALID_PLAN
from graphs.shared.limits import exhausted_budget
from graphs.shared.live import context_of
from graphs.shared.messages import for_model, new_message_id
from graphs.shared.model_call import ask_structured, call_model, model_input
from graphs.shared.requests import asking
from graphs.shared.tool_calls import run_tool_calls
from graphs.state import AgentContext, LastError

EMPTY_PLAN = (
    "the plan has no steps; if the request needs no tool at all, send the empty plan again, "
    "otherwise send the steps that answer it"
)
SYNTHESIZE_INSTRUCTION = (
    "The plan's steps have run; their calls and results are above. Write the answer to the user's "
    "last message from those results only. Say plainly which steps failed and what is missing."
)


def planner(state: PlanState, runtime: Runtime[AgentContext]) -> dict:
    """Ask for a plan (or its rest: after a failed step, or when the plan said it continues once
    its steps have run) and validate it."""
    context = context_of(runtime)
    replanning, continuing = needs_replan(state), continues(state)
    done = len(state.get("step_results") or [])
    kept = (state.get("plan") or [])[:done] if replanning or continuing else []
    update: dict = {"iteration": state.get("iteration", 0) + 1}
    reply = ask_structured(
        context.model, Plan, planner_input(state, context, replanning, continuing)
    )
    if reply.failure:
        return update | {"last_error": reply.failure, "budget_exhausted": _spent(state, context)}
    update["tokens_used"] = state.get("tokens_used", 0) + reply.tokens
    problems = [reply.error] if reply.error else []
    if reply.parsed is not None:
        problems = plan_problems(
            reply.parsed, context.tools_by_name, len(kept) + 1, _limit(context)
        )
        if not reply.parsed.steps and not kept and _question_empty_plan(state, context):
            problems = [EMPTY_PLAN]
    if problems:
        message = INVALID_PLAN + "; ".join(problems)
        return update | {"last_error": LastError(kind="tool", message=message, retry_after=None)}
    assert reply.parsed is not None  # no problems: the reply parsed into a plan
    steps = [step.model_dump() for step in reply.parsed.steps]
    runtime.stream_writer(
        {
            "type": "plan",
            "replan": replanning,
            "continued": continuing,
            "steps": _numbered(steps, len(kept) + 1),
        }
    )
    return update | {
        "plan": [*kept, *steps],
        "replans": state.get("replans", 0) + int(replanning),
        # Once per turn: the rest of a plan cannot ask for a rest of its own (no endless planning).
        "plan_continues": reply.parsed.continues and not continuing and bool(steps),
        "last_error": None,
        "retry_count": 0,
    }


def planner_input(
    state: PlanState, context: AgentContext, replanning: bool, continuing: bool = False
) -> list:
    prompt = planner_prompt(context.tools, _limit(context))
    system = f"{context.system_prompt}\n\n{prompt}" if context.system_prompt else prompt
    tools = [tool.name for tool in context.tools]
    messages = [
        asking(system, "plan", tools=tools),
        *for_model(state["messages"], context.turn_notes),
    ]
    if replanning:
        results = state["step_results"]
        failed = results[-1]
        messages.append(
            SystemMessage(
                REPLAN_INSTRUCTION.format(
                    number=failed["step"],
                    tool=failed["tool"],
                    error=failed["result"],
                    done=len(results),
                    next_number=len(results) + 1,
                )
            )
        )
    if continuing:
        done = len(state["step_results"])
        messages.append(SystemMessage(CONTINUE_INSTRUCTION.format(done=done, next_number=done + 1)))
    error = state.get("last_error")
    if error and error["message"].startswith(INVALID_PLAN):
        problem = error["message"].removeprefix(INVALID_PLAN)
        messages.append(SystemMessage(INVALID_PLAN_INSTRUCTION.format(error=problem)))
    return messages


def _question_empty_plan(state: PlanState, context: AgentContext) -> bool:
    """A first empty plan goes back to the model once (a weak model often sends one for a request
    that needs tools); sent again, or with no retry left to ask, it is accepted."""
    error = state.get("last_error")
    asked = error is not None and error["message"] == INVALID_PLAN + EMPTY_PLAN
    return not asked and state.get("retry_count", 0) < context.max_retries


def _limit(context: AgentContext) -> int:
    return context.max_iterations


def _numbered(steps: list[dict], first: int) -> list[str]:
    return [step_line(first + offset, step) for offset, step in enumerate(steps)]


def executor(state: PlanState, runtime: Runtime[AgentContext]) -> dict:
    """Run the next step: its references resolved, risky calls reviewed, the tool run."""
    context = context_of(runtime)
    results = state.get("step_results") or []
    number = len(results) + 1
    step = (state.get("plan") or [])[number - 1]  # route_after_planner: a step is left
    try:
        arguments = resolve_references(step["arguments"], results)
    except StepSkippedError as exc:
        skipped = _result(number, step["tool"], step["arguments"], "skipped", f"not run: {exc}")
        runtime.stream_writer({"type": "step_skipped", "step": number, "reason": str(exc)})
        return {"step_results": [*results, skipped]}
    call = ToolCall(name=step["tool"], args=arguments, id=_call_id(state, number), type="tool_call")
    allowed, refused = review_calls(
        [call], context.tools_by_name, context.approval, context.confirm_tools
    )
    # The message records the call as it ran: with the arguments an approval edited, if any.
    request = AIMessage(content="", tool_calls=allowed or [call], id=new_message_id("ai"))
    ran = run_tool_calls(
        request.model_copy(update={"tool_calls": allowed}),
        context.tools_by_name,
        runtime.stream_writer,
        context.max_tool_result_chars,
    )
    [answer] = [*ran, *refused]
    args = allowed[0]["args"] if allowed else arguments
    outcome = _result(number, step["tool"], args, answer.status, str(answer.content))
    return {
        "messages": [request, answer],
        "step_results": [*results, outcome],
        "budget_exhausted": exhausted_budget(state, context, state.get("tokens_used", 0)),
    }


def next_step_calls(values: dict) -> list[ToolCall]:
    """The call the executor runs next (references not yet resolved), for replay's gate."""
    number = len(values.get("step_results") or []) + 1
    step = (values.get("plan") or [])[number - 1 : number]
    return [
        ToolCall(name=s["tool"], args=s["arguments"], id=_call_id(values, number), type="tool_call")
        for s in step
    ]


def _result(number: int, tool: str, arguments: dict, status: str, text: str) -> dict:
    return {"step": number, "tool": tool, "arguments": arguments, "status": status, "result": text}


def _call_id(state: Mapping[str, Any], number: int) -> str:
    """Deterministic, so an approval asked before a restart still matches the call it is about."""
    return f"call_plan_t{state.get('turn', 0)}_s{number}_r{state.get('replans', 0)}"


def synthesizer(state: PlanState, runtime: Runtime[AgentContext]) -> dict:
    """Write the answer from the steps' results (the model is given no tools)."""
    context = context_of(runtime)
    update: dict = {"iteration": state.get("iteration", 0) + 1}
    messages = [*model_input(state["messages"], context), SystemMessage(SYNTHESIZE_INSTRUCTION)]
    reply = call_model(context.model, messages, answer_only=True)
    if reply.message is None:
        return update | {"last_error": reply.failure, "budget_exhausted": _spent(state, context)}
    answer = AIMessage(content=reply.message.content, id=reply.message.id)
    return update | {
        "messages": [answer],
        "status": "answered",
        "last_error": None,
        "retry_count": 0,
        "tokens_used": state.get("tokens_used", 0) + reply.tokens,
    }


def _spent(state: PlanState, context: AgentContext) -> str | None:
    """Which per-turn budget a failed model call found spent (the router then ends the turn)."""
    return exhausted_budget(state, context, state.get("tokens_used", 0))
