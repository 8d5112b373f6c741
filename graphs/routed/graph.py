"""Query routing (`--strategy routed`): a `classify` entry node sends pure arithmetic straight to the
calculator, small talk straight to an answer, and everything else to the tool loop (a subgraph).

START ─► classify ─┬─ arithmetic ─► calculator ─┬─ result ─► END
                   │                            └─ error ──► tool_loop ─► END
                   ├─ small talk ─► small_talk ─► END   (a model error ─► tool_loop)
                   └─ anything else ─────────────────────► tool_loop ─► END
"""

from __future__ import annotations

from typing import Literal, NotRequired

from langchain_core.messages import AIMessage, SystemMessage, ToolCall
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

from graphs.react.nodes import failure_handler, finalize, model_input, on_node_error
from graphs.react.tool_loop import run_tool_loop
from graphs.shared.messages import new_message_id
from graphs.shared.model_errors import classify_model_error
from graphs.shared.structured import Route, ask_structured
from graphs.shared.tool_calls import run_tool_calls
from graphs.state import AgentContext, AgentState

CLASSIFY_PROMPT = (
    "Classify the user's last message. calculator: pure arithmetic (give the expression); "
    "small_talk: a greeting, thanks or chit-chat that needs no tool; tools: anything else."
)
SMALL_TALK_INSTRUCTION = "Reply briefly and kindly; no tools are needed for this message."


class RoutedState(AgentState):
    """AgentState plus the route chosen for this turn's message."""

    route: NotRequired[dict | None]


ROUTED_TURN_RESET = {"route": None}


def classify(state: RoutedState, runtime: Runtime[AgentContext]) -> dict:
    """Pick the path with a structured Route; any failure picks the tool loop, which handles all."""
    messages = [SystemMessage(CLASSIFY_PROMPT), *state["messages"]]
    try:
        reply = ask_structured(runtime.context.model, Route, messages)
        route = reply.parsed.model_dump() if reply.parsed is not None else None
        problem = reply.error
    except Exception as exc:  # the model boundary: classification is an optimisation only
        route, problem = None, classify_model_error(exc)["message"]
    if route is None:
        route = {"path": "tools", "expression": None, "reason": f"not classified: {problem}"}
    runtime.stream_writer({"type": "route", **route})
    return {"route": route}


def calculator(state: RoutedState, runtime: Runtime[AgentContext]) -> dict:
    """Run the calculator on the classified expression and answer with its result."""
    context = runtime.context
    expression = state["route"]["expression"]
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
    """One model call without tools."""
    context = runtime.context
    messages = [*model_input(state["messages"], context), SystemMessage(SMALL_TALK_INSTRUCTION)]
    try:
        reply = context.model.invoke(messages)
    except Exception as exc:  # the tool loop takes over and owns retries
        return {"last_error": classify_model_error(exc)}
    if not str(reply.content).strip():
        return {}
    answer = AIMessage(content=reply.content, id=reply.id or new_message_id("ai"))
    return {"messages": [answer], "status": "answered", "last_error": None}


def tool_loop(state: RoutedState, runtime: Runtime[AgentContext]) -> dict:
    return run_tool_loop(state, runtime)


def route_after_classify(
    state: RoutedState, runtime: Runtime[AgentContext]
) -> Literal["calculator", "small_talk", "tool_loop"]:
    route = state.get("route") or {}
    if route.get("path") == "calculator":
        has_tool = "calculator" in runtime.context.tools_by_name
        return "calculator" if has_tool and route.get("expression") else "tool_loop"
    return "small_talk" if route.get("path") == "small_talk" else "tool_loop"


def route_after_answer(state: RoutedState) -> Literal["tool_loop", "__end__"]:
    """A path that did not answer (a calculator error, a failed model call) hands over."""
    return END if state.get("status") == "answered" else "tool_loop"


def build_routed_graph(checkpointer: BaseCheckpointSaver | None = None) -> CompiledStateGraph:
    graph = StateGraph(RoutedState, context_schema=AgentContext)
    graph.set_node_defaults(error_handler=on_node_error)
    graph.add_node("classify", classify)
    graph.add_node("calculator", calculator)
    graph.add_node("small_talk", small_talk)
    graph.add_node("tool_loop", tool_loop)
    graph.add_node("failure_handler", failure_handler)
    graph.add_node("finalize", finalize)  # not routed to: closes interrupted turns (as_node)

    graph.add_edge(START, "classify")
    graph.add_conditional_edges("classify", route_after_classify)
    graph.add_conditional_edges("calculator", route_after_answer)
    graph.add_conditional_edges("small_talk", route_after_answer)
    graph.add_edge("tool_loop", END)
    graph.add_edge("failure_handler", END)
    graph.add_edge("finalize", END)
    return graph.compile(checkpointer=checkpointer)
