"""Plan-and-Solve (`--strategy plan`): the planner asks the model for a whole plan as structured output,
the executor runs one step per graph step with the tools, the synthesizer answers from the results.

START ─► planner ─┬─ valid plan ──► executor ─┬─ steps left ─────────► executor
                  │                           ├─ step failed (once) ─► planner (re-plan the rest)
                  │                           ├─ budget spent ───────► finalize ─► END
                  │                           └─ done ───────────────► synthesizer ─► END
                  ├─ invalid plan / transient model error ─► retry ─► planner
                  └─ retries used up / permanent error ────► failure_handler ─► END
"""

from __future__ import annotations

from typing import Literal, NotRequired

from langchain_core.messages import AIMessage, SystemMessage, ToolCall
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

from graphs.approvals import review_calls
from graphs.messages import for_model, new_message_id
from graphs.model_errors import classify_model_error
from graphs.nodes import exhausted_budget, failure_handler, finalize, model_input, on_node_error
from graphs.nodes import retry as retry_node
from graphs.plan_steps import (
    INVALID_PLAN_INSTRUCTION,
    REPLAN_INSTRUCTION,
    StepSkippedError,
    plan_problems,
    planner_prompt,
    resolve_references,
    step_line,
)
from graphs.routing import route_at_start, waits_too_long
from graphs.schemas import Plan, ask_structured, tokens_of
from graphs.state import AgentContext, AgentState, LastError
from graphs.summarize import can_summarize, summarize
from graphs.tool_calls import run_tool_calls

MAX_REPLANS = 1
INVALID_PLAN = "invalid plan: "
EMPTY_PLAN = (
    "the plan has no steps; if the request needs no tool at all, send the empty plan again, "
    "otherwise send the steps that answer it"
)
SYNTHESIZE_INSTRUCTION = (
    "The plan's steps have run; their calls and results are above. Write the answer to the user's "
    "last message from those results only. Say plainly which steps failed and what is missing."
)


class PlanState(AgentState):
    """AgentState plus the plan of the current turn and each step's result (reset every turn)."""

    plan: NotRequired[list[dict] | None]
    step_results: NotRequired[list[dict]]
    replans: NotRequired[int]


PLAN_TURN_RESET = {"plan": None, "step_results": [], "replans": 0}


def planner(state: PlanState, runtime: Runtime[AgentContext]) -> dict:
    """Ask for a plan (or, after a failed step, for the rest of it) and validate it."""
    context = runtime.context
    replanning = needs_replan(state)
    kept = (state.get("plan") or [])[: len(state.get("step_results") or [])] if replanning else []
    update: dict = {"iteration": state.get("iteration", 0) + 1}
    try:
        reply = ask_structured(context.model, Plan, planner_input(state, context, replanning))
    except Exception as exc:  # the model boundary: classified and routed like the agent's
        return update | {"last_error": classify_model_error(exc)}
    update["tokens_used"] = state.get("tokens_used", 0) + tokens_of(reply)
    problems = [reply.error] if reply.error else []
    if reply.parsed is not None:
        problems = plan_problems(
            reply.parsed, context.tools_by_name, len(kept) + 1, _limit(context)
        )
        if not reply.parsed.steps and not replanning and _question_empty_plan(state, context):
            problems = [EMPTY_PLAN]
    if problems:
        message = INVALID_PLAN + "; ".join(problems)
        return update | {"last_error": LastError(kind="tool", message=message, retry_after=None)}
    steps = [step.model_dump() for step in reply.parsed.steps]
    runtime.stream_writer(
        {"type": "plan", "replan": replanning, "steps": _numbered(steps, len(kept) + 1)}
    )
    return update | {
        "plan": [*kept, *steps],
        "replans": state.get("replans", 0) + int(replanning),
        "last_error": None,
        "retry_count": 0,
    }


def planner_input(state: PlanState, context: AgentContext, replanning: bool) -> list:
    prompt = planner_prompt(context.tools, _limit(context))
    system = f"{context.system_prompt}\n\n{prompt}" if context.system_prompt else prompt
    messages = [SystemMessage(system), *for_model(state["messages"], context.turn_notes)]
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
    error = state.get("last_error")
    if error and error["message"].startswith(INVALID_PLAN):
        problem = error["message"].removeprefix(INVALID_PLAN)
        messages.append(SystemMessage(INVALID_PLAN_INSTRUCTION.format(error=problem)))
    return messages


def _question_empty_plan(state: PlanState, context: AgentContext) -> bool:
    """A first empty plan goes back to the model once (a weak model often sends one for a request
    that needs tools); sent again, or with no retry left to ask, it is accepted."""
    error = state.get("last_error") or {}
    asked = error.get("message") == INVALID_PLAN + EMPTY_PLAN
    return not asked and state.get("retry_count", 0) < context.max_retries


def _limit(context: AgentContext) -> int:
    return context.max_iterations


def _numbered(steps: list[dict], first: int) -> list[str]:
    return [step_line(first + offset, step) for offset, step in enumerate(steps)]


def needs_replan(state: PlanState) -> bool:
    """The last step failed and the turn still has its re-plan."""
    results = state.get("step_results") or []
    return bool(results) and results[-1]["status"] == "error" and _replans_left(state)


def _replans_left(state: PlanState) -> bool:
    return state.get("replans", 0) < MAX_REPLANS


def executor(state: PlanState, runtime: Runtime[AgentContext]) -> dict:
    """Run the next step: its references resolved, risky calls reviewed, the tool run."""
    context = runtime.context
    results = state.get("step_results") or []
    number = len(results) + 1
    step = state["plan"][number - 1]
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
    request = AIMessage(content="", tool_calls=[call], id=new_message_id("ai"))
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


def _call_id(state: PlanState, number: int) -> str:
    """Deterministic, so an approval asked before a restart still matches the call it is about."""
    return f"call_plan_t{state.get('turn', 0)}_s{number}_r{state.get('replans', 0)}"


def synthesizer(state: PlanState, runtime: Runtime[AgentContext]) -> dict:
    """Write the answer from the steps' results (the model is given no tools)."""
    context = runtime.context
    update: dict = {"iteration": state.get("iteration", 0) + 1}
    messages = [*model_input(state["messages"], context), SystemMessage(SYNTHESIZE_INSTRUCTION)]
    try:
        reply = context.model.invoke(messages)
    except Exception as exc:  # the model boundary
        return update | {"last_error": classify_model_error(exc)}
    if not str(reply.content).strip():
        problem = "invalid response from endpoint: an empty answer"
        return update | {
            "last_error": LastError(kind="model_transient", message=problem, retry_after=None)
        }
    answer = AIMessage(content=reply.content, id=reply.id or new_message_id("ai"))
    usage = (reply.usage_metadata or {}).get("total_tokens") or 0
    return update | {
        "messages": [answer],
        "status": "answered",
        "last_error": None,
        "retry_count": 0,
        "tokens_used": state.get("tokens_used", 0) + int(usage),
    }


def route_at_plan_start(
    state: PlanState, runtime: Runtime[AgentContext]
) -> Literal["summarize", "planner"]:
    """As in the tool loop: a turn over the context budget first summarises older turns."""
    return "summarize" if route_at_start(state, runtime) == "summarize" else "planner"


def route_after_planner(
    state: PlanState, runtime: Runtime[AgentContext]
) -> Literal["executor", "synthesizer", "retry", "summarize", "failure_handler"]:
    error = state.get("last_error")
    if error:
        return _recover(state, runtime)
    return "executor" if _steps_left(state) else "synthesizer"


def route_after_executor(
    state: PlanState,
) -> Literal["executor", "planner", "synthesizer", "finalize"]:
    if state.get("budget_exhausted"):
        return "finalize"
    if needs_replan(state):
        return "planner"
    return "executor" if _steps_left(state) else "synthesizer"


def route_after_synthesizer(
    state: PlanState, runtime: Runtime[AgentContext]
) -> Literal["retry", "summarize", "failure_handler", "__end__"]:
    return _recover(state, runtime) if state.get("last_error") else END


def route_after_retry(state: PlanState) -> Literal["planner", "synthesizer"]:
    """Back to the node that failed: the planner until a plan stands, else the synthesizer."""
    if state.get("plan") is None or needs_replan(state):
        return "planner"
    return "synthesizer"


def _recover(
    state: PlanState, runtime: Runtime[AgentContext]
) -> Literal["retry", "summarize", "failure_handler"]:
    error = state["last_error"]
    budget_left = state.get("retry_count", 0) < runtime.context.max_retries
    if error["kind"] == "context_overflow":
        ok = budget_left and can_summarize(state, runtime.context)
        return "summarize" if ok else "failure_handler"
    retryable = error["kind"] == "tool" or (
        error["kind"] == "model_transient" and not waits_too_long(error, runtime)
    )
    return "retry" if retryable and budget_left else "failure_handler"


def _steps_left(state: PlanState) -> bool:
    return len(state.get("step_results") or []) < len(state.get("plan") or [])


def build_plan_graph(checkpointer: BaseCheckpointSaver | None = None) -> CompiledStateGraph:
    graph = StateGraph(PlanState, context_schema=AgentContext)
    graph.set_node_defaults(error_handler=on_node_error)
    graph.add_node("planner", planner)
    graph.add_node("executor", executor)
    graph.add_node("synthesizer", synthesizer)
    graph.add_node("retry", retry_node)
    graph.add_node("summarize", summarize)
    graph.add_node("failure_handler", failure_handler)
    graph.add_node("finalize", finalize)

    graph.add_conditional_edges(START, route_at_plan_start)
    graph.add_conditional_edges("planner", route_after_planner)
    graph.add_conditional_edges("executor", route_after_executor)
    graph.add_conditional_edges("synthesizer", route_after_synthesizer)
    graph.add_conditional_edges("retry", route_after_retry)
    graph.add_conditional_edges("summarize", route_after_retry)
    graph.add_edge("failure_handler", END)
    graph.add_edge("finalize", END)
    return graph.compile(checkpointer=checkpointer)
