"""The nodes that end a turn early, in every strategy: `failure_handler` (a failure that recovery
could not fix), `finalize` (a budget spent or a loop), and the node error handler that sends a bug to
the failure handler. Both close any dangling tool call first, so the history stays valid."""

from __future__ import annotations

import traceback
from typing import Literal

from langchain_core.messages import AIMessage, AnyMessage, SystemMessage
from langgraph.errors import NodeError
from langgraph.runtime import Runtime
from langgraph.types import Command

from graphs.shared.limits import is_looping
from graphs.shared.messages import (
    cancelled_results,
    current_turn,
    dangling_tool_calls,
    new_message_id,
)
from graphs.shared.model_call import call_model, model_input
from graphs.state import AgentContext, AgentState, LastError

ErrorRoute = Literal["failure_handler"]  # where the node error handler sends a bug
FINAL_ANSWER_INSTRUCTION = (
    "You cannot call tools any more in this turn. Answer the user now from the results above, "
    "and say plainly what is still missing."
)


def failure_handler(state: AgentState, runtime: Runtime[AgentContext]) -> dict:
    """End the turn with an answer that says what failed, how often it was tried, and what to do."""
    error = state.get("last_error") or LastError(
        kind="internal", message="the turn failed for an unknown reason", retry_after=None
    )
    closing = cancelled_results(dangling_tool_calls(state["messages"]), "the turn failed")
    context = runtime.context
    text = failure_text(
        error, state.get("retry_count", 0), context.max_retries, context.max_retry_after
    )
    reply = AIMessage(content=text, id=new_message_id("ai"))
    return {"messages": [*closing, reply], "status": "failed"}


def failure_text(
    error: LastError, attempts: int, max_retries: int, max_retry_after: float = 60.0
) -> str:
    retry_after = error.get("retry_after")
    if retry_after is not None and retry_after > max_retry_after:
        return (
            f"The model endpoint is rate limited; retry after {retry_after:.0f} s "
            f"(longer than the {max_retry_after:.0f} s Waypoint waits): {error['message']}\n"
            "Send your message again later."
        )
    tried = f"after {attempts + 1} attempts" if attempts else "on the first attempt"
    advice = {
        "model_transient": "Check that the model endpoint is up, then send your message again.",
        "model_fatal": "Fix the model configuration (see `python -m app chat --help`), then "
        "send your message again.",
        "context_overflow": "Start a new thread (/new) or shorten the conversation.",
        "tool": "Rephrase the request, or check the file names and values it uses.",
        "internal": "This is a bug in Waypoint; the thread is intact and you can go on. "
        "Run with --debug to see the traceback.",
    }[error["kind"]]
    what = {
        "model_transient": "The model call kept failing",
        "model_fatal": "The model call failed",
        "context_overflow": "The conversation no longer fits the model's context",
        "tool": "The tool calls kept failing",
        "internal": "An internal error stopped this turn",
    }[error["kind"]]
    return f"{what} {tried} (retry budget {max_retries}): {error['message']}\n{advice}"


def finalize(state: AgentState, runtime: Runtime[AgentContext]) -> dict:
    """Budget spent or a loop detected: close open calls, then one last answer without tools."""
    status, reason = stop_reason(state, runtime.context)
    closing = cancelled_results(dangling_tool_calls(state["messages"]), f"stopped by {reason}")
    messages = [*state["messages"], *closing]
    prompt = [*model_input(messages, runtime.context), SystemMessage(FINAL_ANSWER_INSTRUCTION)]
    # A last answer is best effort; the fallback always works.
    reply = call_model(runtime.context.model, prompt, answer_only=True)
    text = reply.message.content if reply.message is not None else budget_text(messages, reason)
    return {
        "messages": [*closing, AIMessage(content=text, id=new_message_id("ai"))],
        "status": status,
    }


def stop_reason(state: AgentState, context: AgentContext) -> tuple[str, str]:
    """(status, words for the user) of a turn that finalize ends early."""
    if is_looping(state):
        return "loop_detected", "a repeated identical tool call"
    budget = state.get("budget_exhausted")
    if budget == "time":
        return "budget_exhausted", f"the time budget ({context.max_seconds:g} s per turn)"
    if budget == "tokens":
        return "budget_exhausted", f"the token budget ({context.max_tokens_per_turn} per turn)"
    return "max_iterations", "the step budget"


def budget_text(messages: list[AnyMessage], reason: str) -> str:
    done = [m for m in current_turn(messages) if m.type == "tool" and m.status != "error"]
    steps = "\n".join(f"- {m.name}: {str(m.content)[:200]}" for m in done) or "- (nothing yet)"
    return f"I stopped because of {reason}. What was done so far:\n{steps}"


def on_node_error(
    state: AgentState, error: NodeError, runtime: Runtime[AgentContext]
) -> Command[ErrorRoute]:
    """A bug inside a node: record it and let the failure handler end the turn cleanly."""
    detail = "".join(traceback.format_exception(error.error)).strip()
    summary = f"{type(error.error).__name__}: {error.error}"
    runtime.stream_writer(
        {"type": "error", "node": error.node, "error": summary, "traceback": detail}
    )
    message = f"{error.node}: {summary}"
    last = LastError(kind="internal", message=message, retry_after=None)
    return Command(goto="failure_handler", update={"last_error": last})
