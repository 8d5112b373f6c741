"""The tool loop's own nodes: `agent` (one model call with the tools bound) and `tools` (run the
calls it made). Retry, summarize, failure_handler and finalize are shared (graphs/shared/)."""

from __future__ import annotations

import json

from langchain_core.messages import AIMessage
from langgraph.runtime import Runtime

from graphs.shared.approvals import as_run, review_calls, was_refused
from graphs.shared.deadline import model_deadline, turn_seconds_left
from graphs.shared.limits import exhausted_budget
from graphs.shared.live import context_of
from graphs.shared.messages import call_signature
from graphs.shared.model_call import call_model, model_input
from graphs.shared.model_errors import MODEL_ERROR_KINDS
from graphs.shared.tool_calls import run_tool_calls
from graphs.shared.window import prompt_tokens
from graphs.state import AgentContext, AgentState, LastError, last_error_kind


def agent(state: AgentState, runtime: Runtime[AgentContext]) -> dict:
    """Call the model once, within the turn's time budget; a failure is recorded for the router
    instead of raised, with whether the budget is spent (then the router ends the turn in
    finalize instead of asking the failing endpoint again)."""
    context = context_of(runtime)
    model = context.model.bind_tools(context.tools) if context.tools else context.model
    update: dict = {"iteration": state.get("iteration", 0) + 1}
    # The failure is judged with the prompt's size (an empty stream after a long prompt is an
    # overflow). Only a window the server reported sets what "long" is; a guessed one is too high.
    window = context.window.tokens if context.window and context.window.exact else None
    with model_deadline(turn_seconds_left(state, context)):
        reply = call_model(
            model,
            model_input(state["messages"], context),
            prompt_tokens=lambda: prompt_tokens(state["messages"], context),
            window_tokens=window,
        )
    if reply.message is None:
        spent = exhausted_budget(state, context, state.get("tokens_used", 0))
        return update | {"last_error": reply.failure, "budget_exhausted": spent}
    message = _cut_off_calls_invalid(reply.message)
    tokens = state.get("tokens_used", 0) + reply.tokens
    update |= {"messages": [message], "last_error": None, "tokens_used": tokens}
    update["budget_exhausted"] = exhausted_budget(state, context, tokens)
    if last_error_kind(state) in MODEL_ERROR_KINDS:
        update["retry_count"] = 0
    if not (message.tool_calls or message.invalid_tool_calls):
        update["status"] = "answered"
    return update


def _cut_off_calls_invalid(reply: AIMessage) -> AIMessage:
    """Tool calls in a reply cut off by the token limit may be truncated (LangChain repairs partial
    JSON): never run them; the model is told and sends them again."""
    if reply.response_metadata.get("finish_reason") != "length" or not reply.tool_calls:
        return reply
    invalid = [
        {
            "name": c["name"],
            "args": json.dumps(c["args"], ensure_ascii=False),
            "id": c["id"],
            "error": "the reply was cut off by the output token limit (finish_reason=length), so "
            "this call may be incomplete; it was not run. Send it again, shorter",
            "type": "invalid_tool_call",
        }
        for c in reply.tool_calls
    ]
    return reply.model_copy(
        update={"tool_calls": [], "invalid_tool_calls": [*reply.invalid_tool_calls, *invalid]}
    )


def tools(state: AgentState, runtime: Runtime[AgentContext]) -> dict:
    """Run every call of the last AI message; any failed call makes this step a tool error."""
    context = context_of(runtime)
    request = state["messages"][-1]
    # route_after_agent sends here only a reply with tool calls
    assert isinstance(request, AIMessage), f"the tools node got a {type(request).__name__}"
    allowed, refused = review_calls(
        request.tool_calls, context.tools_by_name, context.approval, context.confirm_tools
    )
    results = run_tool_calls(
        request.model_copy(update={"tool_calls": allowed}),
        context.tools_by_name,
        runtime.stream_writer,
        context.max_tool_result_chars,
    )
    order = {call["id"]: index for index, call in enumerate(request.tool_calls)}
    results = sorted([*results, *refused], key=lambda m: order.get(m.tool_call_id, len(order)))
    ran = as_run(request, allowed)
    signatures = [call_signature(c["name"], c["args"]) for c in (ran or request).tool_calls]
    update: dict = {
        "messages": [ran, *results] if ran else results,
        "call_signatures": [*(state.get("call_signatures") or []), *signatures],
    }
    update["budget_exhausted"] = exhausted_budget(state, context, state.get("tokens_used", 0))
    # A refused approval is the user's answer, not an error to retry: the model reads it.
    failures = [m for m in results if m.status == "error" and not was_refused(m)]
    if not failures:
        return update | {"last_error": None, "retry_count": 0}
    summary = "; ".join(f"{m.name}: {m.content}" for m in failures)
    return update | {"last_error": LastError(kind="tool", message=summary, retry_after=None)}
