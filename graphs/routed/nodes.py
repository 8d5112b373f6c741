"""The routed strategy's nodes: `classify` picks a path with a structured Route; pure arithmetic goes
straight to the calculator, small talk straight to an answer, everything else to the tool loop."""

from __future__ import annotations

from langchain_core.messages import AIMessage, SystemMessage, ToolCall
from langgraph.runtime import Runtime

from graphs.react.tool_loop import run_tool_loop
from graphs.routed.state import Route, RoutedState
from graphs.shared.limits import exhausted_budget
from graphs.shared.live import context_of
from graphs.shared.messages import new_message_id
from graphs.shared.model_call import ask_structured, call_model, model_input
from graphs.shared.tool_calls import run_tool_calls
from graphs.state import AgentContext

CLASSIFY_PROMPT = (
    "Classify the user's last message. calculator: pure arithmetic (give the expression); "
    "small_talk: a greeting, thanks or chit-chat that needs no tool; tools: anything else."
)
SMALL_TALK_INSTRUCTION = "Reply briefly and kindly; no tools are needed for this message."


def classify(state: RoutedState, runtime: Runtime[AgentContext]) -> dict:
    """Pick the path with a structured Route; any failure picks the tool loop, which handles all."""
    context = context_of(runtime)
    messages = [SystemMessage(CLASSIFY_PROMPT), *state["messages"]]
    reply = ask_structured(context.model, Route, messages)
    route = reply.parsed.model_dump() if reply.parsed is not None else None
    if route is None:  # classification is an optimisation only
        problem = reply.failure["message"] if reply.failure else reply.error
        route = {"path": "tools", "expression": None, "reason": f"not classified: {problem}"}
    runtime.stream_writer({"type": "route", **route})
    budget = exhausted_budget(state, context, state.get("tokens_used", 0))
    return {"route": route, "budget_exhausted": budget}


def calculator(state: RoutedState, runtime: Runtime[AgentContext]) -> dict:
    """Run the calculator on the classified expression and answer with its result."""
    context = context_of(runtime)
    expression = (state.get("route") or {})["expression"]
    call = ToolCall(
        name="calculator",
        args={"expression": expression},
        id=f"call_route_t{state.get('turn', 0)}",
        type="tool_call",
    )
    request = AIMessage(content="", tool_calls=[call], id=new_message_id("ai"))
    [result] = run_tool_calls(
        request, context.tools_by_name, runtime.stream_writer, context.max_tool_result_chars
    )
    if result.status == "error":
        return {"messages": [request, result]}
    answer = AIMessage(content=f"{expression} = {result.content}", id=new_message_id("ai"))
    return {"messages": [request, result, answer], "status": "answered"}


def small_talk(state: RoutedState, runtime: Runtime[AgentContext]) -> dict:
    """One model call without tools; a failure hands the message to the tool loop, which owns
    retries."""
    context = context_of(runtime)
    messages = [*model_input(state["messages"], context), SystemMessage(SMALL_TALK_INSTRUCTION)]
    reply = call_model(context.model, messages, answer_only=True)
    if reply.message is None:
        return {"last_error": reply.failure}
    answer = AIMessage(content=reply.message.content, id=reply.message.id)
    return {"messages": [answer], "status": "answered", "last_error": None}


def tool_loop(state: RoutedState, runtime: Runtime[AgentContext]) -> dict:
    return run_tool_loop(state, runtime)
